"""The gateway's ASGI app (Starlette): the checked chat route, the ledger's read route, and a pass-through.

Routes:

* ``POST /v1/chat/completions`` (and ``/chat/completions``): forwarded to the upstream, then checked
  (:meth:`Gateway.chat`); streamed replies too (:meth:`Gateway.chat_stream`).
* ``GET /v1/commitments?user=U``: what the ledger says the deployment owes ``U`` (read-only; only with a
  token, :mod:`commitbench.gateway.operations`); ``GET /health`` and ``GET /metrics``: the gateway's own.
* the pass paths (models, completions, embeddings and ``--pass-path`` prefixes): passed to the upstream
  unchanged, method, path, query, headers and body, and its answer passed back as it comes; any other
  path: 404.

One ``aiohttp`` session talks to the upstream, with explicit timeouts (connect, read, pool) and a limit on
its connections (:mod:`commitbench.gateway.upstream`). Headers go upstream as the client sent them
(Authorization included) except hop-by-hop headers and the gateway's own ``x-commitbench-*`` headers; no
header is ever logged or stored.

Bounds and faults (each answer is OpenAI-style, ``{"error": {"message", "type", "code"}}``):

* a request body larger than ``max_request_bytes``, not UTF-8, not JSON, not an object, or nested deeper
  than ``max_depth`` levels: 400 naming the problem;
* an upstream error status: passed through with its status and body (and logged); an upstream attempt
  longer than ``upstream_timeout_s`` in all: 504; one that cannot be reached: 502; a reply larger than
  ``max_reply_bytes`` or (a 200) not a JSON object: 502 naming the problem;
* a check that raises, a detector that fails, a reply text longer than ``max_check_chars``: the reply goes
  out as the upstream sent it, marked ``check_error`` (and logged); a ledger or log write that fails is
  logged to stderr and never breaks a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from commitbench import jsoncodec
from commitbench.gateway.actions import NudgeBook, replace_text, rewrite_request, rewritten_text, with_nudge
from commitbench.gateway.bodies import RequestProblem, parse_request
from commitbench.gateway.catalog import Deployment, ToolCatalog
from commitbench.gateway.checks import check_choice, error_check
from commitbench.gateway.detectors import Detector, OfflineDetector
from commitbench.gateway.largework import LARGE_BYTES, LargeRead, LargeReader
from commitbench.gateway.logbook import GatewayLog, LoggedTurn, choice_record, now_text, pseudonym
from commitbench.gateway.operations import (
    METRICS_CONTENT_TYPE,
    CountRequests,
    GatewayMetrics,
    bearer_matches,
    passes,
)
from commitbench.gateway.outcome import LEDGER_SKIP, RequestOutcome
from commitbench.gateway.recording import LedgerRecorder, ledger_entries
from commitbench.gateway.streams import DONE, Assembler, EventSplitter, completion_events, event_data, verdict_event
from commitbench.gateway.turn import ReplyChoice, Turn, extract_turn, reply_choices, turn_digest
from commitbench.gateway.upstream import HOP_BY_HOP, UPSTREAM_ERRORS, ReplyTooLarge, Upstream
from commitbench.gateway.verdicts import ChoiceCheck, CountMode, Mode
from commitbench.llm import SESSION_HEADER, redact_credentials

VERDICT_HEADER = "x-commitbench-verdict"
USER_HEADER = "x-commitbench-user"
APPROVAL_HEADER = "x-commitbench-approval-pending"
# Replies longer than this are checked on a worker thread, so one long reply does not hold the others up.
THREAD_CHARS = 20_000


class GatewayConfig(BaseModel):
    """How the gateway runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    upstream: str = Field(description="Base URL of the OpenAI-compatible upstream (ends in /v1).")
    mode: Mode = Field(default=Mode.OBSERVE, description="observe, enforce or rewrite.")
    count: CountMode = Field(default=CountMode.MATCHING, description="Which calls back a claimed write.")
    upstream_timeout_s: float = Field(
        default=120.0, gt=0, description="Seconds one upstream attempt may take in all (connect, head and body).")
    pass_paths: tuple[str, ...] = Field(
        default=(), description="Path prefixes passed to the upstream unchecked besides the default ones.")
    require_user: bool = Field(
        default=False, description="Record a promise only when the request names its creditor (user, "
        "x-commitbench-user or x-session-id).")
    commitments_token: str | None = Field(
        default=None, repr=False, description="The bearer token /v1/commitments requires (null: the route is off).")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Seconds to connect to the upstream.")
    max_request_bytes: int = Field(default=16 << 20, gt=0, description="Largest request body accepted.")
    max_reply_bytes: int = Field(default=32 << 20, gt=0, description="Largest upstream reply read.")
    max_check_chars: int = Field(default=100_000, gt=0, description="Longest reply text the checks read.")
    max_depth: int = Field(default=64, gt=0, description="Deepest JSON nesting accepted in a request.")
    max_connections: int = Field(default=512, gt=0, description="Connections to the upstream, at most.")
    time_zone: str = Field(default="UTC", description="Zone of due times given without an offset.")


@dataclass
class Services:
    """What the gateway works with (built at the edge, by the command or a test)."""

    catalog: ToolCatalog
    detector: Detector = field(default_factory=OfflineDetector)
    recorder: LedgerRecorder | None = None
    log: GatewayLog | None = None
    nudges: NudgeBook = field(default_factory=NudgeBook)


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    """An OpenAI-style error."""
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}}, status)


def _large(request_data: Mapping[str, Any]) -> bool:
    """A request whose turn is read on a worker thread (so that reading it does not hold the loop up)."""
    tools, messages = request_data.get("tools"), request_data.get("messages")
    return (isinstance(tools, list) and len(tools) > 64) or (isinstance(messages, list) and len(messages) > 256)


class Gateway:
    """The request handlers and what they share."""

    def __init__(self, config: GatewayConfig, services: Services) -> None:
        self.config = config
        self.services = services
        self.zone = ZoneInfo(config.time_zone)
        self.metrics = GatewayMetrics()
        self.upstream = Upstream(config.upstream, connect_s=config.connect_timeout_s,
                                 read_s=config.upstream_timeout_s, max_connections=config.max_connections,
                                 max_reply_bytes=config.max_reply_bytes)
        self.large = LargeReader(services.catalog)

    # ------------------------------------------------------------------ lifecycle
    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            async with self.upstream:
                yield
        finally:
            await asyncio.to_thread(self.large.close)

    def app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
        routes = [
            Route("/v1/chat/completions", self.chat_route, methods=["POST"]),
            Route("/chat/completions", self.chat_route, methods=["POST"]),
            Route("/v1/commitments", self.commitments, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/metrics", self.metrics_route, methods=["GET"]),
            Route("/{path:path}", self.passthrough, methods=methods),
        ]
        return Starlette(routes=routes, lifespan=self.lifespan,
                         middleware=[Middleware(CountRequests, metrics=self.metrics)])

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def upstream_headers(request: Request, identity: bool) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in HOP_BY_HOP and not k.lower().startswith("x-commitbench-")}
        if identity:
            headers["accept-encoding"] = "identity"
        return headers

    async def read_body(self, request: Request) -> bytes:
        return b"".join(await self.read_chunks(request))

    async def read_chunks(self, request: Request) -> list[bytes]:
        """The request's body as the chunks it came in (a large body is never joined on the event loop)."""
        limit = self.config.max_request_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise RequestProblem(f"the request body is {int(declared):,} bytes, more than the limit of {limit:,}")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestProblem(f"the request body is more than the limit of {limit:,} bytes")
            chunks.append(chunk)
        return chunks

    def upstream_failure(self, exc: BaseException, context: _Context | None = None) -> Response:
        """A failed upstream call as the client's answer: 504 for a timeout, 502 for the rest (logged)."""
        status, message, kind = (502, str(exc), "upstream_error") if isinstance(exc, ReplyTooLarge) \
            else self.upstream.failure(exc)
        return self.failed(context, status, message, kind)

    def failed(self, context: _Context | None, status: int, message: str, kind: str,
               passed: Response | None = None) -> Response:
        """A chat request the upstream failed: counted, a log line with its status, and the client's answer
        (``passed``: the upstream's own error reply, passed on as it came)."""
        self.metrics.upstream_failed(status)
        if context is not None and self.services.log is not None:
            elapsed = (time.perf_counter() - context.started) * 1000
            try:
                self.services.log.write(LoggedTurn(
                    time=now_text(), turn=context.digest, session=pseudonym(context.session),
                    creditor=pseudonym(context.creditor), model=str(context.data.get("model") or "")[:200],
                    mode=self.config.mode.value, stream=context.data.get("stream") is True, status=status,
                    latency_ms={"upstream": round(elapsed, 3), "checks": 0.0, "rewrite": 0.0,
                                "total": round(elapsed, 3)}, choices=[], nudged=context.nudged,
                    error=f"upstream: {message}"[:1000]))
            except Exception as exc:  # a log that cannot be written never breaks a reply
                print(f"commitbench gateway: cannot write the log: {type(exc).__name__}: {exc}", file=sys.stderr)
        return passed if passed is not None else error_response(status, message, kind)

    # ------------------------------------------------------------------ checks
    def _read_turn(self, request_data: dict[str, Any], approval: bool) -> tuple[Turn, Deployment]:
        turn = extract_turn(request_data, approval)
        return turn, self.services.catalog.deployment(turn.offered)

    def _check_sync(self, turn: Turn, choice: ReplyChoice, deployment: Deployment) -> ChoiceCheck:
        detector = self.services.detector
        assert isinstance(detector, OfflineDetector)
        return check_choice(turn, choice, deployment, detector.detect_now(choice), self.config.count)

    async def check_one(self, turn: Turn, choice: ReplyChoice, deployment: Deployment) -> ChoiceCheck:
        """The checks of one choice; a too-long text, a failing detector or a raising check is check_error."""
        if len(choice.text) > self.config.max_check_chars:
            return error_check(choice.index, f"the reply is {len(choice.text):,} characters long, more than the "
                                             f"{self.config.max_check_chars:,} the checks read")
        if isinstance(self.services.detector, OfflineDetector):
            if len(choice.text) > THREAD_CHARS:
                return await asyncio.to_thread(self._check_sync, turn, choice, deployment)
            return self._check_sync(turn, choice, deployment)
        detected = await self.services.detector.detect(turn, choice)
        if len(choice.text) > THREAD_CHARS:
            return await asyncio.to_thread(check_choice, turn, choice, deployment, detected, self.config.count)
        return check_choice(turn, choice, deployment, detected, self.config.count)

    async def evaluate(
        self, turn: Turn | None, choices: list[ReplyChoice], deployment: Deployment | None
    ) -> tuple[list[ChoiceCheck], list[str]]:
        checks, errors = [], []
        for choice in choices:
            try:
                if turn is None or deployment is None:
                    raise RuntimeError("the request's turn could not be read")
                checks.append(await self.check_one(turn, choice, deployment))
            except Exception as exc:  # a check never breaks a reply
                reason = f"{type(exc).__name__}: {exc}"
                errors.append(reason)
                checks.append(error_check(choice.index, reason))
        return checks, errors

    async def process(
        self, request_data: dict[str, Any], completion: dict[str, Any], headers: dict[str, str],
        session: str | None, creditor: str | None, approval: bool, digest: str, prepared: LargeRead | None = None,
    ) -> RequestOutcome:
        """Check every choice, act by the mode (in place on ``completion``), record anchored promises.

        ``prepared``: the request's turn as the worker process read it (a large request, whose ``request_data``
        then holds only its small fields).
        """
        started = time.perf_counter()
        errors: list[str] = []
        turn: Turn | None = None
        deployment: Deployment | None = None
        try:
            if prepared is not None:
                turn, deployment = prepared.turn, prepared.deployment
                if prepared.turn_error is not None:
                    errors.append(prepared.turn_error)
            elif _large(request_data):
                turn, deployment = await asyncio.to_thread(self._read_turn, request_data, approval)
            else:
                turn, deployment = self._read_turn(request_data, approval)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        choices = reply_choices(completion)
        checks, check_errors = await self.evaluate(turn, choices, deployment)
        errors += check_errors
        checks_ms = (time.perf_counter() - started) * 1000
        actions: dict[int, str] = {}
        originals = {c.index: c.text for c in choices}
        rewrites: dict[int, ChoiceCheck] = {}
        final = {c.index: c for c in checks}
        changed = False
        rewrite_started = time.perf_counter()
        mode = self.config.mode
        for check, choice in zip(checks, choices, strict=True):
            if not check.flagged:
                continue
            actions[check.index] = "marked"
            if mode is Mode.ENFORCE and check.replacement is not None:
                replace_text(completion, check.index, check.replacement)
                actions[check.index], changed = "replaced", True
                if session and check.nudge:
                    self.services.nudges.leave(session, check.nudge)
            elif mode is Mode.REWRITE and turn is not None and deployment is not None:
                action, recheck = await self.rewrite(request_data, turn, choice, deployment, check, completion,
                                                     headers, session, errors)
                actions[check.index] = action
                changed = changed or action != "marked"
                if recheck is not None:
                    rewrites[check.index] = recheck
                    final[check.index] = recheck
        rewrite_ms = (time.perf_counter() - rewrite_started) * 1000 if mode is Mode.REWRITE else 0.0
        recorded = await self.record(final.values(), digest, creditor, str(request_data.get("model") or ""), errors)
        return RequestOutcome(checks=checks, actions=actions, originals=originals, rewrites=rewrites, recorded=recorded,
                       error="; ".join(errors)[:1000] or None, checks_ms=checks_ms, rewrite_ms=rewrite_ms,
                       changed=changed)

    async def rewrite(
        self, request_data: dict[str, Any], turn: Turn, choice: ReplyChoice, deployment: Deployment,
        check: ChoiceCheck, completion: dict[str, Any], headers: dict[str, str], session: str | None,
        errors: list[str],
    ) -> tuple[str, ChoiceCheck | None]:
        """Ask the upstream for a rewrite, check it, put the checked text in the completion."""
        body = rewrite_request(str(request_data.get("model") or ""), turn, choice, deployment)
        text: str | None = None
        try:
            response = await self.upstream.send("POST", self.upstream.url("/v1/chat/completions"),
                                                jsoncodec.dumps(body),
                                                {**headers, "content-type": "application/json"})
            raw = await self.upstream.read(response)
            if response.status == 200:
                text = rewritten_text(jsoncodec.loads(raw))
            else:
                errors.append(f"rewrite: the upstream answered {response.status}")
        except (*UPSTREAM_ERRORS, ValueError) as exc:
            errors.append(f"rewrite: {type(exc).__name__}: {redact_credentials(str(exc))[:200]}")
        if text is None:
            return self._fallback(check, completion, session), None
        rewritten = ReplyChoice(index=choice.index, text=text, calls=choice.calls)
        try:
            recheck = await self.check_one(turn, rewritten, deployment)
        except Exception as exc:
            errors.append(f"rewrite check: {type(exc).__name__}: {exc}")
            return self._fallback(check, completion, session), None
        if recheck.flagged:  # the rewrite is no better: never sent as it is
            fallback = recheck.replacement or check.replacement
            if fallback is not None:
                replace_text(completion, choice.index, fallback)
                if session and (recheck.nudge or check.nudge):
                    self.services.nudges.leave(session, recheck.nudge or check.nudge or "")
                return "rewritten_then_replaced", recheck
            return "rewritten_still_flagged", recheck
        replace_text(completion, choice.index, text)
        return "rewritten", recheck

    def _fallback(self, check: ChoiceCheck, completion: dict[str, Any], session: str | None) -> str:
        """A rewrite that failed: a false claim is still replaced (as in enforce); anything else stays marked."""
        if check.replacement is not None:
            replace_text(completion, check.index, check.replacement)
            if session and check.nudge:
                self.services.nudges.leave(session, check.nudge)
            return "rewrite_failed_replaced"
        return "rewrite_failed"

    async def record(
        self, checks: Iterable[ChoiceCheck], digest: str, creditor: str | None, debtor: str, errors: list[str]
    ) -> list[int]:
        recorder = self.services.recorder
        if recorder is None:
            return []
        if creditor is None and self.config.require_user and any(check.anchored for check in checks):
            errors.append(f"{LEDGER_SKIP}: the request names no user (--require-user)")
            return []
        now = datetime.now(UTC)
        entries = [entry for check in checks for entry in ledger_entries(
            check.anchored, digest=digest, choice=check.index, creditor=creditor, debtor=debtor, now=now,
            zone=self.zone)]
        try:
            return await recorder.record(entries)
        except Exception as exc:  # the ledger never breaks a reply
            errors.append(f"ledger: {type(exc).__name__}: {exc}")
            return []

    def log(
        self, outcome: RequestOutcome, request_data: dict[str, Any], completion: Mapping[str, Any], *, digest: str,
        session: str | None, creditor: str | None, stream: bool, status: int, upstream_ms: float,
        total_ms: float, nudged: bool, prepared: LargeRead | None = None,
    ) -> None:
        log = self.services.log
        self.metrics.checked([label.value for c in outcome.checks for label in c.labels],
                             [outcome.actions.get(c.index, "none") for c in outcome.checks],
                             outcome.checks_ms / 1000, (total_ms - upstream_ms) / 1000)
        if outcome.error:
            print(f"commitbench gateway: check error on turn {digest[:12]}: {outcome.error}", file=sys.stderr)
        if log is None:
            return
        sent = {c.index: c.text for c in reply_choices(completion)}
        try:
            record = LoggedTurn(
                time=now_text(), turn=digest, session=pseudonym(session), creditor=pseudonym(creditor),
                model=str(request_data.get("model") or "")[:200], mode=self.config.mode.value, stream=stream,
                status=status,
                latency_ms={"upstream": round(upstream_ms, 3), "checks": round(outcome.checks_ms, 3),
                            "rewrite": round(outcome.rewrite_ms, 3), "total": round(total_ms, 3)},
                choices=[choice_record(c, outcome.actions.get(c.index, "none"), outcome.originals.get(c.index),
                                       sent.get(c.index), log.text) for c in outcome.checks],
                recorded=outcome.recorded, nudged=nudged, error=outcome.error,
                user=_user_message(request_data, prepared) if log.text else None,
            )
            log.write(record)
        except Exception as exc:  # a log that cannot be written never breaks a reply
            print(f"commitbench gateway: cannot write the log: {type(exc).__name__}: {exc}", file=sys.stderr)

    # ------------------------------------------------------------------ routes
    async def chat_route(self, request: Request) -> Response:
        started = time.perf_counter()
        approval = request.headers.get(APPROVAL_HEADER, "").strip().lower() in ("1", "true", "yes")
        creditor_header = request.headers.get(USER_HEADER) or request.headers.get(SESSION_HEADER) or None
        prepared: LargeRead | None = None
        body: bytes | list[bytes]
        try:
            chunks = await self.read_chunks(request)
            if sum(len(chunk) for chunk in chunks) > LARGE_BYTES:  # read in the worker process: the loop serves
                prepared, body = await self.large.read(chunks, self.config.max_depth, creditor_header, approval)
                data = prepared.data
            else:
                body = b"".join(chunks)
                data = parse_request(body, self.config.max_depth)
        except RequestProblem as exc:
            return error_response(400, str(exc), "invalid_request_error")
        except BrokenProcessPool:
            return error_response(500, "the worker process that reads large requests ended twice while reading this "
                                  "one", "server_error")
        except OSError as exc:  # the spool file for the worker could not be written (a full disk)
            return error_response(500, f"the large request could not be handed to the worker process that reads it "
                                  f"({exc.strerror or type(exc).__name__})", "server_error")
        user = data.get("user") if isinstance(data.get("user"), str) and data.get("user") else None
        session = user or request.headers.get(SESSION_HEADER) or None  # Starlette's headers ignore case
        creditor = user or creditor_header
        nudged = False
        if self.config.mode is not Mode.OBSERVE and session:
            nudge = self.services.nudges.take(session)
            if nudge is not None:
                if prepared is not None:
                    prepared, body = await self.large.read(chunks, self.config.max_depth, creditor_header, approval,
                                                           nudge)
                    data = prepared.data
                else:
                    data = with_nudge(data, nudge)
                    body = jsoncodec.dumps(data)
                nudged = True
        headers = self.upstream_headers(request, identity=True)
        digest = prepared.digest if prepared is not None else turn_digest(data, creditor or "")
        context = _Context(data=data, body=body, headers=headers, session=session, creditor=creditor,
                           approval=approval, nudged=nudged, started=started, digest=digest, prepared=prepared)
        if data.get("stream") is True:
            return await self.chat_stream(context)
        return await self.chat(context)

    async def chat(self, context: _Context) -> Response:
        try:
            response = await self.upstream.send("POST", self.upstream.url("/v1/chat/completions"), context.body,
                                                context.headers)
            raw = await self.upstream.read(response)
        except (*UPSTREAM_ERRORS, ReplyTooLarge) as exc:
            return self.upstream_failure(exc, context)
        upstream_ms = (time.perf_counter() - context.started) * 1000
        if response.status != 200:
            return self.failed(context, response.status, f"the upstream answered {response.status}", "upstream_error",
                               Response(raw, response.status, headers=self.upstream.reply_headers(response)))
        try:
            completion = jsoncodec.loads(raw)
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            return self.failed(context, 502, f"the upstream's reply is not JSON ({reason})", "upstream_error")
        if not isinstance(completion, dict):
            return self.failed(context, 502, "the upstream's reply is not a JSON object", "upstream_error")
        outcome = await self.process(context.data, completion, context.headers, context.session, context.creditor,
                                     context.approval, context.digest, context.prepared)
        completion["commitbench"] = outcome.report(self.config.mode, context.digest, self.services.detector.name)
        headers = {k: v for k, v in self.upstream.reply_headers(response).items()
                   if k.lower() != "content-encoding"}
        headers[VERDICT_HEADER] = outcome.verdict()
        content = jsoncodec.dumps(completion)
        total_ms = (time.perf_counter() - context.started) * 1000
        self.log(outcome, context.data, completion, digest=context.digest, session=context.session,
                 creditor=context.creditor, stream=False, status=response.status, upstream_ms=upstream_ms,
                 total_ms=total_ms, nudged=context.nudged, prepared=context.prepared)
        return Response(content, 200, headers=headers, media_type="application/json")

    async def chat_stream(self, context: _Context) -> Response:
        try:
            response = await self.upstream.send("POST", self.upstream.url("/v1/chat/completions"), context.body,
                                                context.headers)
            raw = await self.upstream.read(response) if response.status != 200 else b""
        except (*UPSTREAM_ERRORS, ReplyTooLarge) as exc:
            return self.upstream_failure(exc, context)
        if response.status != 200:
            return self.failed(context, response.status, f"the upstream answered {response.status}", "upstream_error",
                               Response(raw, response.status, headers=self.upstream.reply_headers(response)))
        headers = {k: v for k, v in self.upstream.reply_headers(response).items()
                   if k.lower() not in ("content-encoding", "content-type")}
        if self.config.mode is Mode.OBSERVE:
            return StreamingResponse(self.observe_events(context, response), 200, headers=headers,
                                     media_type="text/event-stream")
        return await self.held_stream(context, response, headers)

    async def observe_events(self, context: _Context, response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        """Pass every event on as it comes; the verdicts go in a last event before ``[DONE]``."""
        splitter = EventSplitter()
        assembler = Assembler(self.config.max_check_chars)
        done = False
        broken: str | None = None
        try:
            async for data in self.upstream.chunks(response):
                for event in splitter.feed(data):
                    payload = event_data(event)
                    if payload is not None and payload.strip() == "[DONE]":
                        done = True
                        continue
                    if payload:
                        with contextlib.suppress(ValueError, RecursionError):
                            assembler.feed(jsoncodec.loads(payload))
                    yield event
            rest = splitter.rest()
            if rest:
                yield rest
        except UPSTREAM_ERRORS as exc:
            broken = f"the upstream's stream broke off: {type(exc).__name__}"
        finally:
            response.release()
        upstream_ms = (time.perf_counter() - context.started) * 1000
        completion = assembler.completion()
        outcome = await self.stream_outcome(context, completion, assembler, broken)
        yield verdict_event(completion, outcome.report(self.config.mode, context.digest, self.services.detector.name))
        if done:
            yield DONE
        self.log(outcome, context.data, completion, digest=context.digest, session=context.session,
                 creditor=context.creditor, stream=True, status=200, upstream_ms=upstream_ms,
                 total_ms=(time.perf_counter() - context.started) * 1000, nudged=context.nudged,
                 prepared=context.prepared)

    async def stream_outcome(
        self, context: _Context, completion: dict[str, Any], assembler: Assembler, broken: str | None
    ) -> RequestOutcome:
        if assembler.overflow or broken:
            reason = broken or (f"the streamed reply is longer than the {self.config.max_check_chars:,} "
                                "characters the checks read")
            checks = [error_check(c.index, reason) for c in reply_choices(completion)] or [error_check(0, reason)]
            return RequestOutcome(checks=checks, actions={}, originals={}, rewrites={}, recorded=[], error=reason,
                           checks_ms=0.0, rewrite_ms=0.0, changed=False)
        return await self.process(context.data, completion, context.headers, context.session, context.creditor,
                                  context.approval, context.digest, context.prepared)

    async def held_stream(
        self, context: _Context, response: aiohttp.ClientResponse, headers: dict[str, str]
    ) -> Response:
        """Enforce and rewrite: read the whole stream, check it, then send it (changed or as it came)."""
        splitter = EventSplitter()
        assembler = Assembler(self.config.max_check_chars)
        events: list[bytes] = []
        size = chunks = 0
        done = False
        try:
            async for data in self.upstream.chunks(response):
                size += len(data)
                if size > self.config.max_reply_bytes:
                    raise ReplyTooLarge(self.config.max_reply_bytes)
                for event in splitter.feed(data):
                    payload = event_data(event)
                    if payload is not None and payload.strip() == "[DONE]":
                        done = True
                        continue
                    if payload:
                        with contextlib.suppress(ValueError, RecursionError):
                            chunk = jsoncodec.loads(payload)
                            chunks += isinstance(chunk, dict)
                            assembler.feed(chunk)
                    events.append(event)
            rest = splitter.rest()
            if rest:
                events.append(rest)
        except (*UPSTREAM_ERRORS, ReplyTooLarge) as exc:
            return self.upstream_failure(exc, context)
        finally:
            response.release()
        if not chunks:  # nothing a completion is made of: never sent on as if it had passed
            return self.failed(context, 502, "the upstream's streamed reply holds no JSON chunk", "upstream_error")
        upstream_ms = (time.perf_counter() - context.started) * 1000
        completion = assembler.completion()
        outcome = await self.stream_outcome(context, completion, assembler, None)
        report = outcome.report(self.config.mode, context.digest, self.services.detector.name)
        body = completion_events(completion) if outcome.changed else events
        body = [*body, verdict_event(completion, report)] + ([DONE] if done else [])
        headers[VERDICT_HEADER] = outcome.verdict()
        self.log(outcome, context.data, completion, digest=context.digest, session=context.session,
                 creditor=context.creditor, stream=True, status=200, upstream_ms=upstream_ms,
                 total_ms=(time.perf_counter() - context.started) * 1000, nudged=context.nudged,
                 prepared=context.prepared)

        async def send() -> AsyncIterator[bytes]:
            for event in body:
                yield event

        return StreamingResponse(send(), 200, headers=headers, media_type="text/event-stream")

    async def commitments(self, request: Request) -> Response:
        token = self.config.commitments_token
        if token is None:
            return error_response(404, "the ledger's route is off (start the gateway with --commitments-token)",
                                  "not_found_error")
        if not bearer_matches(request.headers.get("authorization"), token):
            return error_response(401, "the ledger's route needs 'Authorization: Bearer TOKEN'", "authentication_error")
        user = request.query_params.get("user", "")
        if not user.strip():
            return error_response(400, "give the creditor: /v1/commitments?user=NAME", "invalid_request_error")
        if self.services.recorder is None:
            return error_response(404, "this gateway keeps no ledger (start it with --ledger DB)", "not_found_error")
        try:
            items = await self.services.recorder.due(user)
        except Exception as exc:
            return error_response(500, f"the ledger cannot be read ({type(exc).__name__}: {exc})", "server_error")
        return JSONResponse({"object": "list", "user": user, "data": items})

    async def health(self, request: Request) -> Response:
        """The gateway's own health: it serves, and whether the upstream answers (503 when it does not)."""
        try:
            response = await asyncio.wait_for(self.upstream.send(
                "GET", self.upstream.url("/v1/models"), b"", self.upstream_headers(request, identity=False)), 5.0)
            status: int | None = response.status
            response.release()
            problem = None
        except (TimeoutError, *UPSTREAM_ERRORS) as exc:
            status, problem = None, self.upstream.failure(exc)[1]
        return JSONResponse({"status": "ok" if problem is None else "upstream_unreachable",
                             "upstream": {"reachable": problem is None, "status": status, "error": problem}},
                            200 if problem is None else 503)

    async def metrics_route(self, request: Request) -> Response:
        return Response(self.metrics.text(), 200, media_type=METRICS_CONTENT_TYPE)

    async def passthrough(self, request: Request) -> Response:
        path = request.url.path
        if not passes(path, self.config.pass_paths):
            return error_response(404, f"{path[:200]} is not served by this gateway: it serves /v1/chat/completions "
                                  "(checked), /v1/models, /v1/completions and /v1/embeddings, and the prefixes given "
                                  "with --pass-path", "not_found_error")
        try:
            body = await self.read_body(request)
        except RequestProblem as exc:
            return error_response(400, str(exc), "invalid_request_error")
        url = self.upstream.url(request.url.path, request.url.query)
        try:
            response = await self.upstream.send(request.method, url, body,
                                                self.upstream_headers(request, identity=False))
        except UPSTREAM_ERRORS as exc:
            return self.upstream_failure(exc)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in self.upstream.chunks(response):
                    yield chunk
            except UPSTREAM_ERRORS:
                return
            finally:
                response.release()

        async def release() -> None:  # the client went away before the reply was relayed
            response.release()

        return StreamingResponse(relay(), response.status, headers=self.upstream.reply_headers(response),
                                 background=BackgroundTask(release))


@dataclass
class _Context:
    data: dict[str, Any]
    body: bytes | list[bytes]  # a large body: the chunks it came in
    headers: dict[str, str]
    session: str | None
    creditor: str | None
    approval: bool
    nudged: bool
    started: float
    digest: str
    prepared: LargeRead | None = None  # a large request as the worker process read it (data: its small fields)


def _user_message(request_data: Mapping[str, Any], prepared: LargeRead | None) -> str:
    """The last user message of the request (of its turn as the worker read it, for a large request)."""
    if prepared is not None:
        return prepared.turn.user_message if prepared.turn is not None else ""
    return extract_turn(request_data).user_message
