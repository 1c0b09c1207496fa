"""Model calls: settings, an async client with cache, retries and adaptive concurrency.

Every model call in commitbench goes through :class:`ModelClient`, which wraps
``openai.AsyncOpenAI`` (pointed at any OpenAI-compatible base URL: vLLM, OpenAI, the embedded
llama.cpp server, the mock server) and adds what a long benchmark run needs:

* a content-addressed cache looked up before any request (:mod:`commitbench.cache`);
* one deadline per attempt (``timeout``: connecting, headers and body together), and response
  bodies read no further than ``max_response_bytes`` (:mod:`commitbench.bounds`);
* retries of what :data:`commitbench.callerrors.RETRYABLE_ERRORS` lists (429, 5xx, timeouts,
  connection errors, unreadable or malformed answers), with exponential backoff and full jitter
  from a seedable RNG (the ``openai`` client's own retries are off);
* an adaptive concurrency limit: halved on a 429 (once per window of in-flight requests), raised
  by one slot per window of successes (AIMD);
* replicas: a model served by several servers (``base_urls``) is one :class:`ReplicaPool`; every
  call of a session (an episode's run key) goes to one replica, chosen by rendezvous hashing on the
  session id with bounded loads, so that replica's prefix cache holds the growing conversation;
  each replica has its own concurrency limit, and one that refuses connections or times out
  repeatedly is taken out for a while, its sessions moving to the next replica in their hash
  order (each move is reported on the response, for the trace);
* a result that never raises for bad output or exhausted retries: :class:`ModelResponse` carries
  ``error`` (kind + message) instead, and malformed tool-call arguments (not JSON, nested too
  deep, holding a lone surrogate) become a ``parse_error`` on that tool call; lone surrogates in
  texts, names and ids are escaped as they arrive, so whatever a server sends can be cached and
  written to a trace. Configuration problems (bad API key, unknown model, a server that answered
  none of the model's first calls usably) do raise :class:`ModelEndpointError`, since no call of the
  run could succeed; a replay-only cache raises :class:`commitbench.cache.CacheMiss` on a miss.

Typical use::

    settings = ModelSettings(model="Qwen/Qwen3-8B", base_url="http://127.0.0.1:8000/v1",
                             extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    async with ModelClient(settings, cache=CallCache("runs/cache.sqlite")) as client:
        response = await client.complete(messages, tools=tools, session_id=episode_id)
        if response.error is None:
            ...
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import random
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any

import httpx2
import openai
from pydantic import BaseModel, ConfigDict, Field

from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, ResponseTooLarge
from commitbench.cache import CacheMode, CallBroker, CallCache, cache_key
from commitbench.callerrors import (
    INFRASTRUCTURE_ERRORS,
    RETRYABLE_ERRORS,
    FirstCallsGuard,
    ModelEndpointError,
    ModelError,
    ModelErrorKind,
    is_context_length,
)
from commitbench.httpread import bound_response_bodies, read_body
from commitbench.protocol import escape_surrogates, parse_json_object
from commitbench.secrets import REDACTED, Secrets, redact_credentials, split_credentials, split_query

__all__ = [
    "INFRASTRUCTURE_ERRORS",
    "REDACTED",
    "RETRYABLE_ERRORS",
    "SESSION_HEADER",
    "AdaptiveLimiter",
    "ClientStats",
    "ModelClient",
    "ModelEndpointError",
    "ModelError",
    "ModelErrorKind",
    "ModelResponse",
    "ModelSettings",
    "ReplicaPolicy",
    "ReplicaPool",
    "RetryPolicy",
    "ToolCall",
    "Usage",
    "backoff_delay",
    "parse_completion",
    "parse_tool_arguments",
    "reasoning_token_count",
    "redact_credentials",
    "split_credentials",
]

SESSION_HEADER = "X-Session-ID"
# What of a server's error text a call error keeps (an error body may be as large as max_response_bytes).
MAX_ERROR_CHARS = 2000
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


class ToolCall(BaseModel):
    """One tool call as the model emitted it; arguments are parsed but never trusted."""

    id: str = Field(description="Tool-call id from the server.")
    name: str = Field(description="Function name.")
    arguments_raw: str = Field(description="Arguments as sent by the model (lone surrogates escaped).")
    arguments: dict[str, Any] | None = Field(description="Parsed arguments; null when they could not be parsed.")
    parse_error: str | None = Field(default=None, description="Why the arguments could not be used, if so.")


class Usage(BaseModel):
    """Token counts reported by the server."""

    prompt_tokens: int = Field(default=0, description="Tokens in the prompt.")
    completion_tokens: int = Field(default=0, description="Generated tokens, reasoning included.")
    reasoning_tokens: int = Field(default=0, description="Generated reasoning tokens, when reported.")


class ModelResponse(BaseModel):
    """The outcome of one :meth:`ModelClient.complete` call."""

    model: str = Field(description="Model name (as reported by the server when it answered).")
    text: str | None = Field(default=None, description="Assistant message content.")
    reasoning: str | None = Field(
        default=None, description="Reasoning text (message.reasoning or reasoning_content), kept apart from text."
    )
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls, in order.")
    finish_reason: str | None = Field(default=None, description="Why generation stopped.")
    refusal: str | None = Field(default=None, description="Refusal text, when the model refused.")
    usage: Usage = Field(default_factory=Usage, description="Token counts.")
    latency_s: float = Field(default=0.0, description="Wall time of the call, retries and backoff included.")
    model_time_s: float | None = Field(
        default=None,
        description="Wall time of the server call that produced this completion: this call's for an answered "
        "call, the original call's for a cache hit (kept in the cache entry), null when the entry predates that.",
    )
    attempts: int = Field(default=0, description="HTTP attempts made (0 for a cache hit).")
    cache_hit: bool = Field(default=False, description="Served from the cache.")
    cache_key: str = Field(description="Content address of the call.")
    error: ModelError | None = Field(default=None, description="Set when no usable completion came back.")
    replica: str = Field(
        default="", description="Base URL of the replica that answered, when the model has several ('' otherwise)."
    )
    replica_moves: list[str] = Field(
        default_factory=list,
        description="Moves of the session to another replica during this call ('FROM -> TO: why'), in order.",
    )

    @property
    def ok(self) -> bool:
        return self.error is None

    def cache_payload(self) -> dict[str, Any]:
        """What the cache stores: the completion only (no timing, no per-call bookkeeping)."""
        return {
            "model": self.model,
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments_raw} for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "refusal": self.refusal,
            "usage": self.usage.model_dump(),
            "latency_s": self.model_time_s if self.model_time_s is not None else self.latency_s,
        }


CHARS_PER_TOKEN = 4  # a rough mean for English text under common BPE vocabularies


def reasoning_token_count(reported: int, reasoning: str | None) -> tuple[int, bool]:
    """Reasoning tokens of a completion and whether the number is estimated.

    The server's count (``completion_tokens_details.reasoning_tokens``) when it gives one; otherwise,
    when reasoning text came back, an estimate of one token per :data:`CHARS_PER_TOKEN` characters.
    """
    if reported > 0 or not reasoning:
        return reported, False
    return math.ceil(len(reasoning) / CHARS_PER_TOKEN), True


def _stored_seconds(value: Any) -> float | None:
    """A latency read back from a cache entry: a finite non-negative number, else unknown."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def parse_tool_arguments(
    raw: str, max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> tuple[dict[str, Any] | None, str | None]:
    """Parse a tool call's argument string; returns ``(arguments, None)`` or ``(None, error)``; never raises.

    An empty string means "no arguments" (some servers send it for parameterless tools). Arguments
    larger than ``max_bytes``, nested deeper than :data:`commitbench.protocol.MAX_JSON_DEPTH` or
    holding a lone surrogate are an error, like text that is not JSON (see
    :func:`commitbench.protocol.parse_json_object`).
    """
    return parse_json_object(raw, max_bytes)


def _text_field(value: Any, limit: int | None = None) -> str:
    text = value if isinstance(value, str) else str(value)
    return escape_surrogates(text if limit is None else text[:limit])


def _tool_calls_from(items: Any, max_argument_bytes: int) -> list[ToolCall]:
    calls: list[ToolCall] = []
    if not isinstance(items, list):
        items = []
    for index, item in enumerate(items):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            calls.append(
                ToolCall(id=f"call_{index}", name="", arguments_raw=_shown(item),
                         arguments=None, parse_error="tool call has no 'function' object")
            )
            continue
        raw = function.get("arguments")
        if raw is None:
            raw = ""
        elif not isinstance(raw, str):  # some servers send an object instead of a string
            raw = _shown(raw, limit=None)
        arguments, error = parse_tool_arguments(raw, max_argument_bytes)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            name, error = "", error or "tool call has no function name"
        call_id = item.get("id")
        calls.append(
            ToolCall(
                id=_text_field(call_id, 200) if isinstance(call_id, str) and call_id else f"call_{index}",
                name=_text_field(name, 200),
                arguments_raw=escape_surrogates(raw),
                arguments=arguments if error is None else None,
                parse_error=error,
            )
        )
    return calls


def _shown(value: Any, limit: int | None = 2000) -> str:
    """A JSON value as text (for a malformed tool call); never raises, whatever its depth."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        text = f"<{type(value).__name__} nested too deep to show>"
    return escape_surrogates(text if limit is None else text[:limit])


def _text_of(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return escape_surrogates(content)
    if isinstance(content, list):  # content parts
        return escape_surrogates("".join(str(p.get("text", "")) for p in content if isinstance(p, dict)))
    return _shown(content, limit=None)


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
               float: "a number"}
_TEXT_FIELDS = ("content", "reasoning", "reasoning_content", "refusal")


def _message_problem(message: dict[str, Any]) -> str | None:
    """What makes a completion's message no answer at all (a field of a shape no server sends), or None.

    Texts must be text, null, or a list of content parts (objects whose ``text``, if any, is text);
    ``tool_calls`` must be a list or null. (A malformed call inside the list is the model's: it becomes
    a tool error of that call, not of the answer.)
    """
    for name in _TEXT_FIELDS:
        value = message.get(name)
        if value is None or isinstance(value, str):
            continue
        if isinstance(value, list) and all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in value):
            continue
        shape = _JSON_TYPES.get(type(value), "a value")
        if isinstance(value, list):
            shape = "an array of something other than text parts"
        return f"message.{name} is {shape}, not text or a list of text parts"
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        return f"message.tool_calls is {_JSON_TYPES.get(type(calls), 'a value')}, not a list"
    return None


def _count(value: Any) -> int:
    """A token count as the server reported it; 0 when it is missing or not a whole number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value)) if value == value and abs(value) < 1e18 else 0


def parse_completion(
    payload: Any, *, fallback_model: str, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> tuple[dict[str, Any], ModelError | None]:
    """Turn a chat-completion JSON object into ModelResponse fields, or an error. Never raises."""
    if not isinstance(payload, dict):
        return {}, ModelError(kind=ModelErrorKind.INVALID_RESPONSE, message="response body is not a JSON object")
    model = _text_field(payload["model"], 200) if isinstance(payload.get("model"), str) else fallback_model
    choices = payload.get("choices")
    if not choices or not isinstance(choices, list):
        return {"model": model}, ModelError(kind=ModelErrorKind.EMPTY_CHOICES, message="response has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return {"model": model}, ModelError(
            kind=ModelErrorKind.INVALID_RESPONSE, message="first choice has no message object"
        )
    problem = _message_problem(message)
    if problem is not None:
        return {"model": model}, ModelError(kind=ModelErrorKind.INVALID_RESPONSE, message=problem)
    reasoning = message.get("reasoning")
    if reasoning is None:
        reasoning = message.get("reasoning_content")
    usage_value = payload.get("usage")
    usage_raw: dict[str, Any] = usage_value if isinstance(usage_value, dict) else {}
    details = usage_raw.get("completion_tokens_details") or {}
    usage = Usage(
        prompt_tokens=_count(usage_raw.get("prompt_tokens")),
        completion_tokens=_count(usage_raw.get("completion_tokens")),
        reasoning_tokens=_count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0,
    )
    finish = choice.get("finish_reason")
    fields = {
        "model": model,
        "text": _text_of(message.get("content")),
        "reasoning": _text_of(reasoning),
        "tool_calls": _tool_calls_from(message.get("tool_calls"), max_argument_bytes),
        "finish_reason": None if finish is None else _text_field(finish, 200),
        "refusal": _text_of(message.get("refusal")),
        "usage": usage,
    }
    return fields, None


class AdaptiveLimiter:
    """An asyncio concurrency limit that adapts: AIMD on rate-limit signals.

    ``acquire`` returns the limiter's epoch; pass it to :meth:`on_rate_limited` so that a burst of
    429s from requests sent under the same limit halves it once, not once per request.
    """

    def __init__(self, max_limit: int, *, min_limit: int = 1, decrease_factor: float = 0.5) -> None:
        if max_limit < 1 or not 1 <= min_limit <= max_limit:
            raise ValueError(f"need 1 <= min_limit <= max_limit, got {min_limit}, {max_limit}")
        self.max_limit = max_limit
        self.min_limit = min_limit
        self._factor = decrease_factor
        self._limit = float(max_limit)
        self._in_flight = 0
        self._epoch = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return int(self._limit)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Acquirers waiting for a slot."""
        return len(self._waiters)

    async def acquire(self) -> int:
        if not self._waiters and self._in_flight < int(self._limit):
            self._in_flight += 1
            return self._epoch
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            raise
        return self._epoch

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._in_flight < int(self._limit):
            future = self._waiters.popleft()
            if not future.done():
                self._in_flight += 1
                future.set_result(None)

    def on_success(self) -> None:
        """Additive increase: one more slot per window of successes."""
        if self._limit < self.max_limit:
            self._limit = min(float(self.max_limit), self._limit + 1.0 / self._limit)
            self._wake()

    def on_rate_limited(self, epoch: int) -> None:
        """Multiplicative decrease, once per epoch."""
        if epoch != self._epoch:
            return
        self._epoch += 1
        self._limit = max(float(self.min_limit), self._limit * self._factor)


# Failures after which a replica counts as unreachable (it refused the connection or never answered).
_UNREACHABLE = frozenset({ModelErrorKind.CONNECTION, ModelErrorKind.TIMEOUT})
# Sessions whose replica the pool remembers, at most (far more than episodes in flight).
_PLACEMENTS = 100_000
# A new session skips a replica whose load (requests in flight and waiting) is at least this many
# times its share (consistent hashing with bounded loads).
BOUNDED_LOAD = 1.25


def _load(replica: _Replica) -> int:
    return replica.limiter.in_flight + replica.limiter.waiting


class _Replica:
    """One server of a model: its URL, its own concurrency limit and its health."""

    __slots__ = ("credentials", "failures", "index", "label", "last_error", "limiter", "out_until", "query", "url")

    def __init__(self, index: int, url: str, limit: int, min_limit: int) -> None:
        self.index = index
        # Credentials go as basic authentication, query parameters as the query of each request: the URL the
        # SDK and the HTTP client see, and the replica's label, hold neither.
        url, self.credentials = split_credentials(url)
        self.url, self.query = split_query(url)
        self.label = self.url
        self.limiter = AdaptiveLimiter(limit, min_limit=min(min_limit, limit))
        self.failures = 0  # refused connections / timeouts in a row
        self.out_until = 0.0  # monotonic time it comes back; 0: in rotation
        self.last_error = ""


class ReplicaPool:
    """The replicas of one model, shared by the clients (shards) of one event loop.

    :meth:`place` picks the replica of a session: the one that served its previous call while it
    is in rotation. A new session goes to the first replica in its rendezvous-hash order (which
    depends on the session id and the replica URLs only) that is in rotation and not already
    loaded beyond :data:`BOUNDED_LOAD` times its share of the requests in flight and waiting
    (consistent hashing with bounded loads: hashing alone piles a few too many sessions on some
    replica, which then bounds the run). When a replica goes out, only its sessions move, each to
    the next replica in its own order, and the move is reported once.
    """

    def __init__(
        self, base_urls: Sequence[str], *, max_concurrency: int = 64, min_concurrency: int = 1,
        policy: ReplicaPolicy | None = None,
    ) -> None:
        if not base_urls:
            raise ValueError("a replica pool needs at least one base URL")
        self.policy = policy or ReplicaPolicy()
        limit = self.policy.max_concurrency or max_concurrency
        self.replicas = [_Replica(i, url, limit, min_concurrency) for i, url in enumerate(base_urls)]
        labels = [r.label for r in self.replicas]
        if len(set(labels)) != len(labels):
            raise ValueError(f"replica base URLs must differ, got {labels}")
        self._placements: OrderedDict[str, int] = OrderedDict()
        # How the model's first calls ended (every client of the model shares it): a server that answers
        # none of them usably stops the run.
        self.first_calls = FirstCallsGuard()

    def __len__(self) -> int:
        return len(self.replicas)

    def order(self, session: str) -> list[_Replica]:
        """The replicas in the session's preference order (rendezvous hashing on session and URL)."""
        def weight(replica: _Replica) -> bytes:
            return hashlib.blake2b(f"{session}\x00{replica.label}".encode(), digest_size=8).digest()

        return sorted(self.replicas, key=weight, reverse=True)

    def is_in(self, replica: _Replica, now: float) -> bool:
        return replica.out_until <= now

    def place(self, session: str) -> tuple[_Replica, str | None]:
        """The replica for the next attempt of ``session``'s call, and a description of the move when the
        session leaves the replica it was on (or, on its first call, its home replica)."""
        if len(self.replicas) == 1:
            return self.replicas[0], None
        now = time.monotonic()
        index = self._placements.get(session)
        current = self.replicas[index] if index is not None else None
        if current is not None and self.is_in(current, now):
            self._placements.move_to_end(session)
            return current, None
        order = self.order(session)
        candidates = [r for r in order if self.is_in(r, now)]
        if current is None:
            current = order[0]
            # A new session goes to the first replica in its order that is not already busier than its share
            # (consistent hashing with bounded loads): a few hashes must not pile sessions on one replica.
            bound = math.ceil(BOUNDED_LOAD * (sum(_load(r) for r in candidates) + 1) / max(1, len(candidates)))
            chosen = next((r for r in candidates if _load(r) < bound), candidates[0] if candidates else None)
        else:
            chosen = candidates[0] if candidates else None
        if chosen is None:  # every replica is out: the one back soonest
            chosen = min(self.replicas, key=lambda r: r.out_until)
        self._placements[session] = chosen.index
        self._placements.move_to_end(session)
        if len(self._placements) > _PLACEMENTS:
            self._placements.popitem(last=False)
        if chosen is current or self.is_in(current, now):  # the home replica was only busy: a placement, no move
            return chosen, None
        why = current.last_error or "out of rotation"
        return chosen, f"{current.label} -> {chosen.label}: {current.label} is out of rotation ({why})"

    def on_success(self, replica: _Replica) -> None:
        replica.failures = 0

    def on_failure(self, replica: _Replica, error: ModelError) -> None:
        """Count a refused connection or a timeout; enough in a row take the replica out for a while."""
        if error.kind not in _UNREACHABLE or len(self.replicas) == 1:
            return
        replica.failures += 1
        if replica.failures >= self.policy.failures_to_eject and replica.out_until <= time.monotonic():
            replica.out_until = time.monotonic() + self.policy.eject_s
            replica.last_error = (
                f"{replica.failures} {error.kind.value} failures in a row, out for {self.policy.eject_s:g}s; "
                f"last: {redact_credentials(error.message)[:200]}"
            )
            # Back in rotation on probation: one more failure takes it out again.
            replica.failures = self.policy.failures_to_eject - 1

    def out_of_rotation(self) -> list[str]:
        """Labels of the replicas out of rotation now."""
        now = time.monotonic()
        return [r.label for r in self.replicas if not self.is_in(r, now)]


class ClientStats(BaseModel):
    """A snapshot of a client's counters, for progress bars and run summaries."""

    calls: int = Field(description="complete() calls started.")
    completed: int = Field(description="complete() calls finished (with or without error).")
    in_flight: int = Field(description="HTTP requests in flight now.")
    http_requests: int = Field(description="HTTP attempts made.")
    retries: int = Field(description="Attempts that were retries.")
    cache_hits: int = Field(description="Calls served from the cache.")
    cache_misses: int = Field(description="Calls that went to the server.")
    prompt_tokens: int = Field(description="Prompt tokens of server-answered calls.")
    completion_tokens: int = Field(description="Completion tokens of server-answered calls.")
    errors: dict[str, int] = Field(description="Recorded errors by kind.")
    concurrency_limit: int = Field(description="Current adaptive concurrency limit.")
    elapsed_s: float = Field(description="Seconds since the first call.")
    calls_per_s: float = Field(description="Completed calls per second since the first call.")
    replica_requests: dict[str, int] = Field(
        default_factory=dict, description="HTTP attempts per replica (base URL), when the model has several."
    )
    replica_moves: int = Field(default=0, description="Calls that moved a session to another replica.")


def merge_client_stats(stats: Sequence[ClientStats]) -> ClientStats:
    """The counters of several clients added up (rates too; the elapsed time is the longest)."""
    errors: Counter[str] = Counter()
    replicas: Counter[str] = Counter()
    for s in stats:
        errors.update(s.errors)
        replicas.update(s.replica_requests)
    return ClientStats(
        calls=sum(s.calls for s in stats),
        completed=sum(s.completed for s in stats),
        in_flight=sum(s.in_flight for s in stats),
        http_requests=sum(s.http_requests for s in stats),
        retries=sum(s.retries for s in stats),
        cache_hits=sum(s.cache_hits for s in stats),
        cache_misses=sum(s.cache_misses for s in stats),
        prompt_tokens=sum(s.prompt_tokens for s in stats),
        completion_tokens=sum(s.completion_tokens for s in stats),
        errors=dict(errors),
        concurrency_limit=sum(s.concurrency_limit for s in stats),
        elapsed_s=max((s.elapsed_s for s in stats), default=0.0),
        calls_per_s=sum(s.calls_per_s for s in stats),
        replica_requests=dict(replicas),
        replica_moves=sum(s.replica_moves for s in stats),
    )


class _Attempt:
    """The outcome of one HTTP attempt."""

    __slots__ = ("error", "fields", "retry_after", "status")

    def __init__(
        self,
        fields: dict[str, Any] | None = None,
        error: ModelError | None = None,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        self.fields = fields
        self.error = error
        self.retry_after = retry_after
        self.status = status


def _retry_after(response: httpx2.Response | None) -> float | None:
    if response is None:
        return None
    headers = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


class ModelClient:
    """Async chat-completions client with cache, retries and adaptive concurrency (see module doc).

    ``max_concurrency`` bounds HTTP requests in flight (cache hits do not count); the limit adapts
    between ``min_concurrency`` and it. Use as an async context manager or call :meth:`aclose`.
    A client belongs to one event loop; create one per loop (per process).

    A model with several replicas (``settings.base_urls``) is served through a :class:`ReplicaPool`
    (pass one to share it between several clients of the loop, or let the client make its own):
    each replica then has its own limit, which is the one that adapts to its 429s, while
    ``max_concurrency`` caps the client's requests in all.

    A client in one of several processes sharing a cache (the workers of a distributed run) gets a
    :class:`~commitbench.cache.CallBroker`: a miss of its cache is claimed from the broker before the
    model is called, so each call is made once in all the processes.
    """

    def __init__(
        self,
        settings: ModelSettings,
        *,
        cache: CallCache | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 64,
        min_concurrency: int = 1,
        http_client: httpx2.AsyncClient | None = None,
        replicas: ReplicaPool | None = None,
        broker: CallBroker | None = None,
    ) -> None:
        self.settings = settings
        self.cache = cache if cache is not None and cache.mode is not CacheMode.OFF else None
        # With a broker, the cache is this process's copy of a cache other processes share.
        self.broker = broker if self.cache is not None else None
        self.retry = retry or RetryPolicy()
        self.limiter = AdaptiveLimiter(max_concurrency, min_limit=min_concurrency)
        self._rng = random.Random(self.retry.seed)
        self._identity = settings.identity()
        if replicas is None:
            replicas = ReplicaPool(
                settings.endpoints(), max_concurrency=max_concurrency, min_concurrency=min_concurrency
            )
        self.replicas = replicas
        # With one replica its 429s adapt the client's limit, as they always did; with several, each
        # replica's own limit adapts and the client's limit is a plain cap.
        self._single = len(replicas) == 1
        # Credentials in a base URL are sent as HTTP basic authentication, and the URL the SDK and
        # the HTTP client see (and may log or put in an error) holds none. Replicas share the HTTP
        # client (its pool keys connections by host), except one with credentials of its own.
        # The SDK's default connection pool is kept on purpose: a keep-alive pool as large as the
        # concurrency makes the pool's per-request scan of idle connections cost more CPU than the
        # reconnects it saves.
        # Every secret the client holds, in every form a server could send back, is scrubbed from what it returns.
        self._secrets = Secrets()
        self._secrets.add(settings.api_key())
        for url in settings.endpoints():
            self._secrets.add_url(url)
        # Every HTTP client reads response bodies up to max_response_bytes and no further.
        self._openai_by_replica: list[openai.AsyncOpenAI] = []
        for replica in replicas.replicas:
            client_for_replica = http_client
            if client_for_replica is None or (replica.credentials is not None and not self._single):
                client_for_replica = openai.DefaultAsyncHttpxClient()
            if replica.credentials is not None:
                client_for_replica.auth = httpx2.BasicAuth(*replica.credentials)
            bound_response_bodies(client_for_replica, settings.max_response_bytes)
            self._openai_by_replica.append(
                openai.AsyncOpenAI(
                    base_url=replica.url,
                    default_query=replica.query or None,
                    api_key=settings.api_key(),
                    max_retries=0,
                    timeout=settings.timeout,
                    http_client=client_for_replica,
                )
            )
        self._calls = 0
        self._completed = 0
        self._inflight: dict[str, asyncio.Future[ModelResponse]] = {}
        self._http_requests = 0
        self._retries = 0
        self._cache_hits = 0
        self._cache_misses = 0
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._errors: Counter[str] = Counter()
        self._replica_requests: Counter[str] = Counter()
        self._replica_moves = 0
        self._started: float | None = None

    # ------------------------------------------------------------------ public API
    def key_for(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        sample_index: int = 0,
    ) -> str:
        """The cache key :meth:`complete` would use for these arguments."""
        return cache_key(
            self._identity, messages, tools=tools, options=_options(tool_choice, response_format),
            sample_index=sample_index,
        )

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        sample_index: int = 0,
        session_id: str | None = None,
        temperature: float | None = None,
    ) -> ModelResponse:
        """One chat completion (cache first, then the server with retries).

        ``messages`` and ``tools`` are plain OpenAI-format dicts. ``response_format`` is passed
        through (e.g. ``{"type": "json_schema", "json_schema": {...}}`` for judges).
        ``sample_index`` tells repeated samples of the same prompt apart (cache key and seed).
        ``session_id`` is sent as the ``X-Session-ID`` header for session-affinity routers; it is
        not part of the cache key. ``temperature`` overrides the settings' temperature for this call
        (part of the cache key). Returns a response whose ``error`` is set when no usable
        completion came back; raises :class:`ModelEndpointError` on authentication / unknown-model
        errors and :class:`~commitbench.cache.CacheMiss` on a replay-only miss.
        """
        started = time.perf_counter()
        if self._started is None:
            self._started = started
        self._calls += 1
        options = _options(tool_choice, response_format, temperature)
        key = cache_key(self._identity, messages, tools=tools, options=options, sample_index=sample_index)
        model = self.settings.model
        try:
            if self.cache is not None:
                stored = self.cache.get(key, model)  # may raise CacheMiss in replay-only mode
                if stored is not None:
                    self._cache_hits += 1
                    return self._from_cache(stored, key, started)
                self._cache_misses += 1
            # With a cache, one key has one answer; with the cache off every call is its own sample.
            coalesce = self.cache is not None and self.cache.mode is not CacheMode.OFF
            leader = self._inflight.get(key) if coalesce else None
            if leader is not None:
                # The same request is already on its way: share its answer instead of asking twice.
                # A server need not be deterministic, and two answers to one key would make the
                # cache disagree with one of the traces (and replay diverge).
                shared = await asyncio.shield(leader)
                self._cache_hits += 1
                return shared.model_copy(update={"cache_hit": True, "latency_s": time.perf_counter() - started})
            if not coalesce:
                response = await self._call_server(messages, tools, options, sample_index, session_id, key, started)
                return response
            future: asyncio.Future[ModelResponse] = asyncio.get_running_loop().create_future()
            self._inflight[key] = future
            try:
                response = await self._lead(messages, tools, options, sample_index, session_id, key, started)
                future.set_result(response)
            except asyncio.CancelledError:
                future.cancel()
                raise
            except Exception as exc:
                future.set_exception(exc)
                future.exception()  # mark retrieved: followers re-raise it, nobody else has to
                raise
            finally:
                del self._inflight[key]
            return response
        finally:
            self._completed += 1

    def stats(self) -> ClientStats:
        """Counters since the client was created."""
        elapsed = time.perf_counter() - self._started if self._started is not None else 0.0
        return ClientStats(
            calls=self._calls,
            completed=self._completed,
            in_flight=self.limiter.in_flight,
            http_requests=self._http_requests,
            retries=self._retries,
            cache_hits=self._cache_hits,
            cache_misses=self._cache_misses,
            prompt_tokens=self._prompt_tokens,
            completion_tokens=self._completion_tokens,
            errors=dict(self._errors),
            concurrency_limit=self.limiter.limit,
            elapsed_s=elapsed,
            calls_per_s=self._completed / elapsed if elapsed > 0 else 0.0,
            replica_requests=dict(self._replica_requests) if not self._single else {},
            replica_moves=self._replica_moves,
        )

    async def aclose(self) -> None:
        for client in self._openai_by_replica:
            await client.close()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ internals
    def _from_cache(self, stored: dict[str, Any], key: str, started: float) -> ModelResponse:
        calls = []
        for item in stored.get("tool_calls", []):
            arguments, error = parse_tool_arguments(item["arguments"], self.settings.max_argument_bytes)
            calls.append(
                ToolCall(id=escape_surrogates(item["id"]), name=escape_surrogates(item["name"]),
                         arguments_raw=escape_surrogates(item["arguments"]), arguments=arguments, parse_error=error)
            )
        finish = stored.get("finish_reason")
        return ModelResponse(
            model=escape_surrogates(stored.get("model") or self.settings.model),
            text=_text_of(stored.get("text")),
            reasoning=_text_of(stored.get("reasoning")),
            tool_calls=calls,
            finish_reason=None if finish is None else escape_surrogates(finish),
            refusal=_text_of(stored.get("refusal")),
            usage=Usage.model_validate(stored.get("usage") or {}),
            latency_s=time.perf_counter() - started,
            model_time_s=_stored_seconds(stored.get("latency_s")),
            attempts=0,
            cache_hit=True,
            cache_key=key,
        )

    async def _lead(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        options: dict[str, Any],
        sample_index: int,
        session_id: str | None,
        key: str,
        started: float,
    ) -> ModelResponse:
        """The call of a key no other call of this client is making: claimed from the broker (when the
        cache is shared), else made, and recorded in the cache."""
        model = self.settings.model
        assert self.cache is not None
        if self.broker is not None:
            shared = await self.broker.claim(key, model)  # may raise CacheMiss in replay-only mode
            if shared is not None:
                self._cache_hits += 1
                self.cache.put(key, model, shared)
                return self._from_cache(shared, key, started)
        recorded: dict[str, Any] | None = None
        try:
            response = await self._call_server(messages, tools, options, sample_index, session_id, key, started)
            if response.error is None:
                recorded = response.cache_payload()
                self.cache.put(key, model, recorded)
        finally:
            if self.broker is not None:
                self.broker.settle(key, model, recorded)
        return response

    def _request(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        options: dict[str, Any],
        sample_index: int,
        session_id: str | None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The JSON body and extra headers of a chat-completions request."""
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "messages": messages}
        if tools:
            body["tools"] = tools
        body.update(options)
        sampling = s.sampling()
        if "seed" in sampling:
            sampling["seed"] += sample_index
        body.update(sampling)
        if "temperature" in options:  # a per-call override wins over the settings
            body["temperature"] = options["temperature"]
        body.update(s.extra_body)  # extra_body fields sit at the top level of the JSON body
        # An uncompressed answer: its size on the wire is its size (the bound holds either way).
        headers = {"Accept-Encoding": "identity"}
        if session_id is not None:
            headers[SESSION_HEADER] = session_id
        return body, headers

    async def _call_server(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        options: dict[str, Any],
        sample_index: int,
        session_id: str | None,
        key: str,
        started: float,
    ) -> ModelResponse:
        body, headers = self._request(messages, tools, options, sample_index, session_id)
        pool = self.replicas
        route = session_id if session_id is not None else key  # calls outside a session spread by content
        moves: list[str] = []
        attempt = 0
        while True:
            attempt += 1
            replica, move = pool.place(route)
            if move is not None:
                moves.append(move)
                self._replica_moves += 1
            epoch = await self.limiter.acquire()
            try:
                replica_epoch = await replica.limiter.acquire()
                try:
                    self._http_requests += 1
                    if not self._single:
                        self._replica_requests[replica.label] += 1
                    outcome = await self._attempt(body, headers, replica)
                finally:
                    replica.limiter.release()
            finally:
                self.limiter.release()
            if outcome.error is None:
                pool.first_calls.on_answer()
                pool.on_success(replica)
                (self.limiter if self._single else replica.limiter).on_success()
                assert outcome.fields is not None
                usage: Usage = outcome.fields["usage"]
                self._prompt_tokens += usage.prompt_tokens
                self._completion_tokens += usage.completion_tokens
                elapsed = time.perf_counter() - started
                return ModelResponse(
                    **outcome.fields,
                    latency_s=elapsed,
                    model_time_s=elapsed,
                    attempts=attempt,
                    cache_key=key,
                    replica="" if self._single else replica.label,
                    replica_moves=moves,
                )
            error = outcome.error
            pool.on_failure(replica, error)
            if error.kind is ModelErrorKind.RATE_LIMITED:
                if self._single:
                    self.limiter.on_rate_limited(epoch)
                else:
                    replica.limiter.on_rate_limited(replica_epoch)
            if error.kind not in RETRYABLE_ERRORS or attempt >= self.retry.max_attempts:
                self._errors[error.kind.value] += 1
                if error.kind is ModelErrorKind.CONTEXT_LENGTH:
                    pool.first_calls.on_answer()  # the server serves the model: this prompt is too long for it
                stop = pool.first_calls.on_failure(self.settings.model, error)
                if stop is not None:
                    raise ModelEndpointError(stop)
                if error.kind in RETRYABLE_ERRORS:
                    error = error.model_copy(
                        update={"message": f"gave up after {attempt} attempts; last error: {error.message}"}
                    )
                elapsed = time.perf_counter() - started
                return ModelResponse(
                    model=(outcome.fields or {}).get("model") or self.settings.model,
                    latency_s=elapsed,
                    model_time_s=elapsed,
                    attempts=attempt,
                    cache_key=key,
                    error=error,
                    replica="" if self._single else replica.label,
                    replica_moves=moves,
                )
            self._retries += 1
            await asyncio.sleep(self._backoff(attempt, outcome.retry_after))

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        return backoff_delay(self.retry, attempt, self._rng, retry_after)

    async def _attempt(self, body: dict[str, Any], headers: dict[str, str], replica: _Replica) -> _Attempt:
        """One HTTP attempt, with every secret of the client scrubbed from its outcome."""
        outcome = await self._attempt_once(body, headers, replica)
        if outcome.error is not None:
            message = self._secrets.scrub_message(outcome.error.message)
            outcome.error = outcome.error.model_copy(update={"message": message})
        if outcome.fields is not None and self._secrets:
            outcome.fields = _scrubbed_fields(outcome.fields, self._secrets, self.settings.max_argument_bytes)
        return outcome

    async def _attempt_once(self, body: dict[str, Any], headers: dict[str, str], replica: _Replica) -> _Attempt:
        # The SDK's generic request path: the body is already plain JSON, so the SDK's typed
        # parameter transformation (a large share of its CPU cost per call) is skipped, and the
        # raw response is parsed here, where a truncated body becomes a recorded error.
        # One deadline for the whole attempt (connecting, the headers and the body together): the HTTP
        # client's own timeout bounds each wait for a byte, so a server that trickles its answer one
        # byte at a time would otherwise hold the call for ever.
        # The body is streamed and read here, up to max_response_bytes (error bodies, which the SDK
        # reads itself, are bounded by the client's response hook).
        deadline = self.settings.timeout
        try:
            async with asyncio.timeout(deadline):
                response = await self._openai_by_replica[replica.index].post(
                    "/chat/completions", cast_to=httpx2.Response, body=body, options={"headers": headers}, stream=True,
                )
                try:
                    content = await read_body(response, self.settings.max_response_bytes)
                finally:
                    await response.aclose()
        except ResponseTooLarge as exc:
            return _Attempt(error=ModelError(kind=ModelErrorKind.RESPONSE_TOO_LARGE, message=str(exc)))
        except TimeoutError:
            return _Attempt(error=ModelError(
                kind=ModelErrorKind.TIMEOUT,
                message=f"no complete answer within {deadline:g} s (connecting, headers and body together)",
            ))
        except openai.APITimeoutError as exc:
            return _Attempt(error=ModelError(kind=ModelErrorKind.TIMEOUT, message=str(exc)))
        except openai.APIConnectionError as exc:
            cause = f" ({type(exc.__cause__).__name__}: {exc.__cause__})" if exc.__cause__ else ""
            return _Attempt(error=ModelError(kind=ModelErrorKind.CONNECTION, message=f"{exc}{cause}"))
        except openai.APIStatusError as exc:
            return self._status_error(exc, replica.url)
        except httpx2.TimeoutException as exc:  # a wait for a byte of the body ran out
            return _Attempt(error=ModelError(kind=ModelErrorKind.TIMEOUT, message=f"{type(exc).__name__}: {exc}"))
        except httpx2.HTTPError as exc:  # the connection broke while the body was read
            return _Attempt(error=ModelError(
                kind=ModelErrorKind.CONNECTION, message=f"while reading the body: {type(exc).__name__}: {exc}"
            ))
        try:
            payload = json.loads(content)
        except RecursionError:
            return _Attempt(
                error=ModelError(
                    kind=ModelErrorKind.INVALID_RESPONSE,
                    message=f"response body is nested too deep to read ({len(content)} bytes)",
                    status_code=response.status_code,
                )
            )
        except ValueError as exc:
            return _Attempt(
                error=ModelError(
                    kind=ModelErrorKind.TRUNCATED_BODY,
                    message=f"response body is not complete JSON ({len(content)} bytes): {exc}",
                    status_code=response.status_code,
                )
            )
        fields, error = parse_completion(
            payload, fallback_model=self.settings.model, max_argument_bytes=self.settings.max_argument_bytes
        )
        if error is not None:
            error = error.model_copy(update={"status_code": response.status_code})
        return _Attempt(fields=fields, error=error)

    def _status_error(self, exc: openai.APIStatusError, endpoint: str) -> _Attempt:
        status = exc.status_code
        message = f"HTTP {status}: {exc.message}"[:MAX_ERROR_CHARS]
        if status in (401, 403, 404):
            raise ModelEndpointError(
                f"{endpoint} rejected model {self.settings.model!r} ({self._secrets.scrub_message(message)}); "
                f"check base_url, the model name and ${self.settings.api_key_env or 'API key'}"
            ) from exc
        if status == 429:
            kind = ModelErrorKind.RATE_LIMITED
        elif status >= 500 or status in (408, 409):
            kind = ModelErrorKind.SERVER_ERROR
        elif is_context_length(status, f"{exc.message} {exc.code or ''}"):
            kind = ModelErrorKind.CONTEXT_LENGTH
        else:
            kind = ModelErrorKind.BAD_REQUEST
        return _Attempt(
            error=ModelError(kind=kind, message=message, status_code=status),
            retry_after=_retry_after(exc.response),
            status=status,
        )


def _scrubbed_fields(fields: dict[str, Any], secrets: Secrets, max_argument_bytes: int) -> dict[str, Any]:
    """A completion's fields with every secret replaced (a tool call whose arguments held one is parsed again)."""
    out = dict(fields)
    for name in ("model", "text", "reasoning", "refusal", "finish_reason"):
        if isinstance(out.get(name), str):
            out[name] = secrets.scrub(out[name])
    calls = []
    for call in out.get("tool_calls") or []:
        raw = secrets.scrub(call.arguments_raw)
        update: dict[str, Any] = {"id": secrets.scrub(call.id), "name": secrets.scrub(call.name)}
        if raw != call.arguments_raw:
            arguments, error = parse_tool_arguments(raw, max_argument_bytes)
            update.update(arguments_raw=raw, arguments=arguments, parse_error=error)
        calls.append(call.model_copy(update=update))
    out["tool_calls"] = calls
    return out


def _options(
    tool_choice: str | Mapping[str, Any] | None,
    response_format: Mapping[str, Any] | None,
    temperature: float | None = None,
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if temperature is not None:
        options["temperature"] = temperature
    if tool_choice is not None:
        options["tool_choice"] = tool_choice
    if response_format is not None:
        options["response_format"] = response_format
    return options
