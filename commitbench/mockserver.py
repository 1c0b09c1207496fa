"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

It speaks real HTTP/1.1 (keep-alive, ``Content-Length`` or chunked request bodies) on asyncio
streams, so the ``openai`` client talks to it exactly as it talks to vLLM or OpenAI.

Endpoints
---------
``POST /v1/chat/completions``  completions; ``stream: true`` gets a 400 unless the server streams
                               (``MockServer(streaming=True)``, ``--streaming``): then server-sent events,
                               chunk by chunk, ending with ``data: [DONE]``.
``GET  /v1/models``            the configured model ids.
``GET  /stats``                request counts by outcome (:class:`ServerStats`).
``POST /reset``                empty the reply queue, clear faults and counters.
``POST /script``               append reply specs (a JSON list of :class:`ReplySpec`) to the queue.
``POST /faults``               replace the fault configuration (:class:`FaultConfig`).
``GET  /requests``             the most recent requests (path, headers, JSON body).

Service capacity
----------------
``capacity=K`` (``--capacity K``) models a server that saturates: at most K chat requests are
served at once, each taking the configured latency; the others wait in line for a free slot (the
way a GPU server queues requests past its batch size), so the throughput of one server is at most
K / latency requests per second. By default every request is served at once.

What a completion contains, in order of precedence
---------------------------------------------------
1. the next entry of a FIFO queue of scripted replies (:meth:`MockServer.script`);
2. otherwise the reply of a *responder*, a callable ``(request_json) -> ReplySpec | str | dict | None``
   that lets a scripted "model" react to the conversation (``None`` falls through);
3. otherwise a default reply that echoes the last user message.

Faults are drawn per request, either from a scripted sequence or with per-kind rates from a
seeded RNG. Faults that produce no usable completion (HTTP 500/429, timeout, disconnect,
truncated body, empty choices) do not consume a scripted reply, so a client that retries gets the
reply it was meant to get. Faults that spoil a completion (malformed tool-call arguments, refusal)
consume the reply they spoil.

Run it in a background thread (``with MockServer() as server: ...``) for tests, or as a separate
process for benchmarks so that it does not share the client's GIL::

    python -m commitbench.mockserver --port 0 --latency-ms 50 --fault http_500=0.01 --seed 7

The process prints ``listening on http://127.0.0.1:PORT/v1`` once it accepts connections;
:class:`MockServerProcess` starts it and parses that line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import random
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from commitbench.processes import die_with_parent

__all__ = [
    "FaultConfig",
    "FaultKind",
    "MockServer",
    "MockServerProcess",
    "ReasoningField",
    "ReplySpec",
    "Responder",
    "ServerStats",
    "ToolCallSpec",
]

DEFAULT_MODEL = "mock-model"
_MAX_HEADER_BYTES = 64 * 1024
_MAX_BODY_BYTES = 64 * 1024 * 1024


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
_TRANSPORT_FAULTS = frozenset(
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


class _HttpResponse:
    __slots__ = ("body", "close", "headers", "status")

    def __init__(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, close: bool = False
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.close = close


class _Hold:
    """Keep the connection open without answering, then close it."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class _Drop:
    """Close the connection without answering."""


class _Stream:
    """Server-sent events, written one chunk at a time; ``complete`` False cuts the stream off before its end."""

    __slots__ = ("complete", "delay_s", "events")

    def __init__(self, events: list[bytes], delay_s: float, complete: bool = True) -> None:
        self.events = events
        self.delay_s = delay_s
        self.complete = complete


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 429: "Too Many Requests",
            431: "Request Header Fields Too Large", 500: "Internal Server Error"}


def _json_bytes(obj: Any) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a scripted lone surrogate: send it as a \uXXXX escape, as a server would
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> _HttpResponse:
    body = _json_bytes({"error": {"message": message, "type": kind, "code": status}})
    return _HttpResponse(status, body, headers)


def _word_count(value: Any) -> int:
    """A cheap, deterministic stand-in for a tokenizer: whitespace-separated words."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_word_count(part.get("text") if isinstance(part, dict) else part) for part in value)
    return 0


def _prompt_tokens(request: dict[str, Any]) -> int:
    total = 0
    for message in request.get("messages", []):
        if isinstance(message, dict):
            total += 1 + _word_count(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function", {}) if isinstance(call, dict) else {}
                total += _word_count(function.get("arguments"))
    return total


def _last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _coerce_reply(value: Any) -> ReplySpec | None:
    if value is None or isinstance(value, ReplySpec):
        return value
    if isinstance(value, str):
        return ReplySpec(text=value)
    if isinstance(value, dict):
        return ReplySpec.model_validate(value)
    raise TypeError(f"a responder must return ReplySpec, str, dict or None, not {type(value).__name__}")


class MockServer:
    """A scripted OpenAI-compatible server; see the module docstring for behaviour.

    All configuration methods are thread-safe, so a test can script replies while the server
    runs in its background thread.
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
        # Runtime (set when serving).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        self._host = "127.0.0.1"

    # ----------------------------------------------------------------- configuration
    def script(self, *replies: ReplySpec | str | dict[str, Any]) -> None:
        """Append replies to the FIFO queue (a str is a plain text reply)."""
        specs = [_coerce_reply(r) for r in replies]
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

    # ----------------------------------------------------------------- serving
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the value for ``AsyncOpenAI(base_url=...)``."""
        if self._port is None:
            raise RuntimeError("the mock server is not running")
        return f"http://{self._host}:{self._port}/v1"

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the mock server is not running")
        return self._port

    async def start_serving(self, host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
        """Listen on the running event loop; returns the asyncio server."""
        self._loop = asyncio.get_running_loop()
        self._host = host
        self._server = await asyncio.start_server(
            self._handle_connection, host, port, limit=_MAX_HEADER_BYTES, backlog=1024
        )
        self._port = self._server.sockets[0].getsockname()[1]
        return self._server

    async def stop_serving(self) -> None:
        """Stop listening and close every open connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
        self._server = None

    def start(self, host: str = "127.0.0.1", port: int = 0) -> MockServer:
        """Serve from a daemon thread with its own event loop; returns once listening."""
        if self._thread is not None:
            raise RuntimeError("the mock server is already running")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_serving(host, port))
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.stop_serving())
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.close()

        self._thread = threading.Thread(target=run, name="commitbench-mockserver", daemon=True)
        self._thread.start()
        ready.wait(10.0)
        if failure:
            self._thread = None
            raise RuntimeError(f"mock server failed to start: {failure[0]}") from failure[0]
        return self

    def stop(self) -> None:
        """Stop the background thread started by :meth:`start`."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        self._thread = None
        self._port = None

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- HTTP
    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except asyncio.LimitOverrunError:
                    self._write(writer, _error(431, "request headers too large", "invalid_request_error"), False)
                    return
                try:
                    method, path, version, headers = _parse_head(head)
                    body = await _read_body(reader, headers)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except ValueError as exc:
                    self._write(writer, _error(400, str(exc), "invalid_request_error"), False)
                    return
                connection = headers.get("connection", "").lower()
                keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
                action = await self._dispatch(method, path, headers, body)
                if isinstance(action, _Drop):
                    return
                if isinstance(action, _Stream):
                    if not await self._write_stream(writer, action, keep_alive):
                        return
                    continue
                if isinstance(action, _Hold):
                    # Wait for the client to give up (EOF) or for the hold to end.
                    with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                        await asyncio.wait_for(reader.read(), action.seconds)
                    return
                keep_alive = keep_alive and not action.close
                self._write(writer, action, keep_alive)
                if not keep_alive:
                    with contextlib.suppress(ConnectionError):
                        await writer.drain()
                    return
                if writer.transport.get_write_buffer_size() > 256 * 1024:
                    await writer.drain()
        except ConnectionError:
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    @staticmethod
    async def _write_stream(writer: asyncio.StreamWriter, stream: _Stream, keep_alive: bool) -> bool:
        """Write the events as a chunked body; False when the connection is to be closed afterwards."""
        keep_alive = keep_alive and stream.complete
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            f"transfer-encoding: chunked\r\nconnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1"))
        for event in stream.events:
            writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            await writer.drain()
            if stream.delay_s:
                await asyncio.sleep(stream.delay_s)
        if stream.complete:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep_alive

    @staticmethod
    def _write(writer: asyncio.StreamWriter, response: _HttpResponse, keep_alive: bool) -> None:
        lines = [
            f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Status')}",
            "content-type: application/json",
            f"content-length: {len(response.body)}",
            f"connection: {'keep-alive' if keep_alive else 'close'}",
        ]
        lines.extend(f"{name}: {value}" for name, value in response.headers.items())
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)

    async def _dispatch(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> _HttpResponse | _Hold | _Drop | _Stream:
        path = path.split("?", 1)[0].rstrip("/") or "/"
        with self._lock:
            self._total += 1
        if path in ("/v1/chat/completions", "/chat/completions"):
            if method != "POST":
                return _error(405, "use POST for chat completions", "invalid_request_error")
            return await self._chat_completion(path, headers, body)
        if path in ("/v1/models", "/models") and method == "GET":
            created = int(time.time())
            data = [{"id": m, "object": "model", "created": created, "owned_by": "commitbench"} for m in self._models]
            return _HttpResponse(200, _json_bytes({"object": "list", "data": data}))
        if path == "/stats" and method == "GET":
            return _HttpResponse(200, self.stats().model_dump_json().encode())
        if path == "/requests" and method == "GET":
            return _HttpResponse(200, _json_bytes(self.requests()))
        if path == "/reset" and method == "POST":
            self.reset()
            return _HttpResponse(200, b'{"reset":true}')
        if path == "/script" and method == "POST":
            try:
                items = json.loads(body or b"[]")
                if not isinstance(items, list):
                    raise ValueError("expected a JSON list of reply specs")
                self.script(*items)
            except (ValueError, TypeError) as exc:
                return _error(400, f"bad script: {exc}", "invalid_request_error")
            return _HttpResponse(200, _json_bytes({"queued": self.stats().queued_replies}))
        if path == "/faults" and method == "POST":
            try:
                self.set_faults(FaultConfig.model_validate_json(body or b"{}"))
            except ValueError as exc:
                return _error(400, f"bad fault config: {exc}", "invalid_request_error")
            return _HttpResponse(200, b'{"ok":true}')
        return _error(404, f"no route for {method} {path}", "not_found_error")

    # ----------------------------------------------------------------- completions
    async def _chat_completion(
        self, path: str, headers: dict[str, str], body: bytes
    ) -> _HttpResponse | _Hold | _Drop | _Stream:
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
            problem = _validate_request(request, self._streaming)
            if problem is not None:
                self._count("bad_request")
                return _error(400, problem, "invalid_request_error")
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

    async def _serve(self, request: dict[str, Any]) -> _HttpResponse | _Hold | _Drop | _Stream:
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
            reply = _coerce_reply(value)
            if reply is not None:
                return reply
        return ReplySpec(text=f"echo: {_last_user_text(request)[:200]}")

    async def _complete(self, request: dict[str, Any]) -> _HttpResponse | _Hold | _Drop | _Stream:
        fault, latency, config = self._draw_fault_and_latency()
        reply: ReplySpec | None = None
        try:
            if fault is None or fault not in _TRANSPORT_FAULTS:
                reply = await self._next_reply(request, consume=True)
                if reply.fault is not None:
                    fault = reply.fault
            elif fault is FaultKind.TRUNCATED_BODY:
                reply = await self._next_reply(request, consume=False)
        except Exception as exc:  # a broken responder is a test bug: make it loud
            self._count("responder_error")
            return _error(500, f"responder failed: {type(exc).__name__}: {exc}", "server_error")
        if reply is not None and reply.latency_ms is not None:
            latency = reply.latency_ms / 1000.0
        if fault is FaultKind.TIMEOUT:
            self._count(fault.value)
            return _Hold(config.timeout_hold_s)
        if latency > 0:
            await asyncio.sleep(latency)
        streamed = bool(request.get("stream"))
        if fault is None:
            self._count("ok")
            completion = self._completion_json(request, reply)
            if streamed:
                delay = reply.chunk_delay_ms / 1000.0 if reply is not None else 0.0
                return _Stream(_stream_events(completion, request), delay)
            return _HttpResponse(200, _json_bytes(completion))
        self._count(fault.value)
        if fault is FaultKind.HTTP_500:
            return _error(500, "injected server error", "server_error")
        if fault is FaultKind.HTTP_429:
            retry = config.retry_after_s
            return _error(
                429,
                "injected rate limit",
                "rate_limit_error",
                {"retry-after": f"{retry:g}", "retry-after-ms": f"{retry * 1000:.0f}"},
            )
        if fault is FaultKind.DISCONNECT:
            return _Drop()
        if fault is FaultKind.EMPTY_CHOICES:
            payload = self._completion_json(request, ReplySpec(text=""))
            payload["choices"] = []
            return _HttpResponse(200, _json_bytes(payload))
        if fault is FaultKind.TRUNCATED_BODY and streamed:
            events = _stream_events(self._completion_json(request, reply or ReplySpec(text="")), request)
            return _Stream(events[: max(1, len(events) // 2)], 0.0, complete=False)
        if fault is FaultKind.TRUNCATED_BODY:
            full = _json_bytes(self._completion_json(request, reply or ReplySpec(text="")))
            return _HttpResponse(200, full[: max(1, len(full) // 2)])
        if fault is FaultKind.REFUSAL:
            return _HttpResponse(200, _json_bytes(self._completion_json(request, _as_refusal(reply))))
        if fault is FaultKind.MALFORMED_TOOL_ARGS:
            return _HttpResponse(200, _json_bytes(self._completion_json(request, _as_malformed(reply, request))))
        raise AssertionError(f"unhandled fault {fault}")  # pragma: no cover

    def _completion_json(self, request: dict[str, Any], reply: ReplySpec | None) -> dict[str, Any]:
        reply = reply or ReplySpec(text="")
        with self._lock:
            self._completion_counter += 1
            number = self._completion_counter
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.refusal is not None:
            message["content"] = None
            message["refusal"] = reply.refusal
        if reply.reasoning is not None:
            if reply.reasoning_field in (ReasoningField.REASONING, ReasoningField.BOTH):
                message["reasoning"] = reply.reasoning
            if reply.reasoning_field in (ReasoningField.REASONING_CONTENT, ReasoningField.BOTH):
                message["reasoning_content"] = reply.reasoning
        completion_tokens = _word_count(reply.text) + _word_count(reply.reasoning) + _word_count(reply.refusal)
        if reply.tool_calls:
            calls = []
            for index, call in enumerate(reply.tool_calls):
                arguments = call.arguments if isinstance(call.arguments, str) else _json_bytes(call.arguments).decode()
                completion_tokens += _word_count(arguments) + 1
                calls.append(
                    {
                        "id": call.id or f"call_{number}_{index}",
                        "type": "function",
                        "function": {"name": call.name, "arguments": arguments},
                    }
                )
            message["tool_calls"] = calls
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else _prompt_tokens(request)
        if reply.completion_tokens is not None:
            completion_tokens = reply.completion_tokens
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if reply.reasoning and reply.report_reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": _word_count(reply.reasoning)}
        n = request.get("n") or 1
        return {
            "id": f"chatcmpl-mock-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", DEFAULT_MODEL),
            "choices": [
                {"index": i, "message": message, "finish_reason": finish, "logprobs": None} for i in range(n)
            ],
            "usage": usage,
        }


def _as_refusal(reply: ReplySpec | None) -> ReplySpec:
    return ReplySpec(refusal="I'm sorry, but I can't help with that.", reasoning=reply.reasoning if reply else None)


def _as_malformed(reply: ReplySpec | None, request: dict[str, Any]) -> ReplySpec:
    """Spoil the first tool call's arguments (or invent a call) so they are not valid JSON."""
    reply = reply or ReplySpec()
    calls = list(reply.tool_calls)
    if calls:
        first = calls[0]
        good = first.arguments if isinstance(first.arguments, str) else _json_bytes(first.arguments).decode()
        calls[0] = ToolCallSpec(name=first.name, id=first.id, arguments=good.rstrip("}") + ', "unterminated')
    else:
        tools = request.get("tools") or []
        name = "unknown_tool"
        if tools and isinstance(tools[0], dict):
            name = tools[0].get("function", {}).get("name", name)
        calls = [ToolCallSpec(name=name, arguments='{"value": "unterminated')]
    return reply.model_copy(update={"tool_calls": calls, "fault": None})


_WORDS_PER_CHUNK = 3


def _text_pieces(text: str) -> list[str]:
    """``text`` in pieces of a few words, as a model streams it (joined, the pieces are the text)."""
    words = text.split(" ")
    pieces = [" ".join(words[i : i + _WORDS_PER_CHUNK]) for i in range(0, len(words), _WORDS_PER_CHUNK)]
    return [piece + (" " if index < len(pieces) - 1 else "") for index, piece in enumerate(pieces)]


def _stream_events(completion: dict[str, Any], request: dict[str, Any]) -> list[bytes]:
    """A completion as the server-sent events of a streamed reply: a role chunk, the content a few words at a
    time, each tool call (name, then its arguments in two halves), a finish chunk per choice, the usage when
    ``stream_options.include_usage`` asks for it, and ``[DONE]``."""
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    chunks: list[dict[str, Any]] = []

    def delta(index: int, body: dict[str, Any], finish: str | None = None) -> None:
        chunks.append({**base, "choices": [{"index": index, "delta": body, "finish_reason": finish,
                                            "logprobs": None}]})

    for choice in completion["choices"]:
        index, message = choice["index"], choice["message"]
        delta(index, {"role": "assistant", "content": ""})
        for piece in _text_pieces(message.get("content") or ""):
            if piece:
                delta(index, {"content": piece})
        if message.get("refusal"):
            delta(index, {"refusal": message["refusal"]})
        for number, call in enumerate(message.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            delta(index, {"tool_calls": [{"index": number, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]})
            for part in (arguments[:half], arguments[half:]):
                if part:
                    delta(index, {"tool_calls": [{"index": number, "function": {"arguments": part}}]})
        delta(index, {}, choice["finish_reason"])
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return [b"data: " + _json_bytes(chunk) + b"\n\n" for chunk in chunks] + [b"data: [DONE]\n\n"]


def _validate_request(request: Any, streaming: bool = False) -> str | None:
    if not isinstance(request, dict):
        return "the request body must be a JSON object"
    if request.get("stream") and not streaming:
        return "streaming ('stream': true) is not supported by the mock server; send a non-streaming request"
    if not isinstance(request.get("model"), str) or not request["model"]:
        return "'model' must be a non-empty string"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"messages[{i}] must be an object with a string 'role'"
    n = request.get("n", 1)
    if n is not None and (not isinstance(n, int) or not 1 <= n <= 16):
        return "'n' must be an integer between 1 and 16"
    return None


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError(f"malformed request line: {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"malformed header line: {line[:100]!r}")
            headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], parts[2], headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        size_total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # end of (absent) trailers
                return b"".join(chunks)
            size_total += size
            if size_total > _MAX_BODY_BYTES:
                raise ValueError("request body too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = headers.get("content-length")
    if not length:
        return b""
    if not length.isdigit() or int(length) > _MAX_BODY_BYTES:
        raise ValueError(f"bad content-length: {length!r}")
    return await reader.readexactly(int(length))


class MockServerProcess:
    """Run the mock server as a separate Python process (benchmarks); same control methods.

    Scripting and faults travel over HTTP (``/script``, ``/faults``); responders cannot, since
    they are Python callables.
    """

    def __init__(
        self,
        *,
        latency_ms: float = 0.0,
        latency_jitter_ms: float = 0.0,
        faults: FaultConfig | None = None,
        record_requests: int = 0,
        capacity: int | None = None,
        streaming: bool = False,
        python: str = sys.executable,
    ) -> None:
        self._args = [
            python, "-m", "commitbench.mockserver", "--port", "0",
            "--latency-ms", str(latency_ms), "--latency-jitter-ms", str(latency_jitter_ms),
            "--record-requests", str(record_requests),
        ]
        if capacity is not None:
            self._args += ["--capacity", str(capacity)]
        if streaming:
            self._args.append("--streaming")
        self._faults = faults
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self, timeout_s: float = 20.0) -> MockServerProcess:
        self._proc = subprocess.Popen(
            self._args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            preexec_fn=die_with_parent(),  # the server ends with this process, however it ends
        )
        deadline = time.monotonic() + timeout_s
        assert self._proc.stdout is not None
        line = ""
        while time.monotonic() < deadline:
            line = self._proc.stdout.readline()
            if line.startswith("listening on "):
                self.base_url = line.split("listening on ", 1)[1].strip()
                break
            if not line and self._proc.poll() is not None:
                break
        if not self.base_url:
            err = self._proc.stderr.read() if self._proc.stderr and self._proc.poll() is not None else ""
            self.stop()
            raise RuntimeError(f"mock server process did not start; last output {line!r}; stderr: {err[-2000:]}")
        if self._faults is not None:
            self.set_faults(self._faults)
        return self

    def _post(self, path: str, payload: Any) -> Any:
        root = self.base_url.rsplit("/v1", 1)[0]
        request = urllib.request.Request(
            root + path, data=_json_bytes(payload), headers={"content-type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stats(self) -> ServerStats:
        root = self.base_url.rsplit("/v1", 1)[0]
        with urllib.request.urlopen(root + "/stats", timeout=10) as response:
            return ServerStats.model_validate_json(response.read())

    def script(self, *replies: ReplySpec | str | dict[str, Any]) -> None:
        specs = [_coerce_reply(r) for r in replies]
        self._post("/script", [s.model_dump(mode="json", exclude_none=True) for s in specs if s is not None])

    def set_faults(self, config: FaultConfig | None = None, **fields: Any) -> None:
        config = config or FaultConfig(**fields)
        self._post("/faults", config.model_dump(mode="json"))

    def reset(self) -> None:
        self._post("/reset", {})

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5.0)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()
        self._proc = None

    def __enter__(self) -> MockServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _parse_fault_rates(items: Iterable[str]) -> dict[FaultKind, float]:
    rates: dict[FaultKind, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            kind = FaultKind(name.strip())
            rates[kind] = float(value) if sep else 0.0
        except ValueError as exc:
            known = ", ".join(k.value for k in FaultKind)
            raise SystemExit(f"bad --fault {item!r}: expected KIND=RATE with KIND one of {known}") from exc
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m commitbench.mockserver", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--latency-jitter-ms", type=float, default=0.0)
    parser.add_argument("--fault", action="append", default=[], metavar="KIND=RATE", help="per-request fault rate")
    parser.add_argument("--retry-after-s", type=float, default=0.0)
    parser.add_argument("--timeout-hold-s", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", action="append", default=[], help="model id listed by /v1/models")
    parser.add_argument("--record-requests", type=int, default=1000, help="how many recent requests /requests keeps")
    parser.add_argument("--capacity", type=int, default=None,
                        help="serve at most this many chat requests at once, each taking the latency "
                        "(default: no limit)")
    parser.add_argument("--streaming", action="store_true", help="answer 'stream': true with server-sent events")
    args = parser.parse_args(argv)
    faults = FaultConfig(
        seed=args.seed,
        rates=_parse_fault_rates(args.fault),
        retry_after_s=args.retry_after_s,
        timeout_hold_s=args.timeout_hold_s,
    )
    server = MockServer(
        latency_ms=args.latency_ms,
        latency_jitter_ms=args.latency_jitter_ms,
        faults=faults,
        models=args.model or [DEFAULT_MODEL],
        record_requests=args.record_requests,
        capacity=args.capacity,
        streaming=args.streaming,
    )

    async def serve() -> None:
        await server.start_serving(args.host, args.port)
        print(f"listening on {server.base_url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop_serving()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
