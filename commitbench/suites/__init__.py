"""Suites: one record per environment id, the only place where the pipeline learns what a suite is.

Everything else exists once and serves every suite: the config, the runner (lock, manifest, writer,
crash isolation, resume, replay), the intervention registry, the labeller protocol and its loop, the
model client and cache, and the command-line verbs, which read the suite from a run's manifest. A
:class:`Suite` supplies what differs. It is generic in the suite's filter, episode and label-record
types, so a suite module's functions take and return its own types and mypy checks them (strict);
generic code holds an :data:`AnySuite`.

* ``selection``: its episode filter (a pydantic model; the ``episodes:`` section of a config) and
  ``select``, which turns a filter into episodes (objects with an ``id``);
* ``make_env``: the base environment over the selected episodes (the runner wraps it with the
  interventions of an arm, through the one registry, with the suite's ``services``);
* the chat agent class (its reference agents, which read the script through the privileged channel,
  are registered by name in :mod:`commitbench.agents.registry`);
* ``labeller``: builds a labeller by kind (``rules`` offline, ``llm`` with a model client), and
  ``label_record``, the record type it stores;
* ``report``: builds the typed report of a run directory from its traces and labels;
* ``annotation``: the blind sheet, human labels, and agreement (judge against judge, judge against people);
* ``prompt_hashes(selection)`` (data versions for the manifest) and ``calls_per_episode`` (for
  ``run --dry-run``);
* ``episode_set_version(selection)``: the version of the episode set a filter's data compiles, recorded
  in every manifest; the runner and every verb that reads a run directory refuse a directory of another
  version; ``data_directory(selection)``: the directory those episodes come from, whose ``VERSION.lock``
  says whether its files are still that version (:mod:`commitbench.dataversion`; ``data_check``);
* ``labeller(kind, client=None, *, run_dir=None, ...)``: ``run_dir`` lets a suite read the episodes the
  run was played on (its data directory is part of the run's filter); ``labeller_version(name)`` gives the
  current version of the labeller stored under a name and whether it is offline (cheap), so that stored
  labels of another version are never read (:func:`commitbench.judges.labelling.check_versions`).
* ``view``: its runs for the viewer (``commitbench view``): run-list columns, rows and transcript pages.
* ``services(play)``: what its interventions need from the harness while cells play (the rewrite fix's
  flagger), built from :class:`PlayServices` (the run's judge client, when its config names an LLM judge);
  ``service_identity(name, judge)``: the identity of one such service under a judge config, which enters
  the run key of every cell whose arm uses it (an intervention entry's ``services``).
* ``default_agents``: the players of ``commitbench run SUITE`` when no ``--agent`` is given (none: the
  flag is required), and ``shorthand_episodes``: the filter defaults of that shorthand, given the filter
  values on the command line (each field of the filter is a flag there, :mod:`commitbench.commands.filters`).

* ``dataset``, ``inspect``, ``report_options``: what the suite adds to ``commitbench export`` (its
  signals, arm labels and data sources), to its inspect task (how a labelled trace becomes a score, and
  the task's metrics) and to ``commitbench report`` (a model whose fields become flags); each has a
  generic default (:mod:`commitbench.suites.kits`), so a new suite exports, plays in inspect and reports
  before it says anything of its own.

Suites are registered through the ``commitbench.suites`` entry-point group (:mod:`commitbench.plugins`):
commitbench's own two in its ``pyproject.toml``, a plug-in's in its own. Adding a suite is one module
that builds a :class:`Suite`, its data, and one entry point; ``docs/architecture.md`` walks through one.
:func:`register_suite` adds one in code (a test's own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar

import gymnasium as gym
from pydantic import BaseModel, Field

from commitbench import plugins
from commitbench.agents.chat import ChatAgent
from commitbench.analysis.tables import TableView
from commitbench.analysis.view.model import RunSource
from commitbench.dataversion import VERSION_FILE, DataCheck, check_data, combine_checks
from commitbench.judges.labelling import Labeller, LabelRecord
from commitbench.llm.structured import DEFAULT_MAX_ATTEMPTS, ResponseFormatStyle
from commitbench.memory import freeze_startup_objects
from commitbench.modelentry import ModelEntry
from commitbench.oracles.standing.parties import PartyBudget
from commitbench.suites.kits import InspectKit, NoReportOptions, SuiteDataset
from commitbench.textslots import SuppliedTexts

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

__all__ = [
    "AnnotationKit",
    "AnySuite",
    "EpisodeLike",
    "EpisodeSetMismatchError",
    "JudgeSpec",
    "LabellerFactory",
    "PlayServices",
    "ReportOptions",
    "Suite",
    "SuiteReport",
    "UnknownSuiteError",
    "broken_suite_plugins",
    "get_suite",
    "register_suite",
    "suite_for_env",
    "suite_source",
    "suites",
    "unregister_suite",
]


class EpisodeLike(Protocol):
    """What the pipeline needs of a suite's episode: its id (unique in the suite's episode set)."""

    @property
    def id(self) -> str: ...


SelectionT = TypeVar("SelectionT", bound=BaseModel)
EpisodeT = TypeVar("EpisodeT", bound=EpisodeLike)
RecordT = TypeVar("RecordT", bound=LabelRecord)


@dataclass(frozen=True)
class PlayServices:
    """What the runner hands a suite's interventions while cells play."""

    judge: ModelClient | None = None  # the run's LLM judge (through the run's cache), when the config names one
    judge_style: ResponseFormatStyle | None = None  # its response-format style
    judge_attempts: int = DEFAULT_MAX_ATTEMPTS  # attempts per judge item before a judge error is recorded
    party: ModelClient | None = None  # the party model of live parties (through the run's cache), when in play
    party_budget: PartyBudget | None = None  # what the live parties may say beyond the script


class JudgeSpec(Protocol):
    """What a suite reads of a config's judge (a :class:`commitbench.config.JudgeConfig`)."""

    @property
    def kind(self) -> str: ...

    @property
    def model(self) -> ModelEntry | None: ...

    @property
    def response_format(self) -> str | None: ...

    @property
    def max_attempts(self) -> int: ...


class LabellerFactory(Protocol):
    """Builds a suite's labeller by kind: ``rules`` (offline) or ``llm`` (on ``client``); ``run_dir`` lets it
    read the episodes the run was played on."""

    def __call__(
        self, kind: str, client: ModelClient | None = None, style: ResponseFormatStyle = ...,
        max_attempts: int = ..., run_dir: Path | None = None, fresh_retries: bool = ...,
    ) -> Labeller[Any]: ...


class SuiteReport(Protocol):
    """What every suite's report offers: JSON through pydantic, tables and lines for a console."""

    files: dict[str, list[str]]

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]: ...

    def views(self, detail: bool = False) -> list[TableView]: ...

    def summary_lines(self) -> list[str]: ...


class ReportOptions(BaseModel):
    """What a report is asked for."""

    judge: str | None = Field(default=None, description="The judge whose labels are read (null: the offline one).")
    n_boot: int = Field(default=1000, description="Bootstrap replicates of every interval.")
    seed: int = Field(default=0, description="Seed of the bootstrap.")
    baseline: str | None = Field(default=None, description="The arm every other arm is compared with.")
    figure: bool = Field(default=True, description="Draw the figures (PNG) with the tables.")
    write_files: bool = Field(default=True, description="Write the tables and figures (under files_dir).")
    files_dir: Path | None = Field(
        default=None, description="Where the tables and figures are written (null: RUN/report/)."
    )
    paper_tables: Path | None = Field(
        default=None, description="Write the suite's paper's tables and figures (and their index) into this directory."
    )
    labels_dir: Path | None = Field(
        default=None, description="A directory of labels written by 'commitbench label --out', read before the "
        "run directory's (null: the run directory's only).",
    )
    compare: list[tuple[str, str]] = Field(
        default_factory=list,
        description="Model pairs to compare, a minus b (labels, or label@arm); thinking pairs are added unasked.",
    )
    suite_options: dict[str, Any] = Field(
        default_factory=dict,
        description="The suite's own report options (its Suite.report_options model's fields, e.g. the standing "
        "suite's leave_out_types), as given; the suite validates them.",
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
    agreement: Callable[[Path, str, str, Path | None], Any]  # run_dir, judge A, judge B, labels dir -> report


def _no_hashes(selection: Any) -> dict[str, str]:
    return {}


def _one_call(episode: Any) -> int:
    return 1


def _no_services(play: PlayServices) -> Mapping[str, Any]:
    return {}


def _no_service(name: str, judge: JudgeSpec) -> dict[str, Any]:
    raise ValueError(f"the suite has no service {name!r}")


def _as_given(episodes: dict[str, Any]) -> dict[str, Any]:
    return episodes


@dataclass(frozen=True)
class Suite(Generic[SelectionT, EpisodeT, RecordT]):
    """One environment id's plug-in, typed by its episode filter, its episodes and its label records (see the
    module docstring); the suite modules build theirs with their own types, generic code holds an
    :data:`AnySuite`."""

    name: str
    env_id: str
    selection: type[SelectionT]
    select: Callable[[SelectionT], Sequence[EpisodeT]]
    make_env: Callable[[Sequence[EpisodeT], SuppliedTexts | None], gym.Env[Any, Any]]  # episodes, texts -> env
    label_record: type[RecordT]
    labeller: LabellerFactory
    labeller_version: Callable[[str], tuple[str, bool]]
    report: Callable[[Path, ReportOptions], SuiteReport]
    annotation: AnnotationKit | None = None
    prompt_hashes: Callable[[SelectionT], dict[str, str]] = _no_hashes
    calls_per_episode: Callable[[EpisodeT], int] = _one_call
    chat_agent: type[ChatAgent] = ChatAgent
    default_max_model_calls_per_turn: int = 6
    # The last model call of a turn offers no tools, so it gives the reply (the follow-up suite's turn loop).
    closing_call_without_tools: bool = False
    services: Callable[[PlayServices], Mapping[str, Any]] = _no_services
    service_identity: Callable[[str, JudgeSpec], dict[str, Any]] = _no_service
    view: Callable[[Path, str, Path | None], RunSource] | None = None  # run dir, judge, labels dir -> the runs
    offline_labeller: str = "rules"
    episode_set_version: Callable[[SelectionT], str] | None = None
    # The data directory a filter's episodes come from, whose VERSION.lock says whether its files are still
    # the version they claim (commitbench.dataversion); None: the suite keeps no such directory.
    data_directory: Callable[[SelectionT], Path] | None = None
    # The data directory's overlays a filter plays (e.g. languages/tr), each with its own VERSION and lock; the
    # data check covers them with the directory (None: a filter plays the directory alone).
    data_overlays: Callable[[SelectionT], list[tuple[str, str]]] | None = None
    # The players of ``commitbench run SUITE`` when no --agent is given (empty: --agent is required).
    default_agents: tuple[str, ...] = ()
    # The shorthand's defaults for the episode filter (given the filter values on the command line).
    shorthand_episodes: Callable[[dict[str, Any]], dict[str, Any]] = _as_given
    # What it adds to 'commitbench export' (None: the generic kit, commitbench.suites.kits).
    dataset: SuiteDataset | None = None
    # How its inspect task grades a labelled trace and computes its metrics (None: the generic grade).
    inspect: InspectKit | None = None
    # Its own report options: each field is a flag of 'commitbench report' (ReportOptions.suite_options).
    report_options: type[BaseModel] = NoReportOptions

    def describe(self) -> str:
        return f"{self.name} ({self.env_id})"

    def set_version(self, selection: SelectionT) -> str | None:
        """The version of the episode set a filter compiles to (None: the suite has no versions)."""
        return self.episode_set_version(selection) if self.episode_set_version is not None else None

    def data_check(self, selection: SelectionT) -> DataCheck | None:
        """The filter's data directory against its version and lock (None: the suite has no versioned data)."""
        version = self.set_version(selection)
        if self.data_directory is None or version is None:
            return None
        root = self.data_directory(selection)
        overlays = self.data_overlays(selection) if self.data_overlays is not None else []
        if not overlays:
            return check_data(root, version)
        parts = [check_data(root, _own_version(root))]
        parts += [check_data(root / folder, overlay_version) for folder, overlay_version in overlays]
        return combine_checks(parts, version)

    def check_set_version(self, recorded: str | None, run_dir: Path, selection: SelectionT) -> None:
        """Refuse a run directory whose episode-set version differs from the one this checkout compiles."""
        current = self.set_version(selection)
        if current is None or recorded == current:
            return
        made = f"version {recorded}" if recorded else "a version from before versions were recorded"
        raise EpisodeSetMismatchError(
            f"{run_dir} was played on {made} of the {self.name} episode set; this checkout compiles version "
            f"{current}. Episode texts and ids differ between versions, so their runs cannot be mixed or read "
            "together: start a new run directory, or read this one with the version of commitbench that made it"
        )

    def annotation_kit(self) -> AnnotationKit:
        """The suite's human-validation pieces; a clear error for a suite that has none."""
        if self.annotation is None:
            raise ValueError(f"the {self.name} suite has no annotation sheet, human labels or agreement measures")
        return self.annotation


# What generic code (the config, the runner, the commands) holds: a suite of any types.
AnySuite: TypeAlias = "Suite[Any, Any, Any]"


_SUITES: dict[str, AnySuite] = {}
_SOURCES: dict[str, plugins.Plugin] = {}
_BROKEN: list[plugins.BrokenPlugin] = []
_loaded_at: int | None = None
_lock = threading.RLock()
# The package whose entry points register the built-in suites.
_OWN_PACKAGE = "commitbench"


class UnknownSuiteError(ValueError):
    """No suite is registered under a name or an environment id."""


def _own_version(root: Path) -> str:
    """What a data directory's VERSION file says (its overlays have their own)."""
    return (root / VERSION_FILE).read_text(encoding="utf-8").strip()


class EpisodeSetMismatchError(ValueError):
    """A run directory was played on another version of its suite's episode set than this checkout compiles."""


def register_suite(suite: AnySuite) -> None:
    """Add a suite; a second suite with the same name or environment id is an error."""
    with _lock:
        for other in _SUITES.values():
            if other is not suite and (other.name == suite.name or other.env_id == suite.env_id):
                raise ValueError(f"suite {suite.describe()} clashes with {other.describe()}")
        _SUITES[suite.name] = suite


def unregister_suite(name: str) -> None:
    """Remove a suite (a plug-in that is unloaded, or a test's own suite)."""
    with _lock:
        _SUITES.pop(name, None)
        _SOURCES.pop(name, None)


def _check(plugin: plugins.Plugin, value: Any) -> None:
    if not isinstance(value, Suite):
        raise TypeError(f"names a {type(value).__name__}, not a commitbench.suites.Suite")


def _load() -> None:
    """Register the suites of the commitbench.suites entry points (again after plugins.refresh())."""
    global _loaded_at
    with _lock:
        if _loaded_at == plugins.generation():
            return
        _loaded_at = plugins.generation()
        broken = plugins.sync(plugins.Group.SUITES, _check, lambda item: [(item.value.name, item.value)],
                              register_suite, _SUITES, _SOURCES)
        _BROKEN[:] = broken
        freeze_startup_objects("suites")  # the suites' modules are imported (once): the collector need not walk them
        if not any(p.package == _OWN_PACKAGE for p in _SOURCES.values()):
            own = [b.describe() for b in broken if b.plugin.package == _OWN_PACKAGE]
            raise RuntimeError(
                "commitbench's own suites are not registered: " + ("; ".join(own) if own else
                "the package's entry points are missing (is it installed? 'pip install -e .' in a checkout)")
            )


def suites() -> list[AnySuite]:
    """Every registered suite, by name."""
    _load()
    return [_SUITES[name] for name in sorted(_SUITES)]


def _unknown(what: str) -> str:
    broken = "".join(f"; a plug-in failed to load: {b.describe()}" for b in _BROKEN)
    return f"{what}{broken}"


def get_suite(name: str) -> AnySuite:
    """The suite registered under ``name``."""
    _load()
    suite = _SUITES.get(name)
    if suite is None:
        raise UnknownSuiteError(_unknown(f"unknown suite {name!r} (known: {', '.join(sorted(_SUITES))})"))
    return suite


def suite_for_env(env_id: str) -> AnySuite:
    """The suite of an environment id."""
    _load()
    for suite in _SUITES.values():
        if suite.env_id == env_id:
            return suite
    known = ", ".join(f"{s.env_id} ({s.name})" for s in _SUITES.values())
    raise UnknownSuiteError(_unknown(f"no suite plays {env_id!r} (known: {known})"))


def suite_source(name: str) -> plugins.Plugin | None:
    """The entry point that registered a suite (None: registered in code)."""
    _load()
    return _SOURCES.get(name)


def broken_suite_plugins() -> list[plugins.BrokenPlugin]:
    """Entry points of the commitbench.suites group that could not be loaded."""
    _load()
    return list(_BROKEN)
