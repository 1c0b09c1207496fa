"""Suites: one record per environment id, the only place where the pipeline learns what a suite is.

Everything else exists once and serves every suite: the config, the runner (lock, manifest, writer,
crash isolation, resume, replay), the intervention registry, the labeller protocol and its loop, the
model client and cache, and the command-line verbs, which read the suite from a run's manifest. A
:class:`Suite` supplies what differs:

* ``selection``: its episode filter (a pydantic model; the ``episodes:`` section of a config) and
  ``select``, which turns a filter into episodes (objects with an ``id``);
* ``make_env``: the base environment over the selected episodes (the runner wraps it with the
  interventions of an arm, through the one registry, with the suite's ``services``);
* the players: its reference agents (which read the script through the privileged channel) and
  the chat agent class;
* ``labeller``: builds a labeller by kind (``rules`` offline, ``llm`` with a model client), and
  ``label_record``, the record type it stores;
* ``report``: builds the typed report of a run directory from its traces and labels;
* ``annotation``: the blind sheet, human labels, and agreement (judge against judge, judge against people);
* ``prompt_hashes(selection)`` (data versions for the manifest) and ``calls_per_episode`` (for
  ``run --dry-run``);
* ``episode_set_version(selection)``: the version of the episode set a filter's data compiles, recorded
  in every manifest; the runner and every verb that reads a run directory refuse a directory of another
  version;
* ``labeller(kind, client=None, *, run_dir=None, ...)``: ``run_dir`` lets a suite read the episodes the
  run was played on (its data directory is part of the run's filter); ``labeller_version(name)`` gives the
  current version of the labeller stored under a name and whether it is offline (cheap), so that stored
  labels of another version are never read (:func:`commitbench.judges.labelling.check_versions`).
* ``view``: its runs for the viewer (``commitbench view``): run-list columns, rows and transcript pages.
* ``services(play)``: what its interventions need from the harness while cells play (the rewrite fix's
  flagger), built from :class:`PlayServices` (the run's judge client, when its config names an LLM judge);
  ``service_identity(name, judge)``: the identity of one such service under a judge config, which enters
  the run key of every cell whose arm uses it (an intervention entry's ``services``).

Adding a suite is one module that builds a :class:`Suite` and calls :func:`register_suite`, plus its
data; ``docs/architecture.md`` walks through one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
from pydantic import BaseModel, Field

from commitbench.agents.chat import ChatAgent
from commitbench.analysis.tables import TableView
from commitbench.analysis.view.model import RunSource
from commitbench.judges.labelling import Labeller, LabelRecord

__all__ = [
    "AnnotationKit",
    "PlayServices",
    "ReportOptions",
    "Suite",
    "SuiteReport",
    "UnknownSuiteError",
    "get_suite",
    "register_suite",
    "suite_for_env",
    "suites",
    "unregister_suite",
]


@dataclass(frozen=True)
class PlayServices:
    """What the runner hands a suite's interventions while cells play."""

    judge: Any = None  # the run's LLM judge as a ModelClient (through the run's cache), when the config names one
    judge_style: Any = None  # its response-format style
    judge_attempts: int = 3  # attempts per judge item before a judge error is recorded


class SuiteReport(Protocol):
    """What every suite's report offers: JSON through pydantic, tables and lines for a console."""

    files: dict[str, list[str]]

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]: ...

    def views(self, detail: bool = False) -> list[TableView]: ...

    def summary_lines(self) -> list[str]: ...


class ReportOptions(BaseModel):
    """What a report is asked for."""

    judge: str | None = None
    n_boot: int = 1000
    seed: int = 0
    baseline: str | None = None
    figure: bool = True
    write_files: bool = True
    compare: list[tuple[str, str]] = Field(
        default_factory=list,
        description="Model pairs to compare, a minus b (labels, or label@arm); thinking pairs are added unasked.",
    )
    leave_out_types: list[str] = Field(
        default_factory=list,
        description="Standing: commitment types left out of every table (e.g. post_announcement, as the paper's "
        "robustness table leaves out its artefact).",
    )


@dataclass(frozen=True)
class AnnotationKit:
    """A suite's human-validation pieces (see :mod:`commitbench.analysis.annotation`)."""

    sheet_columns: tuple[str, ...]
    required_columns: tuple[str, ...]  # what a filled sheet must have (tells the suite of a sheet)
    export: Callable[[Path, int, Path, int, str | None], int]  # run_dir, n, out, seed, judge -> rows written
    read_sheet: Callable[[Path], tuple[list[BaseModel], int]]  # sheet -> labels, rows left blank
    human_label: type[BaseModel]
    validate: Callable[[Sequence[Any], Path, str], Any]  # human labels, run_dir, judge -> report with views()
    agreement: Callable[[Path, str, str], Any]  # run_dir, judge A, judge B -> report with views()


@dataclass(frozen=True)
class Suite:
    """One environment id's plug-in: see the module docstring."""

    name: str
    env_id: str
    selection: type[BaseModel]
    select: Callable[[BaseModel], Sequence[Any]]
    make_env: Callable[[Sequence[Any]], gym.Env[Any, Any]]
    label_record: type[LabelRecord]
    labeller: Callable[..., Labeller[LabelRecord]]
    labeller_version: Callable[[str], tuple[str, bool]]
    report: Callable[[Path, ReportOptions], SuiteReport]
    annotation: AnnotationKit | None = None
    prompt_hashes: Callable[[BaseModel], dict[str, str]] = field(default=lambda selection: {})
    calls_per_episode: Callable[[Any], int] = field(default=lambda episode: 1)
    chat_agent: type[Any] = ChatAgent
    default_max_model_calls_per_turn: int = 6
    # The last model call of a turn offers no tools, so it gives the reply (the follow-up suite's turn loop).
    closing_call_without_tools: bool = False
    reference_agents: Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    services: Callable[[PlayServices], Mapping[str, Any]] = field(default=lambda play: {})
    service_identity: Callable[[str, Any], dict[str, Any]] = field(default=lambda name, judge: {})
    view: Callable[[Path, str], RunSource] | None = None  # run dir, judge -> the runs for the viewer
    offline_labeller: str = "rules"
    episode_set_version: Callable[[BaseModel], str] | None = None

    def describe(self) -> str:
        return f"{self.name} ({self.env_id})"

    def annotation_kit(self) -> AnnotationKit:
        """The suite's human-validation pieces; a clear error for a suite that has none."""
        if self.annotation is None:
            raise ValueError(f"the {self.name} suite has no annotation sheet, human labels or agreement measures")
        return self.annotation


_SUITES: dict[str, Suite] = {}
_BUILTIN_MODULES = ("commitbench.suites.standing", "commitbench.suites.followup")
_loaded = False


class UnknownSuiteError(ValueError):
    """No suite is registered under a name or an environment id."""


def register_suite(suite: Suite) -> None:
    """Add a suite; a second suite with the same name or environment id is an error."""
    for other in _SUITES.values():
        if other is not suite and (other.name == suite.name or other.env_id == suite.env_id):
            raise ValueError(f"suite {suite.describe()} clashes with {other.describe()}")
    _SUITES[suite.name] = suite


def unregister_suite(name: str) -> None:
    """Remove a suite (a plug-in that is unloaded, or a test's own suite)."""
    _SUITES.pop(name, None)


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib

    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def suites() -> list[Suite]:
    """Every registered suite, by name."""
    _load_builtins()
    return [_SUITES[name] for name in sorted(_SUITES)]


def get_suite(name: str) -> Suite:
    """The suite registered under ``name``."""
    _load_builtins()
    suite = _SUITES.get(name)
    if suite is None:
        raise UnknownSuiteError(f"unknown suite {name!r} (known: {', '.join(sorted(_SUITES))})")
    return suite


def suite_for_env(env_id: str) -> Suite:
    """The suite of an environment id."""
    _load_builtins()
    for suite in _SUITES.values():
        if suite.env_id == env_id:
            return suite
    known = ", ".join(f"{s.env_id} ({s.name})" for s in _SUITES.values())
    raise UnknownSuiteError(f"no suite plays {env_id!r} (known: {known})")
