"""Task parameters: a suite's episode filter and the run settings, as ``-T name=value`` pairs.

The filter parameters are the fields of the suite's ``selection`` model, as ``commitbench run`` makes
its flags from the same model (:mod:`commitbench.commands.filters`, one layer up): a field of the model
is a parameter with no change here. ``inspect eval -T`` reads each value as YAML, so a list comes as a
YAML list (``-T cells=[BASE,PEER-DIRECT]``) or as one comma-separated string (``-T cells=BASE,PEER-DIRECT``),
and the model validates the rest (ints, enums, booleans). The settings that are not filters are
:class:`TaskSettings`' fields: interventions, samples, the chat protocol, the call bound per turn.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.config import CHAT_AGENT, ExperimentConfig
from commitbench.modelentry import ModelEntry
from commitbench.suites import AnySuite

__all__ = [
    "DATA_KEY", "TaskSettings", "experiment_config", "filter_fields", "is_list_field", "settings_from_parameters",
    "split_parameters",
]


# The task metadata's key of the episode data's version check (commitbench.dataversion.DataCheck as JSON).
DATA_KEY = "episode_data"


class TaskSettings(BaseModel):
    """What a task plays besides its episode filter (every field is also a ``-T`` parameter)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interventions: list[str] = Field(
        default_factory=list, description="One intervention stack, innermost first (names or name[key=value] labels)."
    )
    samples: int | None = Field(
        default=None, ge=1, description="Samples per episode, the task's epochs (null: the eval's --epochs, 1 "
        "without it; a count that differs from --epochs is refused).",
    )
    protocol: str | None = Field(
        default=None, description="The chat agent's turn protocol: auto (text is the reply) or tools_only."
    )
    max_model_calls_per_turn: int | None = Field(
        default=None, ge=1, description="Model calls the chat agent may make in one turn (null: the suite's default)."
    )
    seed: int = Field(default=0, description="Seed passed to env.reset.")
    n_boot: int = Field(default=1000, ge=1, description="Bootstrap replicates of the cluster intervals in the metrics.")
    cache: bool = Field(default=False, description="Use inspect's model-output cache for every call (no expiry).")
    grader: str | None = Field(
        default=None, description="An inspect model (provider/name) for the model role 'grader': the scorer labels "
        "with the suite's LLM labeller on it (the same as --model-role grader=...; null: the offline labeller).",
    )
    allow_unversioned: bool = Field(
        default=False, description="Play episode data whose files changed since its VERSION was locked (as "
        "commitbench run --allow-unversioned; the task's metadata records the data's digest and state).",
    )


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """A field's value type without None, and whether the field holds a list of it."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(kept[0]) if len(kept) == 1 else (annotation, False)
    if origin in (list, tuple, Sequence):
        inner, _ = _unwrap(typing.get_args(annotation)[0])
        return inner, True
    return annotation, False


def filter_fields(suite: AnySuite) -> list[str]:
    """The suite's filter fields, in the model's order (each one a task parameter)."""
    return list(suite.selection.model_fields)


def is_list_field(suite: AnySuite, name: str) -> bool:
    """Whether a filter field takes several values."""
    return _unwrap(suite.selection.model_fields[name].annotation)[1]


def _as_list(value: Any) -> list[Any]:
    """A list from a YAML list, or from one comma-separated string."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def _coerced(suite: AnySuite, name: str, value: Any) -> Any:
    """A ``-T`` value as the filter model takes it: a comma-separated string for a list field becomes a list."""
    return _as_list(value) if is_list_field(suite, name) else value


def split_parameters(suite: AnySuite, parameters: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Given task parameters -> (filter values, settings values); a name neither takes is a ValueError naming
    both lists. A parameter given as None is left out (the default applies)."""
    fields = set(filter_fields(suite))
    own = set(TaskSettings.model_fields)
    filters: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    for name, value in parameters.items():
        if value is None:
            continue
        if name in fields:
            filters[name] = _coerced(suite, name, value)
        elif name in own:
            settings[name] = _as_list(value) if name == "interventions" else value
        else:
            raise ValueError(
                f"the {suite.name} task has no parameter {name!r}; its episode filter takes "
                f"{', '.join(sorted(fields))}, and the task takes {', '.join(sorted(own))}"
            )
    return filters, settings


def settings_from_parameters(suite: AnySuite, parameters: Mapping[str, Any]) -> tuple[dict[str, Any], TaskSettings]:
    """The episode filter (with the suite's shorthand defaults, as ``commitbench run SUITE`` applies them) and
    the settings a task's parameters give."""
    filters, settings = split_parameters(suite, parameters)
    return suite.shorthand_episodes(filters), TaskSettings.model_validate(settings)


def experiment_config(suite: AnySuite, episodes: Mapping[str, Any], settings: TaskSettings,
                      model: ModelEntry, name: str, samples: int) -> ExperimentConfig:
    """The config ``commitbench run SUITE --agent chat`` would build for the same filter, model and settings, with
    ``samples`` samples per episode (the eval's epochs): its cells (and run keys) are the ones the task plays."""
    profile = episodes.get("profile") or "commitbench"
    return ExperimentConfig(
        name=name, env=suite.env_id, agents=[CHAT_AGENT], models=[model], episodes=dict(episodes),
        samples=samples, interventions=[settings.interventions] if settings.interventions else ["none"],
        profile=profile, max_model_calls_per_turn=settings.max_model_calls_per_turn, seed=settings.seed,
    )
