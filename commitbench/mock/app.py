"""The mock server's HTTP side: an aiohttp.web application over :class:`ScriptedModel`.

aiohttp parses the requests (keep-alive, ``Content-Length`` or chunked bodies, bounded by
:data:`MAX_BODY_BYTES` and :data:`MAX_HEADER_FIELD_BYTES`) and writes the responses, chunked for the
streamed ones; the application only routes and carries out the scripted model's answers. Two faults
need the socket itself, which aiohttp gives through the request's transport: a *drop* closes the
connection where the client waits for a status line, and a *hold* watches the transport to end as soon
as the client gives up (see :func:`_hold` and :func:`_close`).

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

(``/chat/completions`` and ``/models`` answer too.) Every error, an unknown route included, has an
OpenAI-style JSON body.

Measured against the hand-written HTTP/1.1 server it replaced
----------------------------------------------------------------
The bare loop and the runner of ``benchmarks/side_by_side.py`` (then ``harness_overhead.py``; 3,000 bare
calls, 400 standing episodes through the runner), each server in its own process (``commitbench
serve-mock``, here on uvloop), the two servers interleaved at every setting, on the 2-core machine under
a load average of 2.0 to 2.3 from other work; CPU is per call for the client, per chat request for the
mock::

    mock          latency conc | bare/s cpu ms | runner/s cpu ms | mock cpu ms/request
    hand-written      0ms   64 |    375   2.46 |      435   2.06 | 0.23
    aiohttp           0ms   64 |    318   2.85 |      345   2.49 | 0.37
    hand-written      0ms  256 |    197   4.77 |      335   2.74 | 0.27
    aiohttp           0ms  256 |    232   3.97 |      285   3.03 | 0.43
    hand-written     50ms   64 |    292   3.05 |      297   2.91 | 0.43
    aiohttp          50ms   64 |    287   3.04 |      272   3.01 | 0.58
    hand-written     50ms  256 |    185   5.01 |      287   3.00 | 0.44
    aiohttp          50ms  256 |    172   5.26 |      281   2.87 | 0.65

aiohttp spends 0.15 to 0.2 ms more CPU per request than the hand-written parser did, and still four to
seven times less than the client spends per call: the mock keeps at most a fifth of a core busy (0.12 to
0.18) while the client process keeps 0.8 to 0.9 of one busy, so the harness, not the mock, is what a run
against it measures. The rates move by a fifth or more from run to run under that load, both servers
alike (three more such runs, two without uvloop, agree). uvloop takes some 5 to 10% off the mock's CPU;
the tests' in-thread server runs on asyncio's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Sequence

from aiohttp import web
from aiohttp.typedefs import Handler

from commitbench.mock.behaviour import (
    Answer,
    DropAnswer,
    HoldAnswer,
    JsonAnswer,
    ScriptedModel,
    StreamAnswer,
    error_answer,
)
from commitbench.mock.cli import ServeOptions
from commitbench.mock.replies import json_bytes
from commitbench.mock.specs import DEFAULT_MODEL, FaultConfig

__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_FIELD_BYTES", "MockServer", "build_server", "serve"]

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body read (a larger one gets a 413)."""
MAX_HEADER_FIELD_BYTES = 64 * 1024
"""The longest request line and header field (aiohttp also reads at most 128 header fields)."""
_HOLD_POLL_S = 0.05
# How long stopping waits for the requests in flight (twice: aiohttp waits, cancels, waits again); a hold ends
# at once, but a request may be sleeping through a scripted latency of minutes.
_SHUTDOWN_TIMEOUT_S = 0.25


class MockServer(ScriptedModel):
    """A scripted OpenAI-compatible server on 127.0.0.1; see :mod:`commitbench.mock` for behaviour.

    Run it from a daemon thread with its own event loop (``with MockServer() as server: ...``, or
    :meth:`start` and :meth:`stop`), or on a running loop (:meth:`start_serving`, :meth:`stop_serving`).
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
        super().__init__(
            latency_ms=latency_ms, latency_jitter_ms=latency_jitter_ms, faults=faults, models=models,
            record_requests=record_requests, capacity=capacity, streaming=streaming,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        self._host = "127.0.0.1"

    # ----------------------------------------------------------------- serving
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the value for ``AsyncOpenAI(base_url=...)``."""
        if self._port is None:
            raise RuntimeError("the mock server is not running")
        return f"http://{self._host}:{self._port}/v1"

    @property
    def port(self) -> int:
        """The port it listens on."""
        if self._port is None:
            raise RuntimeError("the mock server is not running")
        return self._port

    async def start_serving(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on the running event loop (port 0: a free port, then in :attr:`port`)."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        runner = web.AppRunner(
            self.application(),
            access_log=None,
            shutdown_timeout=_SHUTDOWN_TIMEOUT_S,
            max_line_size=MAX_HEADER_FIELD_BYTES,
            max_field_size=MAX_HEADER_FIELD_BYTES,
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port, backlog=1024).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._host = host
        self._port = int(runner.addresses[0][1])

    async def stop_serving(self) -> None:
        """Stop listening and close every open connection."""
        runner, self._runner = self._runner, None
        if self._stopping is not None:
            self._stopping.set()  # ends the holds
        if runner is not None:
            await runner.cleanup()

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

        self._thread = threading.Thread(target=run, name="commitbench-mock", daemon=True)
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

    # ----------------------------------------------------------------- the application
    def application(self) -> web.Application:
        """The aiohttp application: the routes of the module docstring, every error as JSON."""

        @web.middleware
        async def count_and_explain(request: web.Request, handler: Handler) -> web.StreamResponse:
            self.count_request()
            try:
                return await handler(request)
            except web.HTTPException as exc:
                if exc.status < 400:
                    raise
                return _respond_json(_error_for(request, exc))
            except ConnectionError:
                # The client left before its body was read: nothing to answer, and nothing worth the error
                # aiohttp would log for it. What is returned here is never sent (the connection is gone).
                return web.Response(status=200)

        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[count_and_explain])
        for path in ("/v1/chat/completions", "/chat/completions"):
            app.router.add_post(path, self._chat_route)
        for path in ("/v1/models", "/models"):
            app.router.add_get(path, self._models_route)
        app.router.add_get("/stats", self._stats_route)
        app.router.add_get("/requests", self._requests_route)
        app.router.add_post("/reset", self._reset_route)
        app.router.add_post("/script", self._script_route)
        app.router.add_post("/faults", self._faults_route)
        return app

    async def _chat_route(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        answer = await self.chat_completion(request.path, headers, body)
        if isinstance(answer, HoldAnswer):
            assert self._stopping is not None
            await _hold(request, answer.seconds, self._stopping)
        return await _carry_out(request, answer)

    async def _models_route(self, request: web.Request) -> web.StreamResponse:
        created = int(time.time())
        data = [{"id": m, "object": "model", "created": created, "owned_by": "commitbench"} for m in self.models]
        return _respond_json(JsonAnswer(200, json_bytes({"object": "list", "data": data})))

    async def _stats_route(self, request: web.Request) -> web.StreamResponse:
        return _respond_json(JsonAnswer(200, self.stats().model_dump_json().encode()))

    async def _requests_route(self, request: web.Request) -> web.StreamResponse:
        return _respond_json(JsonAnswer(200, json_bytes(self.requests())))

    async def _reset_route(self, request: web.Request) -> web.StreamResponse:
        self.reset()
        return _respond_json(JsonAnswer(200, b'{"reset":true}'))

    async def _script_route(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        try:
            items = json.loads(body or b"[]")
            if not isinstance(items, list):
                raise ValueError("expected a JSON list of reply specs")
            self.script(*items)
        except (ValueError, TypeError) as exc:
            return _respond_json(error_answer(400, f"bad script: {exc}", "invalid_request_error"))
        return _respond_json(JsonAnswer(200, json_bytes({"queued": self.stats().queued_replies})))

    async def _faults_route(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        try:
            self.set_faults(FaultConfig.model_validate_json(body or b"{}"))
        except ValueError as exc:
            return _respond_json(error_answer(400, f"bad fault config: {exc}", "invalid_request_error"))
        return _respond_json(JsonAnswer(200, b'{"ok":true}'))


def build_server(options: ServeOptions) -> MockServer:
    """The server ``options`` describe, not yet listening."""
    return MockServer(
        latency_ms=options.latency_ms, latency_jitter_ms=options.latency_jitter_ms, faults=options.faults,
        models=options.models, record_requests=options.record_requests, capacity=options.capacity,
        streaming=options.streaming,
    )


def serve(options: ServeOptions, announce: Callable[[str], None]) -> None:
    """Serve in the foreground until Ctrl-C; ``announce`` gets ``listening on http://HOST:PORT/v1`` once
    connections are accepted. OSError when the address cannot be bound."""
    server = build_server(options)

    async def run() -> None:
        await server.start_serving(options.host, options.port)
        announce(f"listening on {server.base_url}")
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop_serving()

    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=_new_event_loop) as runner:
        runner.run(run())


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (the [dev] and [gateway] extras; not on Windows), else
    asyncio's. The mock's CPU goes largely to its sockets: uvloop's transports cost less per request."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _error_for(request: web.Request, exc: web.HTTPException) -> JsonAnswer:
    """aiohttp's own refusals (no route, wrong method, body too large) as OpenAI-style errors."""
    if exc.status == 404:
        return error_answer(404, f"no route for {request.method} {request.path}", "not_found_error")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return error_answer(405, f"use {allowed} for {request.path}", "invalid_request_error")
    if exc.status == 413:
        return error_answer(413, f"request body too large (at most {MAX_BODY_BYTES} bytes)", "invalid_request_error")
    return error_answer(exc.status, exc.reason, "invalid_request_error")


def _respond_json(answer: JsonAnswer) -> web.Response:
    return web.Response(status=answer.status, body=answer.body, content_type="application/json",
                        headers=answer.headers)


async def _carry_out(request: web.Request, answer: Answer) -> web.StreamResponse:
    """Put the scripted model's answer on the wire."""
    if isinstance(answer, JsonAnswer):
        return _respond_json(answer)
    if isinstance(answer, StreamAnswer):
        return await _stream(request, answer)
    assert isinstance(answer, HoldAnswer | DropAnswer)  # a hold has been waited out
    _close(request)
    # Never sent: the connection is closed, and aiohttp takes the failed write as a client that left.
    return web.Response(status=200)


async def _stream(request: web.Request, answer: StreamAnswer) -> web.StreamResponse:
    """Server-sent events in a chunked body, one write per event; a cut-off stream ends without its last
    chunk, the connection closed."""
    response = web.StreamResponse(
        status=200, headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
    )
    if not answer.complete:
        response.force_close()  # announced as 'connection: close'
    with contextlib.suppress(ConnectionError):  # the client left mid-stream
        await response.prepare(request)
        for event in answer.events:
            await response.write(event)
            if answer.delay_s:
                await asyncio.sleep(answer.delay_s)
        if answer.complete:
            await response.write_eof()
        else:
            _close(request)
    return response


async def _hold(request: web.Request, seconds: float, stopping: asyncio.Event) -> None:
    """Wait until the client leaves, ``seconds`` pass or the server stops.

    aiohttp tells a handler that its client left only by cancelling every handler on a disconnect
    (``handler_cancellation``), which would also stop counting the replies a client gave up on; so the
    hold watches the request's transport, which aiohttp drops when the connection is lost.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        transport = request.transport
        if transport is None or transport.is_closing() or stopping.is_set():
            return
        await asyncio.sleep(min(_HOLD_POLL_S, left))


def _close(request: web.Request) -> None:
    """End the connection without (the rest of) a response.

    aiohttp has no response that closes the connection before its status line or before the end of a
    chunked body, so this closes the request's transport, the library's access to the socket: what was
    written is still flushed, then the client reads EOF.
    """
    transport = request.transport
    if transport is not None:
        transport.close()
