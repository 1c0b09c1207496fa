"""The scripted model behind the mock server: what each chat request gets, faults included.

:class:`ScriptedModel` knows nothing of HTTP: it turns a chat request's path, headers and body into an
:data:`Answer`, one of a JSON reply, a stream of server-sent events, a held connection or a dropped one;
the HTTP application (:mod:`commitbench.mock.app`) carries the answer out on the wire.

What a completion contains, in order of precedence
---------------------------------------------------
1. the next entry of a FIFO queue of scripted replies (:meth:`ScriptedModel.script`);
2. otherwise the reply of a *responder*, a callable ``(request_json) -> ReplySpec | str | dict | None``
   that lets a scripted "model" react to the conversation (``None`` falls through);
3. otherwise a default reply that echoes the last user message.

Faults are drawn per request, either from a scripted sequence or with per-kind rates from a
seeded RNG. Faults that produce no usable completion (HTTP 500/429, timeout, disconnect,
truncated body, empty choices) do not consume a scripted reply, so a client that retries gets the
reply it was meant to get. Faults that spoil a completion (malformed tool-call arguments, refusal)
consume the reply they spoil.

Service capacity: ``capacity=K`` models a server that saturates: at most K chat requests are served
at once, each taking the configured latency; the others wait in line for a free slot (the way a GPU
server queues requests past its batch size), so the throughput of one server is at most K / latency
requests per second. By default every request is served at once.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import threading
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from commitbench.mock.replies import (
    as_malformed,
    as_refusal,
    completion_json,
    error_json,
    json_bytes,
    last_user_text,
    stream_events,
    validate_request,
)
from commitbench.mock.specs import (
    DEFAULT_MODEL,
    TRANSPORT_FAULTS,
    FaultConfig,
    FaultKind,
    ReplySpec,
    Responder,
    ServerStats,
    coerce_reply,
)

__all__ = ["Answer", "DropAnswer", "HoldAnswer", "JsonAnswer", "ScriptedModel", "StreamAnswer", "error_answer"]


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    """A whole JSON response (its body may be a cut document: the truncated-body fault)."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HoldAnswer:
    """Keep the connection open without answering, until the client leaves or ``seconds`` pass; then close it."""

    seconds: float


@dataclass(frozen=True, slots=True)
class DropAnswer:
    """Close the connection without answering."""


@dataclass(frozen=True, slots=True)
class StreamAnswer:
    """Server-sent events written one by one, ``delay_s`` apart; ``complete`` False cuts the stream off
    before its end (no terminating chunk, the connection closed)."""

    events: list[bytes]
    delay_s: float
    complete: bool = True


Answer = JsonAnswer | HoldAnswer | DropAnswer | StreamAnswer


def error_answer(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JsonAnswer:
    """An OpenAI-style error response."""
    return JsonAnswer(status, error_json(status, message, kind), headers or {})


class ScriptedModel:
    """The mock server's state and behaviour; see the module docstring.

    All configuration methods are thread-safe, so a test can script replies while the server runs
    on its own thread; the answering methods run on the server's event loop.
    """

    def __init__(
        self,
        *,
        latency_ms: float = 0.0,
        latency_jitter_ms: float = 0.0,
        faults: FaultConfig | None = None,
        models: Sequence[str] = (DEFAULT_MODEL,),
        record_requests: int = 1000,
        capacity: int | None = None,
        streaming: bool = False,
    ) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be at least 1 (or None for no limit), got {capacity}")
        self._streaming = streaming
        self._lock = threading.Lock()
        self._capacity = self._initial_capacity = capacity
        self._slots: asyncio.Semaphore | None = asyncio.Semaphore(capacity) if capacity else None
        self._serving = 0
        self._max_serving = 0
        self._latency_s = self._initial_latency_s = latency_ms / 1000.0
        self._jitter_s = self._initial_jitter_s = latency_jitter_ms / 1000.0
        self._models = list(models)
        self._record_limit = record_requests
        self._queue: deque[ReplySpec] = deque()
        self._responder: Responder | None = None
        self._faults = faults or FaultConfig()
        self._fault_sequence: deque[FaultKind | None] = deque(self._faults.sequence)
        self._rng = random.Random(self._faults.seed)
        self._requests: deque[dict[str, Any]] = deque(maxlen=max(record_requests, 1))
        self._total = 0
        self._chat = 0
        self._outcomes: Counter[str] = Counter()
        self._in_flight = 0
        self._max_in_flight = 0
        self._completion_counter = 0

    # ----------------------------------------------------------------- configuration
    def script(self, *replies: ReplySpec | str | dict[str, Any]) -> None:
        """Append replies to the FIFO queue (a str is a plain text reply)."""
        specs = [coerce_reply(r) for r in replies]
        with self._lock:
            self._queue.extend(s for s in specs if s is not None)

    def set_responder(self, responder: Responder | None) -> None:
        """Install (or remove, with None) the callable consulted when the queue is empty.

        It runs on the server's event loop (the server thread), once per completion that reaches
        it, so it should be quick; it may be a coroutine function.
        """
        with self._lock:
            self._responder = responder

    def set_faults(self, config: FaultConfig | None = None, **fields: Any) -> None:
        """Replace the fault configuration, from a FaultConfig or its fields; reseeds the RNG."""
        if config is not None and fields:
            raise TypeError("pass either a FaultConfig or its fields, not both")
        config = config or FaultConfig(**fields)
        with self._lock:
            self._faults = config
            self._fault_sequence = deque(config.sequence)
            self._rng = random.Random(config.seed)

    def set_latency(self, latency_ms: float, jitter_ms: float = 0.0) -> None:
        """Set the base latency (and uniform jitter) of chat replies."""
        with self._lock:
            self._latency_s = latency_ms / 1000.0
            self._jitter_s = jitter_ms / 1000.0

    def set_capacity(self, capacity: int | None) -> None:
        """Serve at most ``capacity`` chat requests at once from now on (None: no limit).

        Requests already waiting for a slot keep waiting under the previous limit.
        """
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be at least 1 (or None for no limit), got {capacity}")
        with self._lock:
            self._capacity = capacity
            self._slots = asyncio.Semaphore(capacity) if capacity else None

    def reset(self) -> None:
        """Empty the queue, remove the responder and faults, restore the configured latency and
        capacity, and zero the counters."""
        if self._capacity != self._initial_capacity:
            self.set_capacity(self._initial_capacity)
        with self._lock:
            self._latency_s = self._initial_latency_s
            self._jitter_s = self._initial_jitter_s
            self._queue.clear()
            self._responder = None
            self._faults = FaultConfig()
            self._fault_sequence = deque()
            self._rng = random.Random(0)
            self._requests.clear()
            self._total = 0
            self._chat = 0
            self._outcomes = Counter()
            self._max_in_flight = self._in_flight
            self._max_serving = self._serving

    def stats(self) -> ServerStats:
        """Counts since the last reset."""
        with self._lock:
            return ServerStats(
                total=self._total,
                chat_completions=self._chat,
                outcomes=dict(self._outcomes),
                queued_replies=len(self._queue),
                max_in_flight=self._max_in_flight,
                max_serving=self._max_serving,
                capacity=self._capacity,
            )

    def requests(self) -> list[dict[str, Any]]:
        """The most recent requests: ``{"method", "path", "headers", "body"}`` (headers lower-cased)."""
        with self._lock:
            return list(self._requests)

    @property
    def models(self) -> list[str]:
        """The model ids ``/v1/models`` lists."""
        return list(self._models)

    # ----------------------------------------------------------------- answering
    def count_request(self) -> None:
        """Count one HTTP request, whatever its route (``ServerStats.total``)."""
        with self._lock:
            self._total += 1

    async def chat_completion(self, path: str, headers: dict[str, str], body: bytes) -> Answer:
        """The answer to one chat-completions request (``headers`` lower-cased, ``body`` as received)."""
        try:
            request = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            request = None
        with self._lock:
            self._chat += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            if self._record_limit:
                self._requests.append({"method": "POST", "path": path, "headers": headers, "body": request})
        try:
            problem = validate_request(request, self._streaming)
            if problem is not None:
                self._count("bad_request")
                return error_answer(400, problem, "invalid_request_error")
            assert isinstance(request, dict)
            with self._lock:
                slots = self._slots
            if slots is None:
                return await self._serve(request)
            async with slots:  # wait in line for a free slot, then take the latency inside it
                return await self._serve(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _serve(self, request: dict[str, Any]) -> Answer:
        with self._lock:
            self._serving += 1
            self._max_serving = max(self._max_serving, self._serving)
        try:
            return await self._complete(request)
        finally:
            with self._lock:
                self._serving -= 1

    def _count(self, outcome: str) -> None:
        with self._lock:
            self._outcomes[outcome] += 1

    def _draw_fault_and_latency(self) -> tuple[FaultKind | None, float, FaultConfig]:
        with self._lock:
            config = self._faults
            if self._fault_sequence:
                fault = self._fault_sequence.popleft()
            else:
                fault = None
                if config.rates:
                    u = self._rng.random()
                    cumulative = 0.0
                    for kind in FaultKind:  # enum order keeps draws reproducible
                        cumulative += config.rates.get(kind, 0.0)
                        if u < cumulative:
                            fault = kind
                            break
            latency = self._latency_s
            if self._jitter_s:
                latency += self._rng.uniform(0.0, self._jitter_s)
        return fault, latency, config

    async def _next_reply(self, request: dict[str, Any], consume: bool) -> ReplySpec:
        with self._lock:
            if self._queue:
                return self._queue.popleft() if consume else self._queue[0]
            responder = self._responder
        if responder is not None:
            value = responder(request)
            if inspect.isawaitable(value):
                value = await value
            reply = coerce_reply(value)
            if reply is not None:
                return reply
        return ReplySpec(text=f"echo: {last_user_text(request)[:200]}")

    def _completion(self, request: dict[str, Any], reply: ReplySpec | None) -> dict[str, Any]:
        with self._lock:
            self._completion_counter += 1
            number = self._completion_counter
        return completion_json(request, reply, number)

    async def _complete(self, request: dict[str, Any]) -> Answer:
        fault, latency, config = self._draw_fault_and_latency()
        reply: ReplySpec | None = None
        try:
            if fault is None or fault not in TRANSPORT_FAULTS:
                reply = await self._next_reply(request, consume=True)
                if reply.fault is not None:
                    fault = reply.fault
            elif fault is FaultKind.TRUNCATED_BODY:
                reply = await self._next_reply(request, consume=False)
        except Exception as exc:  # a broken responder is a test bug: make it loud
            self._count("responder_error")
            return error_answer(500, f"responder failed: {type(exc).__name__}: {exc}", "server_error")
        if reply is not None and reply.latency_ms is not None:
            latency = reply.latency_ms / 1000.0
        if fault is FaultKind.TIMEOUT:
            self._count(fault.value)
            return HoldAnswer(config.timeout_hold_s)
        if latency > 0:
            await asyncio.sleep(latency)
        streamed = bool(request.get("stream"))
        if fault is None:
            self._count("ok")
            completion = self._completion(request, reply)
            if streamed:
                delay = reply.chunk_delay_ms / 1000.0 if reply is not None else 0.0
                return StreamAnswer(stream_events(completion, request), delay)
            return JsonAnswer(200, json_bytes(completion))
        self._count(fault.value)
        return self._spoiled(fault, request, reply, config, streamed)

    def _spoiled(
        self, fault: FaultKind, request: dict[str, Any], reply: ReplySpec | None, config: FaultConfig, streamed: bool
    ) -> Answer:
        """The answer a fault other than a hold makes of the request (its latency already taken)."""
        if fault is FaultKind.HTTP_500:
            return error_answer(500, "injected server error", "server_error")
        if fault is FaultKind.HTTP_429:
            retry = config.retry_after_s
            return error_answer(
                429,
                "injected rate limit",
                "rate_limit_error",
                {"retry-after": f"{retry:g}", "retry-after-ms": f"{retry * 1000:.0f}"},
            )
        if fault is FaultKind.DISCONNECT:
            return DropAnswer()
        if fault is FaultKind.EMPTY_CHOICES:
            payload = self._completion(request, ReplySpec(text=""))
            payload["choices"] = []
            return JsonAnswer(200, json_bytes(payload))
        if fault is FaultKind.TRUNCATED_BODY and streamed:
            events = stream_events(self._completion(request, reply or ReplySpec(text="")), request)
            return StreamAnswer(events[: max(1, len(events) // 2)], 0.0, complete=False)
        if fault is FaultKind.TRUNCATED_BODY:
            full = json_bytes(self._completion(request, reply or ReplySpec(text="")))
            return JsonAnswer(200, full[: max(1, len(full) // 2)])
        if fault is FaultKind.REFUSAL:
            return JsonAnswer(200, json_bytes(self._completion(request, as_refusal(reply))))
        if fault is FaultKind.MALFORMED_TOOL_ARGS:
            return JsonAnswer(200, json_bytes(self._completion(request, as_malformed(reply, request))))
        raise AssertionError(f"unhandled fault {fault}")  # pragma: no cover
