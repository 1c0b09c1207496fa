"""What a test or a benchmark tells the mock server: replies, faults, and what it reports back.

Pure data (pydantic models and enums) and the few rules that read it; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DEFAULT_MODEL",
    "TRANSPORT_FAULTS",
    "FaultConfig",
    "FaultKind",
    "ReasoningField",
    "ReplySpec",
    "Responder",
    "ServerStats",
    "ToolCallSpec",
    "coerce_reply",
    "parse_fault_rate",
]

DEFAULT_MODEL = "mock-model"


class FaultKind(str, Enum):
    """A misbehaviour the server can inject into a chat-completions request."""

    HTTP_500 = "http_500"
    HTTP_429 = "http_429"
    TIMEOUT = "timeout"  # hold the connection open without answering
    DISCONNECT = "disconnect"  # close the connection without answering
    TRUNCATED_BODY = "truncated_body"  # a 200 whose JSON body is cut short
    MALFORMED_TOOL_ARGS = "malformed_tool_args"  # a tool call whose arguments are not valid JSON
    EMPTY_CHOICES = "empty_choices"  # a 200 with ``choices: []``
    REFUSAL = "refusal"  # ``message.refusal`` set, no content


# Faults after which no completion reached the client: the scripted reply stays queued.
TRANSPORT_FAULTS = frozenset(
    {
        FaultKind.HTTP_500,
        FaultKind.HTTP_429,
        FaultKind.TIMEOUT,
        FaultKind.DISCONNECT,
        FaultKind.TRUNCATED_BODY,
        FaultKind.EMPTY_CHOICES,
    }
)


class ReasoningField(str, Enum):
    """Where reasoning text goes in the response message (servers differ)."""

    REASONING = "reasoning"  # vLLM >= 0.10
    REASONING_CONTENT = "reasoning_content"  # older vLLM, DeepSeek, llama.cpp
    BOTH = "both"


class ToolCallSpec(BaseModel):
    """One tool call in a scripted reply."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Function name the 'model' calls.")
    arguments: dict[str, Any] | str = Field(
        default_factory=dict,
        description="Arguments: a dict is JSON-encoded; a string is sent verbatim (it may be invalid JSON).",
    )
    id: str | None = Field(default=None, description="Tool-call id; generated when omitted.")


class ReplySpec(BaseModel):
    """What the scripted 'model' says in one completion."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(default=None, description="Assistant message content.")
    tool_calls: list[ToolCallSpec] = Field(default_factory=list, description="Tool calls to return.")
    reasoning: str | None = Field(default=None, description="Reasoning text, kept apart from the content.")
    reasoning_field: ReasoningField = Field(
        default=ReasoningField.REASONING, description="Message field(s) that carry the reasoning text."
    )
    refusal: str | None = Field(default=None, description="Refusal text (content is then null).")
    finish_reason: str | None = Field(
        default=None, description="Finish reason; default 'tool_calls' when there are tool calls, else 'stop'."
    )
    latency_ms: float | None = Field(
        default=None, ge=0, description="Latency for this reply, replacing the server's configured latency."
    )
    chunk_delay_ms: float = Field(
        default=0.0, ge=0, description="Streamed replies: the pause after each event (a model generating slowly)."
    )
    fault: FaultKind | None = Field(
        default=None, description="A fault this queue entry injects (the entry is consumed by it)."
    )
    prompt_tokens: int | None = Field(default=None, ge=0, description="Reported prompt tokens override.")
    completion_tokens: int | None = Field(default=None, ge=0, description="Reported completion tokens override.")
    report_reasoning_tokens: bool = Field(
        default=True,
        description="Report the reasoning's token count in usage.completion_tokens_details (some servers do not).",
    )


class FaultConfig(BaseModel):
    """Fault injection: a scripted sequence first, then per-kind rates drawn from a seeded RNG."""

    model_config = ConfigDict(extra="forbid")

    seed: int = Field(default=0, description="Seed of the RNG that draws rate-based faults and latency jitter.")
    rates: dict[FaultKind, float] = Field(
        default_factory=dict, description="Probability of each fault per chat request (sum at most 1)."
    )
    sequence: list[FaultKind | None] = Field(
        default_factory=list,
        description="Faults for the next requests, in order (null = no fault); used up before rates apply.",
    )
    retry_after_s: float = Field(default=0.0, ge=0, description="Retry-After sent with HTTP 429 replies.")
    timeout_hold_s: float = Field(
        default=30.0, gt=0, description="How long a 'timeout' fault holds the connection before closing it."
    )

    @field_validator("rates")
    @classmethod
    def _rates_are_probabilities(cls, rates: dict[FaultKind, float]) -> dict[FaultKind, float]:
        for kind, rate in rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault rate for {kind.value} must be in [0, 1], got {rate}")
        if sum(rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"fault rates sum to {sum(rates.values()):.3f}, more than 1")
        return rates


class ServerStats(BaseModel):
    """Request counts since the last reset."""

    total: int = Field(description="All HTTP requests received.")
    chat_completions: int = Field(description="Requests to /v1/chat/completions.")
    outcomes: dict[str, int] = Field(
        description="Chat requests by outcome: 'ok', a FaultKind value, 'bad_request' or 'responder_error'."
    )
    queued_replies: int = Field(description="Scripted replies still waiting in the queue.")
    max_in_flight: int = Field(description="Largest number of chat requests handled at the same time.")
    max_serving: int = Field(
        default=0, description="Largest number of chat requests served at the same time (at most the capacity)."
    )
    capacity: int | None = Field(default=None, description="Requests served at once, at most (null: no limit).")


Responder = Callable[[dict[str, Any]], "ReplySpec | str | dict[str, Any] | Awaitable[Any] | None"]


def coerce_reply(value: Any) -> ReplySpec | None:
    """A reply spec from what a script or a responder gives: a spec, a plain text, its fields, or None."""
    if value is None or isinstance(value, ReplySpec):
        return value
    if isinstance(value, str):
        return ReplySpec(text=value)
    if isinstance(value, dict):
        return ReplySpec.model_validate(value)
    raise TypeError(f"a responder must return ReplySpec, str, dict or None, not {type(value).__name__}")


def parse_fault_rate(item: str) -> tuple[FaultKind, float]:
    """``KIND=RATE`` (a bare ``KIND`` is rate 0) as a fault and its probability; ValueError names the kinds."""
    name, sep, value = item.partition("=")
    known = ", ".join(kind.value for kind in FaultKind)
    try:
        kind = FaultKind(name.strip())
    except ValueError:
        raise ValueError(f"{item!r}: expected KIND=RATE with KIND one of {known}") from None
    try:
        rate = float(value) if sep else 0.0
    except ValueError:
        raise ValueError(f"{item!r}: the rate must be a number between 0 and 1") from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{item!r}: the rate must be a number between 0 and 1")
    return kind, rate
