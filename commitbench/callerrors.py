"""Why a model call failed, and what follows from it.

Every failed call has a :class:`ModelErrorKind`. Three sets decide what happens next:

* :data:`RETRYABLE_ERRORS`: another attempt may not meet them (a busy, slow or restarting server, an
  answer that came back broken); the client retries them with backoff.
* :data:`INFRASTRUCTURE_ERRORS`: failures of the serving infrastructure, not of the model or the
  prompt. When they persist (after the retries, for the retryable ones) a caller leaves the work
  undone, to be played or labelled again, and never records it as the model's or the judge's
  answer: a run marks the cell ``infra_error`` (exit code 1) and every metric leaves it out.
  A 4xx other than 401/403/404 is one (``bad_request``: vLLM's "auto tool choice requires
  --enable-auto-tool-choice", say), and so is a completion that is not one (``invalid_response``:
  ``choices: [{}]``, ``message: null``, ``tool_calls`` that is not a list, ``content`` that is neither
  text nor a list of text parts).
* ``context_length`` is neither: a 4xx that says the conversation no longer fits the model's context
  (:func:`is_context_length`) is a fact about the model and the episode. It ends the turn like an
  answer without text, and reports list it per model and cell.

:class:`FirstCallsGuard` stops a run whose server answers none of its first calls usably: when the
first :data:`FIRST_CALLS` calls that reach a model all fail with one of :data:`UNSERVED` (the server
answers, but never with a completion), no later call would do better, so the caller raises
:class:`ModelEndpointError` with the server's own words, as for a 401.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

__all__ = [
    "FIRST_CALLS",
    "INFRASTRUCTURE_ERRORS",
    "RETRYABLE_ERRORS",
    "UNSERVED",
    "FirstCallsGuard",
    "ModelEndpointError",
    "ModelError",
    "ModelErrorKind",
    "error_kind_of",
    "is_context_length",
]


class ModelErrorKind(str, Enum):
    """Why a call produced no usable completion."""

    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    TRUNCATED_BODY = "truncated_body"
    EMPTY_CHOICES = "empty_choices"
    INVALID_RESPONSE = "invalid_response"
    BAD_REQUEST = "bad_request"
    RESPONSE_TOO_LARGE = "response_too_large"
    CONTEXT_LENGTH = "context_length"


RETRYABLE_ERRORS = frozenset(
    {
        ModelErrorKind.RATE_LIMITED,
        ModelErrorKind.SERVER_ERROR,
        ModelErrorKind.TIMEOUT,
        ModelErrorKind.CONNECTION,
        ModelErrorKind.TRUNCATED_BODY,
        ModelErrorKind.EMPTY_CHOICES,
        ModelErrorKind.INVALID_RESPONSE,
    }
)
INFRASTRUCTURE_ERRORS = RETRYABLE_ERRORS | {ModelErrorKind.BAD_REQUEST, ModelErrorKind.RESPONSE_TOO_LARGE}
# The server answers, but never with a usable completion: a misconfigured server (or the wrong one).
UNSERVED = frozenset(
    {
        ModelErrorKind.BAD_REQUEST,
        ModelErrorKind.INVALID_RESPONSE,
        ModelErrorKind.EMPTY_CHOICES,
        ModelErrorKind.RESPONSE_TOO_LARGE,
    }
)
# Calls of a model that must all fail with an UNSERVED error before its run stops.
FIRST_CALLS = 8


class ModelEndpointError(RuntimeError):
    """The endpoint rejects the configuration (authentication, permission, unknown model or route, or a
    server that answered none of the first calls usably)."""


class ModelError(BaseModel):
    """A recorded failure of one call (after retries, when it was retryable)."""

    kind: ModelErrorKind = Field(description="Failure category.")
    message: str = Field(description="What went wrong, in words.")
    status_code: int | None = Field(default=None, description="HTTP status of the last attempt, if any.")


def error_kind_of(recorded: str) -> ModelErrorKind | None:
    """The kind of a call error as a trace records it (``"kind: message"``), or None for any other text."""
    head = recorded.split(":", 1)[0].strip()
    try:
        return ModelErrorKind(head)
    except ValueError:
        return None


# How servers say that a conversation does not fit: vLLM and SGLang ("maximum context length",
# "the model's context length"), OpenAI ("context_length_exceeded"), llama.cpp ("exceeds the available
# context size") and llama-cpp-python ("exceed context window").
_CONTEXT_PHRASES = ("context length", "context_length", "context window", "context size", "maximum context")


def is_context_length(status: int, text: str) -> bool:
    """Whether a 4xx answer says the prompt (with the room asked for the completion) is longer than the
    model's context. Reads at most the first 4,000 characters, with plain substring tests."""
    if not 400 <= status < 500:
        return False
    lowered = text[:4000].lower()
    return any(phrase in lowered for phrase in _CONTEXT_PHRASES)


class FirstCallsGuard:
    """Counts how the first calls to one model's servers end (shared by the clients of the model).

    :meth:`on_failure` returns the message to stop with once the first :data:`FIRST_CALLS` calls that
    reached a server all failed with an :data:`UNSERVED` error, and on every such failure after that;
    one usable answer (:meth:`on_answer`) disarms the guard for good. Other failures (timeouts,
    5xx, context length) count neither way.
    """

    def __init__(self, limit: int = FIRST_CALLS) -> None:
        self.limit = limit
        self.failed = 0
        self.answered = False

    def on_answer(self) -> None:
        self.answered = True

    def on_failure(self, model: str, error: ModelError) -> str | None:
        if self.answered or error.kind not in UNSERVED:
            return None
        self.failed += 1
        if self.failed < self.limit:
            return None
        return (
            f"the first {self.failed} calls to model {model!r} all failed without a usable answer, so no call of "
            f"this run can succeed; the server's last answer: {error.kind.value}: {error.message[:500]}"
        )
