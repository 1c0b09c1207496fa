"""The model client: cache, one deadline per attempt, bounded bodies, retries, replicas and secrets scrubbed."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import openai
import orjson

from commitbench import jsoncodec
from commitbench.bounds import ResponseTooLarge
from commitbench.cache import CacheMode, CallBroker, CallCache, cache_key
from commitbench.callerrors import (
    RETRYABLE_ERRORS,
    ModelEndpointError,
    ModelError,
    ModelErrorKind,
    is_context_length,
)
from commitbench.httpread import bound_response_bodies, read_body
from commitbench.llm.limiter import AdaptiveLimiter
from commitbench.llm.replicas import Replica, ReplicaPool
from commitbench.llm.response import (
    ModelResponse,
    Usage,
    parse_cache_entry,
    parse_completion,
    parse_tool_arguments,
    stored_seconds,
)
from commitbench.llm.settings import SESSION_HEADER, ModelSettings, RetryPolicy, backoff_delay
from commitbench.llm.stats import ClientStats
from commitbench.sdkhttp import http
from commitbench.secrets import Secrets

__all__ = ["MAX_ERROR_CHARS", "ModelClient", "default_http_client"]


# What of a server's error text a call error keeps (an error body may be as large as max_response_bytes).
MAX_ERROR_CHARS = 2000
# Keys of replaced cache entries a client's counters name (the count is always whole).
MAX_REPLACED_KEYS = 5


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


def _retry_after(response: http.Response | None) -> float | None:
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
        http_client: http.AsyncClient | None = None,
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
        # A client made here has the SDK's default pool size (default_http_client); the runner gives
        # each client a pool as large as its share of the requests in flight (cellplayer.http_client_for).
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
                client_for_replica = default_http_client()
            if replica.credentials is not None:
                client_for_replica.auth = http.BasicAuth(*replica.credentials)
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
        self._cache_replaced = 0
        self._replaced_keys: list[str] = []
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
            replace = False
            if self.cache is not None:
                stored = self.cache.get(key, model)  # may raise CacheMiss in replay-only mode
                if stored is not None:
                    cached = self._from_cache(stored, key, started)
                    if cached.error is None or self.cache.mode is CacheMode.REPLAY_ONLY:
                        return self._counted(cached)
                    # Not a recorded completion (a damaged or foreign entry): made again, and written over it.
                    replace = True
                    self._note_replaced(key)
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
                response = await self._lead(messages, tools, options, sample_index, session_id, key, started,
                                            replace)
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
            cache_replaced=self._cache_replaced,
            cache_replaced_keys=list(self._replaced_keys),
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
        """The response a cache entry records, read as a server reply is (:func:`parse_cache_entry`); an entry that
        is no recorded completion is an ``invalid_response`` error of the call that names its key."""
        fields, error = parse_cache_entry(
            stored, fallback_model=self.settings.model, max_argument_bytes=self.settings.max_argument_bytes
        )
        if error is not None:
            return ModelResponse(
                model=self.settings.model,
                latency_s=time.perf_counter() - started,
                attempts=0,
                cache_key=key,
                error=error.model_copy(update={"message": f"cache entry {key} is unusable: {error.message}"}),
            )
        return ModelResponse(
            **fields,
            latency_s=time.perf_counter() - started,
            model_time_s=stored_seconds(stored.get("latency_s")),
            attempts=0,
            cache_hit=True,
            cache_key=key,
        )

    def _counted(self, cached: ModelResponse) -> ModelResponse:
        """A response read from the cache, counted as a hit (or, for an unusable entry, as an error)."""
        if cached.error is None:
            self._cache_hits += 1
        else:
            self._errors[cached.error.kind.value] += 1
        return cached

    def _note_replaced(self, key: str) -> None:
        self._cache_replaced += 1
        if len(self._replaced_keys) < MAX_REPLACED_KEYS:
            self._replaced_keys.append(key)

    async def _lead(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        options: dict[str, Any],
        sample_index: int,
        session_id: str | None,
        key: str,
        started: float,
        replace: bool = False,
    ) -> ModelResponse:
        """The call of a key no other call of this client is making: claimed from the broker (when the
        cache is shared), else made, and recorded in the cache (``replace``: over an unusable entry)."""
        model = self.settings.model
        assert self.cache is not None
        if self.broker is not None:
            shared = await self.broker.claim(key, model)  # may raise CacheMiss in replay-only mode
            if shared is not None:
                cached = self._from_cache(shared, key, started)
                if cached.error is None:
                    self.cache.put(key, model, shared, replace=replace)
                return self._counted(cached)
        recorded: dict[str, Any] | None = None
        try:
            response = await self._call_server(messages, tools, options, sample_index, session_id, key, started)
            if response.error is None:
                recorded = response.cache_payload()
                self.cache.put(key, model, recorded, replace=replace)
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
    ) -> tuple[dict[str, Any] | bytes, dict[str, str]]:
        """The JSON body (written: see :func:`_written`) and extra headers of a chat-completions request."""
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
        return _written(body), headers

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

    async def _attempt(self, body: dict[str, Any] | bytes, headers: dict[str, str], replica: Replica) -> _Attempt:
        """One HTTP attempt, with every secret of the client scrubbed from its outcome."""
        outcome = await self._attempt_once(body, headers, replica)
        if outcome.error is not None:
            message = self._secrets.scrub_message(outcome.error.message)
            outcome.error = outcome.error.model_copy(update={"message": message})
        if outcome.fields is not None and self._secrets:
            outcome.fields = _scrubbed_fields(outcome.fields, self._secrets, self.settings.max_argument_bytes)
        return outcome

    async def _attempt_once(
        self, body: dict[str, Any] | bytes, headers: dict[str, str], replica: Replica
    ) -> _Attempt:
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
                client = self._openai_by_replica[replica.index]
                if isinstance(body, bytes):  # JSON already written (_written): sent as it is
                    response = await client.post(
                        "/chat/completions", cast_to=http.Response, content=body, options={"headers": headers},
                        stream=True,
                    )
                else:
                    response = await client.post(
                        "/chat/completions", cast_to=http.Response, body=body, options={"headers": headers},
                        stream=True,
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
            broken = _broken_connection(exc)
            if broken is not None:
                return _Attempt(error=ModelError(kind=ModelErrorKind.CONNECTION, message=f"{exc} ({broken})"))
            return _Attempt(error=ModelError(kind=ModelErrorKind.TIMEOUT, message=str(exc)))
        except openai.APIConnectionError as exc:
            cause = f" ({type(exc.__cause__).__name__}: {exc.__cause__})" if exc.__cause__ else ""
            return _Attempt(error=ModelError(kind=ModelErrorKind.CONNECTION, message=f"{exc}{cause}"))
        except openai.APIStatusError as exc:
            return self._status_error(exc, replica.url)
        except http.TimeoutException as exc:  # a wait for a byte of the body ran out
            broken = _broken_connection(exc)
            if broken is not None:
                return _Attempt(error=ModelError(
                    kind=ModelErrorKind.CONNECTION, message=f"while reading the body: {broken}"
                ))
            return _Attempt(error=ModelError(kind=ModelErrorKind.TIMEOUT, message=f"{type(exc).__name__}: {exc}"))
        except http.HTTPError as exc:  # the connection broke while the body was read
            return _Attempt(error=ModelError(
                kind=ModelErrorKind.CONNECTION, message=f"while reading the body: {type(exc).__name__}: {exc}"
            ))
        try:
            payload = jsoncodec.loads(content)
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


def _written(body: dict[str, Any]) -> dict[str, Any] | bytes:
    """A request body as the JSON bytes to send, written by orjson.

    The SDK sends bytes as they are; a dict it copies and writes with ``json``, which took a tenth of
    the CPU of a call. A body orjson refuses (a lone surrogate, an integer beyond 64 bits) goes to the
    SDK as a dict, to be written as it always was; a non-finite number, which ``json`` writes as ``NaN``
    (no JSON at all), orjson writes as ``null``.
    """
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return body


def _broken_connection(exc: BaseException) -> str | None:
    """What broke, when an error reported as a timeout was a broken connection; None for a real timeout.

    The SDK's aiohttp transport reports every broken connection (a server that closes it before it
    answers, say) as a connect timeout; the aiohttp error it was raised from says what happened.
    """
    cause = exc.__cause__ or exc.__context__
    for _ in range(8):  # the chain is short: the SDK's error, httpx's, aiohttp's
        if cause is None:
            return None
        if type(cause).__module__.partition(".")[0] == "aiohttp":
            return None if isinstance(cause, TimeoutError) else f"{type(cause).__name__}: {cause}"
        cause = cause.__cause__ or cause.__context__
    return None


def default_http_client(limits: http.Limits | None = None) -> http.AsyncClient:
    """The HTTP client the ``openai`` SDK sends a model's calls through: the SDK's own, on aiohttp.

    The SDK's aiohttp transport (``openai.DefaultAioHttpClient``) costs about half the CPU per call of
    its default one (httpx's connection pool and streams), which was most of what a call cost the
    harness; requests, responses, hooks and errors stay the SDK's and httpx's types.
    """
    if limits is None:
        return openai.DefaultAioHttpClient()
    return openai.DefaultAioHttpClient(limits=limits)


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
        if raw != call.arguments_raw and not call.over_bound:  # a cut copy is no JSON: its reason stays
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
