"""Experiment configs: which agents and models play which episodes of which suite under which interventions.

A config is a YAML file validated by :class:`ExperimentConfig` (unknown keys are errors). ``env``
selects the suite (:mod:`commitbench.suites`); ``episodes`` is that suite's episode filter (the
standing suite's ``split, cells, types, policies, gaps, surfaces, ids, limit``; the follow-up suite's
``setups, variants, personas, categories, requests, ids, limit``). The runner
(:mod:`commitbench.runner`) expands a config into *cells*, one per

    player (a reference agent, or the chat agent on one model) x intervention stack x episode x sample

Reference agents are deterministic and play sample 0 only. ``judge`` names who labels the run
afterwards (``rules``: the suite's offline labeller; ``llm``: an LLM judge on its own ``model``, never
silently the tested one: a judge that serves the same model as a tested entry is refused unless
``judge.allow_tested_model`` says so). See ``docs/runner.md`` for a full example; the smallest config is::

    agents: [creditor-rule]
    episodes: {split: test}

Relative paths (the cache file) are resolved against the current directory.
"""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from commitbench.agents.custom import is_agent_path, load_agent_class, uses_harness_model
from commitbench.agents.registry import find_agent
from commitbench.cache import CacheMode
from commitbench.identity import NO_ARM, arm_label
from commitbench.llm.structured import DEFAULT_MAX_ATTEMPTS
from commitbench.modelentry import (
    LABEL,
    MAX_CONCURRENCY,
    GenerationSettings,
    ModelEntry,
    served_identity,
    thinking_pairs,
)
from commitbench.oracles.registry import InterventionSpec, check_stack
from commitbench.oracles.standing.parties import LIVE_NAME, PartyBudget
from commitbench.profiles import Profile
from commitbench.suites import AnySuite, suite_for_env, suites
from commitbench.textslots import SuppliedTexts, checked_texts, read_texts
from commitbench.yamlfile import YamlError, read_yaml

__all__ = [
    "CHAT_AGENT",
    "MAX_CONCURRENCY",
    "MAX_SAMPLES",
    "CacheConfig",
    "ConfigError",
    "ExperimentConfig",
    "GenerationSettings",
    "InterventionArm",
    "JudgeConfig",
    "ModelEntry",
    "PartyMode",
    "load_config",
    "plays_on_models",
]

CHAT_AGENT = "chat"
# Bounds on the size of an experiment: far above any study, far below what would exhaust the machine
# before a cell is played (docs/runner.md, "Bounds").
MAX_SAMPLES = 1_000


class ConfigError(ValueError):
    """A config file is missing, unreadable or invalid; the message names the file and the field."""


def _refuse_non_finite(value: Any, path: str = "") -> None:
    """A number that is not finite (YAML's ``.inf``, ``.nan``) has no place in a config: refused at load, naming
    the field, rather than failing later where the config is written as JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{path or 'the config'}: {value} is not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_non_finite(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _refuse_non_finite(item, f"{path}.{index}")


class PartyMode(str, Enum):
    """Who speaks for the people of a standing episode."""

    SCRIPTED = "scripted"  # the script's own words (the control)
    LIVE = "live"  # a party model words them and answers the assistant (the ``parties:live`` intervention)


def _party_arms(data: dict[str, Any]) -> dict[str, Any]:
    """``parties: live`` (or ``[scripted, live]``) as arms: each intervention arm is played as it is (scripted)
    and/or with ``parties:live`` on top. The key is sugar, consumed here, so a scripted config is the config it
    always was (its hash unchanged) and a manifest records the arms themselves."""
    if "parties" not in data:
        return data
    data = dict(data)
    value = data.pop("parties")
    modes = [value] if isinstance(value, str | PartyMode) else value
    if not isinstance(modes, list | tuple) or not modes:
        raise ValueError("parties must be scripted, live, or a list of them")
    try:
        chosen = [PartyMode(m) for m in modes]
    except ValueError:
        raise ValueError(f"parties must be scripted or live, got {value!r}") from None
    if len(set(chosen)) != len(chosen):
        raise ValueError("parties names a mode twice")
    arms = [InterventionArm.model_validate(a) for a in data.get("interventions", [InterventionArm()])]
    expanded: list[InterventionArm] = []
    for arm in arms:
        for mode in chosen:
            live = LIVE_NAME in arm.names()
            if mode is PartyMode.LIVE and not live:
                expanded.append(InterventionArm(stack=(*arm.stack, InterventionSpec.parse(LIVE_NAME))))
            elif mode is PartyMode.SCRIPTED and live:
                expanded.append(InterventionArm(stack=tuple(s for s in arm.stack if s.label() != LIVE_NAME)))
            else:
                expanded.append(arm)
    data["interventions"] = expanded
    return data


def _spec(value: Any) -> Any:
    return InterventionSpec.parse(value).model_dump() if isinstance(value, str) else value


def _coerce_arm(value: Any) -> Any:
    """YAML sugar: ``none`` / ``[]`` -> no intervention; ``name`` or ``name[k=v]`` -> [spec]; specs may be labels."""
    if value is None:
        return []
    if isinstance(value, str):
        return [] if value == NO_ARM else [_spec(value)]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        items = [_spec(v) for v in value]
        return [v for v in items if not (isinstance(v, dict) and v.get("name") == NO_ARM)]
    return value


class InterventionArm(BaseModel):
    """A stack of interventions applied together (innermost first); empty means none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stack: tuple[InterventionSpec, ...] = Field(default=(), description="Interventions, innermost first.")

    @model_validator(mode="before")
    @classmethod
    def _from_yaml(cls, value: Any) -> Any:
        if isinstance(value, InterventionArm):
            return value.model_dump()
        if isinstance(value, dict) and not value:
            return {"stack": []}
        if isinstance(value, dict) and set(value) == {"stack"}:
            return {"stack": _coerce_arm(value["stack"])}
        return {"stack": _coerce_arm(value)}

    @field_validator("stack")
    @classmethod
    def _registered(cls, stack: tuple[InterventionSpec, ...]) -> tuple[InterventionSpec, ...]:
        check_stack(stack)
        return stack

    def names(self) -> list[str]:
        """Labels of the stack, innermost first (what traces record)."""
        return [spec.label() for spec in self.stack]

    def label(self) -> str:
        return arm_label(self.names())

    def identity(self) -> list[dict[str, Any]]:
        return [spec.model_dump(mode="json") for spec in self.stack]


class JudgeConfig(BaseModel):
    """Who labels a run after it is played (``commitbench label`` uses the same choice by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(default="rules", description="'rules' (the suite's offline labeller) or 'llm'.")
    model: ModelEntry | None = Field(default=None, description="The judge model, for kind 'llm'.")
    response_format: str | None = Field(
        default=None, description="json_schema or json_object (default: json_object for a local model)."
    )
    max_attempts: int = Field(
        default=DEFAULT_MAX_ATTEMPTS, ge=1, strict=True,
        description="Attempts per item before a judge error is recorded.",
    )
    allow_tested_model: bool = Field(
        default=False,
        description="Let the judge be one of the tested models (it then labels its own replies, so self-preference "
        "can bias its rows); off by default, so a config never does it silently.",
    )

    @model_validator(mode="after")
    def _model_for_llm(self) -> JudgeConfig:
        if self.kind not in ("rules", "llm"):
            raise ValueError(f"judge.kind must be 'rules' or 'llm', got {self.kind!r}")
        if self.kind == "llm" and self.model is None:
            raise ValueError("judge.kind 'llm' needs judge.model (a judge model entry)")
        if self.kind == "rules" and self.model is not None:
            raise ValueError("judge.kind 'rules' uses no model; leave out judge.model")
        if self.response_format not in (None, "json_schema", "json_object"):
            raise ValueError("judge.response_format must be json_schema or json_object")
        return self


class CacheConfig(BaseModel):
    """The model-call cache (SQLite, content-addressed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path | None = Field(default=None, description="Cache database; default OUT/cache.sqlite.")
    mode: CacheMode = Field(
        default=CacheMode.READ_WRITE,
        description="read_write, off, or replay_only (a miss is an error: rebuilds a run with zero calls).",
    )


def plays_on_models(name: str, suite: str) -> bool:
    """Whether a player plays on the config's models: ``chat``, or a class that calls the harness's model
    (``uses_model = True``). An agent of the user's own must import and be a player, a registered one must
    exist for the suite: a ValueError (AgentLoadError, UnknownAgentError) says why not."""
    if name == CHAT_AGENT:
        return True
    if is_agent_path(name):
        return uses_harness_model(load_agent_class(name))
    entry = find_agent(name, suite)
    return isinstance(entry.make, type) and uses_harness_model(entry.make)


class ExperimentConfig(BaseModel):
    """A whole experiment: players x interventions x episodes x samples, and how to run it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        description="Experiment name (shown in the manifest and progress bar; default runs/<name>); left out: the "
        "suite's name."
    )
    env: str = Field(description="Environment id: selects the suite (e.g. commitbench/Standing-v0).")
    agents: list[str] = Field(
        default_factory=lambda: [CHAT_AGENT],
        min_length=1,
        description="'chat' (plays every model), reference agent names (creditor-rule, ...) and/or agents of your "
        "own as module:Class (docs/agents.md).",
    )
    models: list[ModelEntry] = Field(default_factory=list, description="Models the chat agent plays.")
    interventions: list[InterventionArm] = Field(
        default_factory=lambda: [InterventionArm()],
        min_length=1,
        description="Intervention arms; each is 'none', a name, or a list of names / {name, params}.",
    )
    profile: Profile = Field(
        default=Profile.COMMITBENCH,
        description="paper: the suite's design as its paper ran it, for numbers comparable with the paper's "
        "tables; commitbench: the project's own choices (docs/validity.md lists every difference).",
    )
    episodes: SerializeAsAny[BaseModel] = Field(
        default=None, validate_default=True, description="The suite's episode filter (null: every episode)."
    )
    samples: int = Field(
        default=1, ge=1, le=MAX_SAMPLES, strict=True,
        description="Samples per (model, arm, episode) cell of the chat agent.",
    )
    concurrency: int = Field(
        default=32, ge=1, le=MAX_CONCURRENCY, strict=True, description="Episodes played at the same time."
    )
    max_model_calls_per_turn: int | None = Field(
        default=None, ge=1, strict=True,
        description="Model calls the chat agent may make in one turn before it is cut off (null: the suite's default).",
    )
    seed: int = Field(default=0, strict=True, description="Seed passed to env.reset and the retry jitter.")
    cache: CacheConfig = Field(default_factory=CacheConfig, description="Model-call cache.")
    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="Who labels the run afterwards.")
    party_model: str | None = Field(
        default=None,
        description="The entry of models that voices the people in arms with live parties (parties: live, the "
        "parties:live intervention); the chat agent does not play it. Null: no live parties.",
    )
    party_budget: PartyBudget = Field(
        default_factory=PartyBudget,
        description="Answers the live parties may give the assistant (per person, per episode) and how often a text "
        "that fails the manipulation check is written again.",
    )
    texts: SuppliedTexts | None = Field(
        default=None,
        description="A YAML file of texts for the slots the papers print word for word (persona prompts, the time "
        "sentence, stated paragraphs, cards, the rewrite prompt, the release policy and its paraphrases; "
        "commitbench.textslots). Given as a path; recorded with its digest and texts. Null: the project's wording.",
    )

    @field_validator("texts", mode="before")
    @classmethod
    def _read_texts(cls, value: Any) -> Any:
        if isinstance(value, str | Path):
            return read_texts(value)
        if isinstance(value, dict) and "texts" in value:  # as a manifest records it: checked again
            return {**value, "texts": checked_texts(value["texts"], str(value.get("source", "texts")))}
        return value

    @model_validator(mode="after")
    def _texts_fit(self) -> ExperimentConfig:
        if self.texts is not None:
            self.texts.check_profile(suite_for_env(self.env).name, self.profile.value)
        return self

    @model_validator(mode="before")
    @classmethod
    def _suite_given(cls, data: Any) -> Any:
        # No suite is the default one: a config names its environment; its name defaults to the suite's.
        if not isinstance(data, dict):
            return data
        _refuse_non_finite(data)
        env = data.get("env")
        if env is None:
            known = ", ".join(suite.env_id for suite in suites())
            raise ValueError(f"env is required: the environment id of the suite to play (one of {known})")
        if data.get("name") is None and isinstance(env, str):
            data = {**data, "name": suite_for_env(env).name}
        return _party_arms(data)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        # The default run directory is runs/<name>: a name must stay one plain folder name inside it.
        if not LABEL.match(name):
            raise ValueError(f"name {name!r} must be letters, digits, '.', '_' or '-', starting with a letter or digit")
        return name

    @field_validator("env")
    @classmethod
    def _known_env(cls, env: str) -> str:
        suite_for_env(env)  # raises naming the known suites
        return env

    @field_validator("episodes", mode="before")
    @classmethod
    def _suite_filter(cls, value: Any, info: ValidationInfo) -> Any:
        env = info.data.get("env")
        if env is None:
            return value  # the env error is reported instead
        suite = suite_for_env(env)
        selection = suite.selection
        profile = Profile(info.data.get("profile", Profile.COMMITBENCH))
        if "profile" not in selection.model_fields:
            if profile is not Profile.COMMITBENCH:
                raise ValueError(f"the {suite.name} suite has no {profile.value!r} profile")
        elif value is None or isinstance(value, dict | selection):
            data = value.model_dump() if isinstance(value, selection) else dict(value or {})
            given = data.get("profile")
            if given is not None and given not in (profile, profile.value):
                raise ValueError(
                    f"episodes.profile is {given!r} but the config's profile is {profile.value!r}: "
                    "set the profile once, at the top level of the config"
                )
            value = {**data, "profile": profile}
        if isinstance(value, selection):
            return value
        try:
            return selection.model_validate(value or {})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<filter>'}: {e['msg']}" for e in exc.errors())
            raise ValueError(problems) from None

    @property
    def suite(self) -> AnySuite:
        """The suite this config plays."""
        return suite_for_env(self.env)

    @property
    def calls_per_turn(self) -> int:
        """Model calls the chat agent may make in one turn (the config's, else the suite's default)."""
        return self.max_model_calls_per_turn or self.suite.default_max_model_calls_per_turn

    def tested_models(self) -> list[ModelEntry]:
        """The model entries the players play on: every entry but the party model."""
        return [m for m in self.models if m.name != self.party_model]

    def live_parties(self) -> bool:
        """Whether an arm plays live parties."""
        return any(LIVE_NAME in arm.names() for arm in self.interventions)

    def party_entry(self) -> ModelEntry | None:
        """The party model's entry (None: no live parties)."""
        return next((m for m in self.models if m.name == self.party_model), None)

    @model_validator(mode="after")
    def _parties_fit(self) -> ExperimentConfig:
        if self.party_model is not None and self.party_entry() is None:
            known = ", ".join(m.name for m in self.models) or "none"
            raise ValueError(f"party_model {self.party_model!r} names no entry of models (they are: {known})")
        if not self.live_parties():
            if self.party_model is not None:
                raise ValueError("party_model is set but no arm plays live parties (parties: live)")
            return self
        if self.party_model is None:
            raise ValueError("live parties need party_model: the name of an entry of models that voices the people")
        if self.judge.kind != "llm":
            raise ValueError("live parties need judge.kind: llm, whose model checks every text the party model writes")
        return self

    @model_validator(mode="after")
    def _models_match_agents(self) -> ExperimentConfig:
        suite = self.suite
        # the players that play on the config's models (an unknown or broken one raises, saying why)
        model_users = [name for name in self.agents if plays_on_models(name, suite.name)]
        if len(set(self.agents)) != len(self.agents):
            raise ValueError("an agent is listed twice")
        for arm in self.interventions:
            check_stack(arm.stack, env_id=self.env)
        tested = self.tested_models()
        if model_users and not tested:
            raise ValueError(f"agent {model_users[0]!r} plays on the config's models: name at least one under models")
        if tested and not model_users:
            raise ValueError("models are listed but no agent plays on them ('chat', or an agent of your own with "
                             "uses_model = True, docs/agents.md)")
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique, got {names}")
        if sum(m.local for m in self.tested_models()) > 1:  # the party model may be the embedded one too
            raise ValueError("at most one tested model may be local: true")
        labels = [arm.label() for arm in self.interventions]
        if len(set(labels)) != len(labels):
            raise ValueError(f"intervention arms must differ, got {labels}")
        judged = self.judge_is_tested()
        if judged and not self.judge.allow_tested_model:
            raise ValueError(
                f"the judge model is also a tested model ({', '.join(judged)}): it would label its own replies; "
                "name another judge model, or set judge.allow_tested_model: true to do it on purpose"
            )
        return self

    def warnings(self) -> list[str]:
        """Things about the config a user should know before playing it (it still plays)."""
        return [pair.warning() for pair in thinking_pairs(self.models) if pair.confounds]

    def judge_is_tested(self) -> list[str]:
        """Names of the tested model entries that serve the judge's model (empty when the judge is another model)."""
        judge = self.judge.model
        if self.judge.kind != "llm" or judge is None or CHAT_AGENT not in self.agents:
            return []
        return [m.name for m in self.tested_models() if served_identity(m) == served_identity(judge)]


def _problem(err: Any) -> str:
    """One validation error as ``field: message`` (a config-wide check names its field in its message)."""
    where = ".".join(str(p) for p in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def load_config(path: Path | str) -> ExperimentConfig:
    """Read and validate a YAML config; raises :class:`ConfigError` naming the file and the problem."""
    path = Path(path)
    try:
        data = read_yaml(path)
    except YamlError as exc:
        if exc.line is None and exc.reason.startswith(("file not found", "cannot read")):
            raise ConfigError(f"cannot read config {path}: {exc.reason}") from None
        raise ConfigError(str(exc)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of settings, got {type(data).__name__}")
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        raise ConfigError(f"{path}: {problems}") from None
