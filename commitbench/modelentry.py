"""The models an experiment plays: a model entry (its endpoint, generation settings, retries, replicas) and the
thinking on/off pairs among a config's entries.

An entry's name is its label in every table; ``settings`` is what identifies the model in every run key
(never the URL or the API key). Two entries of one served model that differ only in the thinking switch
(and what thinking needs) are a thinking pair, compared in every report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from commitbench.agents.chat import DEFAULT_PROTOCOL, PROTOCOLS, TOOLS_ONLY
from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES
from commitbench.llm import ModelSettings, ReplicaPolicy, RetryPolicy
from commitbench.secrets import redact_credentials

__all__ = [
    "LABEL",
    "LOCAL_SETTINGS",
    "MAX_CONCURRENCY",
    "GenerationSettings",
    "ModelEntry",
    "ThinkingPair",
    "served_identity",
    "setting_differences",
    "thinking_pairs",
    "thinking_state",
]

# A label: a model entry's or an experiment's name (letters, digits, and . _ - after the first).
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Requests in flight, at most (a run's concurrency, a model's max_concurrency).
MAX_CONCURRENCY = 4_096


class GenerationSettings(BaseModel):
    """How a model is sampled, and the bounds on one call. Everything but ``timeout`` and
    ``max_response_bytes`` is part of the run identity (``max_argument_bytes`` when it is not the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(
        default=None, description="Model name as the server knows it; defaults to the entry's name."
    )
    temperature: float | None = Field(default=0.0, ge=0, description="Sampling temperature (null: server default).")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(
        default=None, gt=0, strict=True, description="Upper bound on generated tokens per call."
    )
    seed: int | None = Field(default=None, strict=True, description="Sampling seed; sample k is sent with seed + k.")
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
        default=DEFAULT_MAX_RESPONSE_BYTES, ge=1024, strict=True,
        description="Bytes of one response body read at most; a larger answer fails the call (response_too_large).",
    )
    max_argument_bytes: int = Field(
        default=DEFAULT_MAX_ARGUMENT_BYTES, ge=64, strict=True,
        description="Bytes of one tool call's arguments at most; larger ones are a bad_arguments tool error "
        "(part of the run identity when it is not the default).",
    )


# The embedded model's sampling defaults (a config's ``local: true`` entry and ``--model local`` alike;
# any of them set in the entry wins). It samples, seeded, so a run is repeatable and its calls are
# cached: under greedy decoding a 135M model never reached the promised action (docs/models.md); and
# its output is capped, since it sometimes rambles until the context is full.
LOCAL_SETTINGS: dict[str, Any] = {"temperature": 0.8, "seed": 0, "max_tokens": 256}


def _check_http_url(url: str, field: str) -> None:
    """An OpenAI-compatible endpoint is reached over HTTP: anything else (file://, a bare host) is refused here,
    at load, rather than as a connection error of every call."""
    shown = redact_credentials(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"{field} {shown!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{field} {shown!r} must be an http:// or https:// URL (an OpenAI-compatible /v1 base)")
    if not parts.hostname:
        raise ValueError(f"{field} {shown!r} names no host")


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
        default=None, ge=1, le=MAX_CONCURRENCY, strict=True,
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

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None:
            _check_http_url(url, "base_url")
        return url

    @field_validator("base_urls")
    @classmethod
    def _http_urls(cls, urls: list[str] | None) -> list[str] | None:
        for index, url in enumerate(urls or []):
            _check_http_url(url, f"base_urls[{index}]")
        return urls

    @field_validator("name")
    @classmethod
    def _label(cls, name: str) -> str:
        if not LABEL.match(name):
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


def served_identity(entry: ModelEntry) -> str:
    """Which model an entry serves: the embedded one, or the served model name (case-insensitive)."""
    return "local:embedded" if entry.local else (entry.settings.model or entry.name).lower()
