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

import re
from collections.abc import Sequence
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

from commitbench.agents.chat import DEFAULT_PROTOCOL, PROTOCOLS, TOOLS_ONLY
from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES
from commitbench.cache import CacheMode
from commitbench.envs import STANDING_ENV_ID
from commitbench.identity import NO_ARM, arm_label
from commitbench.llm import ModelSettings, ReplicaPolicy, RetryPolicy
from commitbench.oracles.registry import InterventionSpec, check_stack
from commitbench.profiles import Profile
from commitbench.suites import Suite, suite_for_env
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
    "load_config",
]

CHAT_AGENT = "chat"
# Bounds on the size of an experiment: far above any study, far below what would exhaust the machine
# before a cell is played (docs/runner.md, "Bounds").
MAX_SAMPLES = 1_000
MAX_CONCURRENCY = 4_096
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ConfigError(ValueError):
    """A config file is missing, unreadable or invalid; the message names the file and the field."""


class GenerationSettings(BaseModel):
    """How a model is sampled, and the bounds on one call. Everything but ``timeout`` and
    ``max_response_bytes`` is part of the run identity (``max_argument_bytes`` when it is not the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(
        default=None, description="Model name as the server knows it; defaults to the entry's name."
    )
    temperature: float | None = Field(default=0.0, ge=0, description="Sampling temperature (null: server default).")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(default=None, gt=0, description="Upper bound on generated tokens per call.")
    seed: int | None = Field(default=None, description="Sampling seed; sample k is sent with seed + k.")
    reasoning_effort: str | None = Field(default=None, description="Reasoning effort (low, medium, high).")
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra request fields, e.g. {chat_template_kwargs: {enable_thinking: false}}.",
    )
    timeout: float = Field(
        default=120.0, gt=0,
        description="Seconds one HTTP attempt may take in all (connecting, headers and body); then it is a timeout.",
    )
    max_response_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES, ge=1024,
        description="Bytes of one response body read at most; a larger answer fails the call (response_too_large).",
    )
    max_argument_bytes: int = Field(
        default=DEFAULT_MAX_ARGUMENT_BYTES, ge=64,
        description="Bytes of one tool call's arguments at most; larger ones are a bad_arguments tool error "
        "(part of the run identity when it is not the default).",
    )


# The embedded model's sampling defaults (a config's ``local: true`` entry and ``--model local`` alike;
# any of them set in the entry wins). It samples, seeded, so a run is repeatable and its calls are
# cached: under greedy decoding a 135M model never reached the promised action (docs/models.md); and
# its output is capped, since it sometimes rambles until the context is full.
LOCAL_SETTINGS: dict[str, Any] = {"temperature": 0.8, "seed": 0, "max_tokens": 256}


class ModelEntry(BaseModel):
    """One model the chat agent plays: a server (``base_url``), several replicas of it (``base_urls``),
    or the embedded local model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Label of the model in agent names (chat:<name>) and reports.")
    base_url: str | None = Field(default=None, description="OpenAI-compatible base URL ending in /v1.")
    base_urls: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Base URLs of replicas serving the same model (every call of an episode goes to one of them).",
    )
    local: bool = Field(
        default=False, description="Start the embedded llama.cpp model for the run instead of using base_url."
    )
    api_key_env: str | None = Field(
        default="OPENAI_API_KEY", description="Environment variable holding the API key (null: none is sent)."
    )
    settings: GenerationSettings = Field(default_factory=GenerationSettings, description="Sampling settings.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="Retries of failed HTTP attempts.")
    max_concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY,
        description="Most HTTP requests in flight to this model (default: the run's concurrency).",
    )
    replicas: ReplicaPolicy = Field(
        default_factory=ReplicaPolicy,
        description="Per-replica concurrency limit, and when a replica that stops answering is taken out.",
    )

    protocol: str | None = Field(
        default=None,
        description="The chat agent's turn protocol: 'auto' (tools sent without tool_choice; text is the reply) or "
        "'tools_only' (every answer is a tool call forced with tool_choice 'required'; the reply and the end of the "
        "turn are tools). Default: tools_only for the embedded model, auto for a server.",
    )

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, protocol: str | None) -> str | None:
        if protocol is not None and protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        return protocol

    def chat_protocol(self) -> str:
        """The turn protocol the chat agent plays this model with."""
        if self.protocol is not None:
            return self.protocol
        return TOOLS_ONLY if self.local else DEFAULT_PROTOCOL

    @model_validator(mode="before")
    @classmethod
    def _local_defaults(cls, data: Any) -> Any:
        """The embedded model's sampling defaults, for every settings field the entry leaves unset."""
        if not isinstance(data, dict) or not data.get("local"):
            return data
        settings = data.get("settings")
        if settings is None:
            given: dict[str, Any] = {}
        elif isinstance(settings, GenerationSettings):
            given = {name: getattr(settings, name) for name in settings.model_fields_set}
        elif isinstance(settings, dict):
            given = dict(settings)
        else:
            return data  # pydantic reports the wrong type
        return {**data, "settings": {**LOCAL_SETTINGS, **given}}

    @field_validator("name")
    @classmethod
    def _label(cls, name: str) -> str:
        if not _LABEL.match(name):
            raise ValueError(f"model name {name!r} must be letters, digits, '.', '_' or '-'")
        return name

    @model_validator(mode="after")
    def _one_endpoint(self) -> ModelEntry:
        given = [name for name, value in (("base_url", self.base_url), ("base_urls", self.base_urls),
                                          ("local: true", self.local)) if value]
        if len(given) > 1:
            raise ValueError(f"model {self.name!r}: give one of base_url, base_urls or local: true, not {given}")
        if not given:
            raise ValueError(
                f"model {self.name!r}: needs base_url (an OpenAI-compatible /v1 URL), base_urls (replicas) "
                "or local: true"
            )
        if self.base_urls is not None and len(set(self.base_urls)) != len(self.base_urls):
            raise ValueError(f"model {self.name!r}: base_urls lists a replica twice")
        return self

    def endpoints(self) -> list[str]:
        """The base URLs of the model's servers (one for base_url, none for a local model)."""
        if self.base_urls:
            return list(self.base_urls)
        return [self.base_url] if self.base_url else []

    def served_model(self, local_alias: str) -> str:
        """The model name sent to the server."""
        if self.settings.model:
            return self.settings.model
        return local_alias if self.local else self.name

    def model_settings(self, base_url: str | None = None, local_alias: str = "smollm2") -> ModelSettings:
        """ModelSettings for this entry; ``base_url`` is the local server's URL for local entries."""
        url = base_url if base_url is not None else self.base_url
        if url is None and self.base_urls:
            url = self.base_urls[0]
        if url is None:
            # Identity only (the local server is not running yet): the URL is not part of it.
            url = "http://127.0.0.1:0/v1"
        s = self.settings
        return ModelSettings(
            model=self.served_model(local_alias),
            base_url=url,
            base_urls=tuple(self.base_urls) if self.base_urls and base_url is None else (),
            api_key_env=None if self.local else self.api_key_env,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            seed=s.seed,
            reasoning_effort=s.reasoning_effort,
            extra_body=s.extra_body,
            timeout=s.timeout,
            max_response_bytes=s.max_response_bytes,
            max_argument_bytes=s.max_argument_bytes,
        )


# ------------------------------------------------------------------------- thinking pairs
THINKING_SWITCH = "extra_body.chat_template_kwargs.enable_thinking"
# What thinking needs besides the switch: room to think (and time, which is not part of the identity).
THINKING_NEEDS = frozenset({"max_tokens", "timeout", "max_response_bytes"})


def thinking_state(settings: GenerationSettings) -> bool | None:
    """Whether the settings switch thinking on (True), off (False), or leave it to the server (None).

    The switch is ``chat_template_kwargs.enable_thinking`` in ``extra_body`` (vLLM, SGLang), else
    ``reasoning_effort`` ("none" is off, any other effort is on).
    """
    kwargs = settings.extra_body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        return bool(kwargs["enable_thinking"])
    if settings.reasoning_effort is not None:
        return settings.reasoning_effort.lower() != "none"
    return None


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def setting_differences(a: GenerationSettings, b: GenerationSettings) -> list[str]:
    """The settings two model variants differ in, besides the thinking switch and what thinking needs."""
    flat_a, flat_b = _flat(a.model_dump(mode="json"), ""), _flat(b.model_dump(mode="json"), "")
    ignored = set(THINKING_NEEDS) | {THINKING_SWITCH}
    if "chat_template_kwargs" not in a.extra_body and "chat_template_kwargs" not in b.extra_body:
        ignored.add("reasoning_effort")  # the switch is the effort itself
    return sorted(k for k in set(flat_a) | set(flat_b) if k not in ignored and flat_a.get(k) != flat_b.get(k))


class ThinkingPair(BaseModel):
    """Two model entries of one served model, thinking on and off."""

    on: str = Field(description="The entry with thinking on.")
    off: str = Field(description="The entry with thinking off.")
    confounds: list[str] = Field(description="Other settings they differ in (empty: a clean comparison).")

    def warning(self) -> str:
        return (
            f"models {self.on!r} (thinking on) and {self.off!r} (off) also differ in {', '.join(self.confounds)}: "
            "a thinking on/off comparison between them would mix those effects in; make them differ only in "
            "the thinking switch (and max_tokens)"
        )


def thinking_pairs(models: Sequence[ModelEntry]) -> list[ThinkingPair]:
    """Every pair of entries serving the same model, one with thinking on and one off, in config order."""
    pairs: list[ThinkingPair] = []
    for i, first in enumerate(models):
        for second in models[i + 1 :]:
            if served_identity(first) != served_identity(second):
                continue
            states = (thinking_state(first.settings), thinking_state(second.settings))
            if set(states) != {True, False}:
                continue
            on, off = (first, second) if states[0] else (second, first)
            pairs.append(ThinkingPair(on=on.name, off=off.name,
                                      confounds=setting_differences(on.settings, off.settings)))
    return pairs


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
    max_attempts: int = Field(default=3, ge=1, description="Attempts per item before a judge error is recorded.")
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


class ExperimentConfig(BaseModel):
    """A whole experiment: players x interventions x episodes x samples, and how to run it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="standing", description="Experiment name (shown in the manifest and progress bar).")
    env: str = Field(default=STANDING_ENV_ID, description="Environment id: selects the suite.")
    agents: list[str] = Field(
        default_factory=lambda: [CHAT_AGENT],
        min_length=1,
        description="'chat' (plays every model) and/or reference agent names (creditor-rule, ...).",
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
        default=1, ge=1, le=MAX_SAMPLES, description="Samples per (model, arm, episode) cell of the chat agent."
    )
    concurrency: int = Field(default=32, ge=1, le=MAX_CONCURRENCY, description="Episodes played at the same time.")
    max_model_calls_per_turn: int | None = Field(
        default=None, ge=1,
        description="Model calls the chat agent may make in one turn before it is cut off (null: the suite's default).",
    )
    seed: int = Field(default=0, description="Seed passed to env.reset and the retry jitter.")
    cache: CacheConfig = Field(default_factory=CacheConfig, description="Model-call cache.")
    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="Who labels the run afterwards.")

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        # The default run directory is runs/<name>: a name must stay one plain folder name inside it.
        if not _LABEL.match(name):
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
    def suite(self) -> Suite:
        """The suite this config plays."""
        return suite_for_env(self.env)

    @property
    def calls_per_turn(self) -> int:
        """Model calls the chat agent may make in one turn (the config's, else the suite's default)."""
        return self.max_model_calls_per_turn or self.suite.default_max_model_calls_per_turn

    @model_validator(mode="after")
    def _models_match_agents(self) -> ExperimentConfig:
        suite = self.suite
        for name in self.agents:
            if name != CHAT_AGENT and name not in suite.reference_agents:
                known = ", ".join([CHAT_AGENT, *suite.reference_agents])
                raise ValueError(f"unknown agent {name!r} for the {suite.name} suite (known: {known})")
        if len(set(self.agents)) != len(self.agents):
            raise ValueError("an agent is listed twice")
        for arm in self.interventions:
            check_stack(arm.stack, env_id=self.env)
        has_chat = CHAT_AGENT in self.agents
        if has_chat and not self.models:
            raise ValueError("agent 'chat' needs at least one entry under models")
        if self.models and not has_chat:
            raise ValueError("models are listed but 'chat' is not among the agents")
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique, got {names}")
        if sum(m.local for m in self.models) > 1:
            raise ValueError("at most one model may be local: true")
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
        return [m.name for m in self.models if served_identity(m) == served_identity(judge)]


def served_identity(entry: ModelEntry) -> str:
    """Which model an entry serves: the embedded one, or the served model name (case-insensitive)."""
    return "local:embedded" if entry.local else (entry.settings.model or entry.name).lower()


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
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<top>'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from None
