"""Experiment configs: which agents and models play which episodes under which interventions.

A config is a YAML file validated by :class:`ExperimentConfig` (unknown keys are errors). The
runner (:mod:`commitbench.runner`) expands it into *cells*, one per

    player (a reference agent, or the chat agent on one model) x intervention stack x episode x sample

Reference agents are deterministic and play sample 0 only. See ``docs/runner.md`` for a full
example; the smallest config is::

    agents: [creditor-rule]
    episodes: {split: test}

Relative paths (the cache file) are resolved against the current directory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from commitbench.cache import CacheMode
from commitbench.envs import STANDING_ENV_ID
from commitbench.llm import ModelSettings, RetryPolicy
from commitbench.oracles.registry import NO_INTERVENTION, InterventionSpec, check_stack

__all__ = [
    "CHAT_AGENT",
    "CacheConfig",
    "ConfigError",
    "EpisodeFilter",
    "ExperimentConfig",
    "GenerationSettings",
    "InterventionArm",
    "ModelEntry",
    "load_config",
]

CHAT_AGENT = "chat"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ConfigError(ValueError):
    """A config file is missing, unreadable or invalid; the message names the file and the field."""


class GenerationSettings(BaseModel):
    """How a model is sampled. Everything but ``timeout`` is part of the run identity."""

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
    timeout: float = Field(default=120.0, gt=0, description="Seconds before one HTTP attempt times out.")


class ModelEntry(BaseModel):
    """One model the chat agent plays: a server (``base_url``) or the embedded local model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Label of the model in agent names (chat:<name>) and reports.")
    base_url: str | None = Field(default=None, description="OpenAI-compatible base URL ending in /v1.")
    local: bool = Field(
        default=False, description="Start the embedded llama.cpp model for the run instead of using base_url."
    )
    api_key_env: str | None = Field(
        default="OPENAI_API_KEY", description="Environment variable holding the API key (null: none is sent)."
    )
    settings: GenerationSettings = Field(default_factory=GenerationSettings, description="Sampling settings.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="Retries of failed HTTP attempts.")
    max_concurrency: int | None = Field(
        default=None, ge=1, description="Most HTTP requests in flight to this model (default: the run's concurrency)."
    )

    @field_validator("name")
    @classmethod
    def _label(cls, name: str) -> str:
        if not _LABEL.match(name):
            raise ValueError(f"model name {name!r} must be letters, digits, '.', '_' or '-'")
        return name

    @model_validator(mode="after")
    def _one_endpoint(self) -> ModelEntry:
        if self.local and self.base_url:
            raise ValueError(f"model {self.name!r}: give either base_url or local: true, not both")
        if not self.local and not self.base_url:
            raise ValueError(f"model {self.name!r}: needs base_url (an OpenAI-compatible /v1 URL) or local: true")
        return self

    def served_model(self, local_alias: str) -> str:
        """The model name sent to the server."""
        if self.settings.model:
            return self.settings.model
        return local_alias if self.local else self.name

    def model_settings(self, base_url: str | None = None, local_alias: str = "smollm2") -> ModelSettings:
        """ModelSettings for this entry; ``base_url`` is the local server's URL for local entries."""
        url = base_url if base_url is not None else self.base_url
        if url is None:
            # Identity only (the local server is not running yet): the URL is not part of it.
            url = "http://127.0.0.1:0/v1"
        s = self.settings
        return ModelSettings(
            model=self.served_model(local_alias),
            base_url=url,
            api_key_env=None if self.local else self.api_key_env,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            seed=s.seed,
            reasoning_effort=s.reasoning_effort,
            extra_body=s.extra_body,
            timeout=s.timeout,
        )


def _coerce_arm(value: Any) -> Any:
    """YAML sugar: ``none`` / ``[]`` -> no intervention; ``name`` -> [name]; specs may be names."""
    if value is None:
        return []
    if isinstance(value, str):
        return [] if value == NO_INTERVENTION else [{"name": value}]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        items = [{"name": v} if isinstance(v, str) else v for v in value]
        return [v for v in items if not (isinstance(v, dict) and v.get("name") == NO_INTERVENTION)]
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
        check_stack([spec.name for spec in stack])
        return stack

    def names(self) -> list[str]:
        """Labels of the stack, innermost first (what traces record)."""
        return [spec.label() for spec in self.stack]

    def label(self) -> str:
        return "+".join(self.names()) or NO_INTERVENTION

    def identity(self) -> list[dict[str, Any]]:
        return [spec.model_dump(mode="json") for spec in self.stack]


class EpisodeFilter(BaseModel):
    """Which compiled episodes to play; every list is optional (null: all values)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: str | None = Field(default=None, description="dev or test (null: both).")
    cells: list[str] | None = Field(default=None, description="Cell ids, e.g. BASE, PEER-DIRECT.")
    types: list[str] | None = Field(default=None, description="Commitment type ids, e.g. book_room.")
    policies: list[str] | None = Field(default=None, description="explicit and/or silent.")
    gaps: list[int] | None = Field(default=None, description="Filler gaps (1 and/or 20).")
    variants: list[int] | None = Field(default=None, description="Surface variants (0, 1, 2).")
    ids: list[str] | None = Field(default=None, description="Explicit episode ids (then the factors must also match).")
    limit: int | None = Field(default=None, ge=1, description="Keep only the first N matching episodes (smoke runs).")


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
    env: str = Field(default=STANDING_ENV_ID, description="Registered environment id.")
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
    episodes: EpisodeFilter = Field(default_factory=EpisodeFilter, description="Episode selection.")
    samples: int = Field(default=1, ge=1, description="Samples per (model, arm, episode) cell of the chat agent.")
    concurrency: int = Field(default=32, ge=1, description="Episodes played at the same time.")
    max_model_calls_per_turn: int = Field(
        default=10, ge=1, description="Model calls the chat agent may make in one turn before it is cut off."
    )
    seed: int = Field(default=0, description="Seed passed to env.reset and the retry jitter.")
    cache: CacheConfig = Field(default_factory=CacheConfig, description="Model-call cache.")

    @field_validator("agents")
    @classmethod
    def _known_agents(cls, agents: list[str]) -> list[str]:
        from commitbench.agents.standing.reference import REFERENCE_AGENTS

        for name in agents:
            if name != CHAT_AGENT and name not in REFERENCE_AGENTS:
                known = ", ".join([CHAT_AGENT, *REFERENCE_AGENTS])
                raise ValueError(f"unknown agent {name!r} (known: {known})")
        if len(set(agents)) != len(agents):
            raise ValueError("an agent is listed twice")
        return agents

    @field_validator("env")
    @classmethod
    def _known_env(cls, env: str) -> str:
        if env != STANDING_ENV_ID:
            raise ValueError(f"the runner plays {STANDING_ENV_ID} only, got {env!r}")
        return env

    @model_validator(mode="after")
    def _models_match_agents(self) -> ExperimentConfig:
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
        return self


def load_config(path: Path | str) -> ExperimentConfig:
    """Read and validate a YAML config; raises :class:`ConfigError` naming the file and the problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
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
