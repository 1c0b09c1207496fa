"""What a model client is told: the served model, its endpoints and generation settings, retries and replicas."""

from __future__ import annotations

import os
import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES

__all__ = ["SESSION_HEADER", "ModelSettings", "ReplicaPolicy", "RetryPolicy", "backoff_delay"]


# The header that names a session: the client sends it for session-affinity routers, and the commitment
# gateway reads it (HTTP header names are case-insensitive, so any spelling of it is the same header).
SESSION_HEADER = "X-Session-ID"
class ModelSettings(BaseModel):
    """Where a model lives and how it is sampled.

    Everything except ``base_url``, ``api_key_env`` and ``timeout`` is part of the model's
    identity (:meth:`identity`), hence of every cache key and of the run's identity.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="Model name as the server knows it.")
    base_url: str = Field(
        default="http://127.0.0.1:8000/v1", description="OpenAI-compatible base URL (ends in /v1)."
    )
    base_urls: tuple[str, ...] = Field(
        default=(),
        description="Base URLs of several replicas serving the same model; when given, base_url is not used.",
    )
    api_key_env: str | None = Field(
        default="OPENAI_API_KEY",
        description="Environment variable holding the API key; local servers need none ('EMPTY' is sent).",
    )
    temperature: float | None = Field(default=0.0, ge=0, description="Sampling temperature (null: server default).")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(default=None, gt=0, description="Upper bound on generated tokens.")
    seed: int | None = Field(
        default=None, description="Sampling seed; sample k of a call is sent with seed + k."
    )
    reasoning_effort: str | None = Field(
        default=None, description="Reasoning effort ('low', 'medium', 'high') for models that support it."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra request fields, e.g. {'chat_template_kwargs': {'enable_thinking': False}}.",
    )
    timeout: float = Field(
        default=120.0, gt=0,
        description="Seconds one HTTP attempt may take in all (connecting, headers and body); then it is a timeout.",
    )
    max_response_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES, ge=1024,
        description="Bytes of one response body read at most (an answer or an error); past them the attempt fails "
        "as response_too_large and nothing of the body is kept.",
    )
    max_argument_bytes: int = Field(
        default=DEFAULT_MAX_ARGUMENT_BYTES, ge=64,
        description="Bytes (UTF-8) of one tool call's arguments at most; larger ones are a bad_arguments tool "
        "error, recorded and sent back cut short.",
    )

    def endpoints(self) -> tuple[str, ...]:
        """The base URLs of the model's replicas (``base_urls``, else the one ``base_url``)."""
        return self.base_urls or (self.base_url,)

    def sampling(self) -> dict[str, Any]:
        """The sampling settings that are set (None values left out)."""
        values = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "reasoning_effort": self.reasoning_effort,
        }
        return {name: value for name, value in values.items() if value is not None}

    def identity(self) -> dict[str, Any]:
        """Model name, sampling settings and extra_body: what decides the output.

        The endpoint URLs, the API key and the timeout are left out, so a cache filled through one
        server serves the same model behind another (or behind several replicas).
        """
        return {"model": self.model, "sampling": self.sampling(), "extra_body": self.extra_body}

    def api_key(self) -> str:
        if self.api_key_env is None:
            return "EMPTY"
        return os.environ.get(self.api_key_env) or "EMPTY"


class RetryPolicy(BaseModel):
    """How failed attempts are retried."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(default=6, ge=1, description="Attempts per call, the first included.")
    base_delay_s: float = Field(default=0.5, ge=0, description="Backoff before the 2nd attempt is U(0, base).")
    max_delay_s: float = Field(default=30.0, ge=0, description="Cap on the exponential backoff window.")
    max_retry_after_s: float = Field(default=60.0, ge=0, description="Cap on a server's Retry-After.")
    seed: int | None = Field(default=None, description="Seed of the jitter RNG (None: OS entropy).")


class ReplicaPolicy(BaseModel):
    """When a replica of a model is taken out of rotation, and for how long."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failures_to_eject: int = Field(
        default=3, ge=1, description="Refused connections or timeouts in a row that take a replica out."
    )
    eject_s: float = Field(default=30.0, gt=0, description="Seconds a replica stays out before it is tried again.")
    max_concurrency: int | None = Field(
        default=None, ge=1, description="HTTP requests in flight to one replica, at most (null: no limit of its own)."
    )


def backoff_delay(
    policy: RetryPolicy, attempt: int, rng: random.Random, retry_after: float | None = None
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based).

    Full jitter: uniform on [0, min(max_delay, base * 2^(attempt-1))]; never shorter than the
    server's Retry-After (capped at ``max_retry_after_s``).
    """
    window = min(policy.max_delay_s, policy.base_delay_s * (2 ** (attempt - 1)))
    delay = rng.uniform(0.0, window)
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.max_retry_after_s))
    return delay
