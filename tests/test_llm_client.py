"""ModelClient against the real mock server: caching, retries, recorded errors, adaptive concurrency."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _raw_server import RawServer, json_answer, trickling

from commitbench.cache import CacheMiss, CallCache
from commitbench.llm import (
    AdaptiveLimiter,
    ModelClient,
    ModelEndpointError,
    ModelErrorKind,
    ModelResponse,
    ModelSettings,
    RetryPolicy,
    backoff_delay,
    parse_completion,
    parse_tool_arguments,
)
from commitbench.mock import FaultKind, MockServer, ReasoningField, ReplySpec, ToolCallSpec

USER = [{"role": "user", "content": "Book room A once the agenda is final."}]
FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.001, max_delay_s=0.01, seed=3)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_room",
            "description": "Book a meeting room.",
            "parameters": {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]},
        },
    }
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def one_call(
    settings: ModelSettings, *, cache: CallCache | None = None, retry: RetryPolicy = FAST_RETRY, **kwargs: Any
) -> tuple[ModelResponse, ModelClient]:
    async with ModelClient(settings, cache=cache, retry=retry) as client:
        response = await client.complete(kwargs.pop("messages", USER), **kwargs)
    return response, client


# ---------------------------------------------------------------- successful calls
def test_text_usage_and_latency(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.script(ReplySpec(text="Booked.", prompt_tokens=11, completion_tokens=2))
    response, client = run(one_call(mock_settings))
    assert response.ok and response.text == "Booked." and response.finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (11, 2)
    assert response.attempts == 1 and not response.cache_hit and response.latency_s > 0
    assert response.model == "mock-model"
    stats = client.stats()
    assert (stats.calls, stats.completed, stats.http_requests, stats.retries) == (1, 1, 1, 0)
    assert (stats.prompt_tokens, stats.completion_tokens) == (11, 2)
    assert stats.calls_per_s > 0


@pytest.mark.parametrize("field", [ReasoningField.REASONING, ReasoningField.REASONING_CONTENT])
def test_reasoning_is_kept_apart_from_the_reply(
    mock_server: MockServer, mock_settings: ModelSettings, field: ReasoningField
) -> None:
    mock_server.script(ReplySpec(text="I'll book it.", reasoning="The creditor asked.", reasoning_field=field))
    response, _ = run(one_call(mock_settings))
    assert response.text == "I'll book it."
    assert response.reasoning == "The creditor asked."
    assert response.usage.reasoning_tokens == 3


def test_tool_calls_are_parsed_and_malformed_arguments_recorded(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.script(
        ReplySpec(
            tool_calls=[
                ToolCallSpec(name="book_room", arguments={"room": "A"}, id="call_1"),
                ToolCallSpec(name="book_room", arguments='{"room": "B"'),
                ToolCallSpec(name="book_room", arguments='["A"]'),
            ]
        )
    )
    response, _ = run(one_call(mock_settings, tools=TOOLS))
    assert response.ok and response.finish_reason == "tool_calls"
    good, broken, not_object = response.tool_calls
    assert (good.id, good.name, good.arguments, good.parse_error) == ("call_1", "book_room", {"room": "A"}, None)
    assert broken.arguments is None and "not valid JSON" in (broken.parse_error or "")
    assert broken.arguments_raw == '{"room": "B"'
    assert not_object.arguments is None and "JSON object" in (not_object.parse_error or "")


def test_malformed_tool_args_fault_is_recorded_not_raised(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.set_faults(sequence=[FaultKind.MALFORMED_TOOL_ARGS])
    response, client = run(one_call(mock_settings, tools=TOOLS))
    assert response.ok and response.attempts == 1
    (call,) = response.tool_calls
    assert call.name == "book_room" and call.arguments is None and call.parse_error
    assert client.stats().errors == {}


def test_refusal_is_a_completion_not_an_error(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.set_faults(sequence=[FaultKind.REFUSAL])
    response, _ = run(one_call(mock_settings))
    assert response.ok and response.text is None and response.refusal


# ---------------------------------------------------------------- retries and recorded errors
@pytest.mark.parametrize(
    "fault",
    [
        FaultKind.HTTP_500,
        FaultKind.HTTP_429,
        FaultKind.TIMEOUT,
        FaultKind.DISCONNECT,
        FaultKind.TRUNCATED_BODY,
        FaultKind.EMPTY_CHOICES,
    ],
)
def test_each_transient_fault_is_retried(
    mock_server: MockServer, mock_settings: ModelSettings, fault: FaultKind
) -> None:
    mock_server.script("the reply after the fault")
    mock_server.set_faults(sequence=[fault, fault], timeout_hold_s=5.0)
    settings = mock_settings.model_copy(update={"timeout": 0.3})
    response, client = run(one_call(settings))
    assert response.ok, response.error
    assert response.text == "the reply after the fault"
    assert response.attempts == 3
    stats = client.stats()
    assert stats.retries == 2 and stats.http_requests == 3 and stats.errors == {}
    assert mock_server.stats().outcomes == {fault.value: 2, "ok": 1}


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (FaultKind.HTTP_500, ModelErrorKind.SERVER_ERROR),
        (FaultKind.HTTP_429, ModelErrorKind.RATE_LIMITED),
        (FaultKind.TIMEOUT, ModelErrorKind.TIMEOUT),
        (FaultKind.DISCONNECT, ModelErrorKind.CONNECTION),
        (FaultKind.TRUNCATED_BODY, ModelErrorKind.TRUNCATED_BODY),
        (FaultKind.EMPTY_CHOICES, ModelErrorKind.EMPTY_CHOICES),
    ],
)
def test_exhausted_retries_return_a_recorded_error(
    mock_server: MockServer, mock_settings: ModelSettings, tmp_path: Path, fault: FaultKind, kind: ModelErrorKind
) -> None:
    mock_server.set_faults(rates={fault: 1.0}, timeout_hold_s=5.0)
    settings = mock_settings.model_copy(update={"timeout": 0.2})
    retry = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.002, seed=0)
    with CallCache(tmp_path / "c.sqlite") as cache:
        response, client = run(one_call(settings, cache=cache, retry=retry))
        assert not response.ok and response.error is not None
        assert response.error.kind is kind
        assert "gave up after 3 attempts" in response.error.message
        assert response.attempts == 3 and response.text is None
        assert client.stats().errors == {kind.value: 1}
        assert mock_server.stats().chat_completions == 3
        assert len(cache) == 0  # errors are never cached
        mock_server.set_faults(None)
        again, _ = run(one_call(settings, cache=cache))
        assert again.ok and not again.cache_hit


def test_bad_request_is_recorded_without_retrying(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    settings = mock_settings.model_copy(update={"extra_body": {"n": 99}})
    response, client = run(one_call(settings))
    assert response.error is not None and response.error.kind is ModelErrorKind.BAD_REQUEST
    assert response.error.status_code == 400 and "'n'" in response.error.message
    assert response.attempts == 1 and client.stats().retries == 0


def test_unknown_route_raises_an_endpoint_error(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    settings = mock_settings.model_copy(update={"base_url": mock_server.base_url + "/nowhere"})
    with pytest.raises(ModelEndpointError, match="404"):
        run(one_call(settings))


def test_retry_after_is_honoured(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.set_faults(sequence=[FaultKind.HTTP_429], retry_after_s=0.25)
    started = time.perf_counter()
    response, _ = run(one_call(mock_settings))
    assert response.ok and response.attempts == 2
    assert time.perf_counter() - started >= 0.25


def test_backoff_is_full_jitter_and_seedable() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    first = [backoff_delay(policy, attempt, random.Random(11)) for attempt in range(1, 8)]
    again = [backoff_delay(policy, attempt, random.Random(11)) for attempt in range(1, 8)]
    assert first == again
    rng = random.Random(5)
    for attempt in range(1, 8):
        window = min(4.0, 0.5 * 2 ** (attempt - 1))
        samples = [backoff_delay(policy, attempt, rng) for _ in range(200)]
        assert all(0.0 <= s <= window for s in samples)
        assert max(samples) > 0.8 * window  # the whole window is used
    assert backoff_delay(policy, 1, rng, retry_after=3.0) >= 3.0
    assert backoff_delay(RetryPolicy(max_retry_after_s=1.0), 1, rng, retry_after=100.0) <= 1.0


# ---------------------------------------------------------------- adaptive concurrency
def test_rate_limits_lower_concurrency_and_successes_raise_it_slowly(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.set_latency(5)

    async def scenario() -> tuple[int, int, int]:
        async with ModelClient(mock_settings, retry=FAST_RETRY, max_concurrency=16) as client:
            mock_server.set_faults(sequence=[FaultKind.HTTP_429] * 16)
            await asyncio.gather(*(client.complete([{"role": "user", "content": f"{i}"}]) for i in range(16)))
            lowered = client.stats().concurrency_limit
            await asyncio.gather(*(client.complete([{"role": "user", "content": f"a{i}"}]) for i in range(8)))
            partly = client.stats().concurrency_limit
            mock_server.set_latency(0)
            for i in range(150):
                await client.complete([{"role": "user", "content": f"b{i}"}])
            return lowered, partly, client.stats().concurrency_limit

    lowered, partly, recovered = run(scenario())
    assert lowered < 16
    assert lowered >= 4  # one burst of 429s from one window halves the limit once or twice, not 16 times
    assert partly <= lowered + 1
    assert recovered == 16


def test_limiter_bounds_requests_in_flight(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.set_latency(15)

    async def scenario() -> list[ModelResponse]:
        async with ModelClient(mock_settings, retry=FAST_RETRY, max_concurrency=4) as client:
            return await asyncio.gather(*(client.complete([{"role": "user", "content": f"{i}"}]) for i in range(24)))

    responses = run(scenario())
    assert all(r.ok for r in responses)
    assert mock_server.stats().max_in_flight <= 4


def test_adaptive_limiter_aimd_rules() -> None:
    async def scenario() -> None:
        limiter = AdaptiveLimiter(8, min_limit=2)
        epochs = [await limiter.acquire() for _ in range(8)]
        assert limiter.in_flight == 8
        waiter = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)
        assert not waiter.done()
        limiter.on_rate_limited(epochs[0])
        limiter.on_rate_limited(epochs[1])  # same window: ignored
        assert limiter.limit == 4
        for _ in range(8):
            limiter.release()
        await asyncio.sleep(0)
        assert waiter.done() and limiter.in_flight == 1
        limiter.on_rate_limited(await waiter)
        limiter.on_rate_limited(0)  # stale epoch
        assert limiter.limit == 2  # floor
        for _ in range(3):
            limiter.on_success()
        assert limiter.limit == 3  # +1 per window of successes
        limiter.release()

    run(scenario())


# ---------------------------------------------------------------- cache integration
def test_second_identical_call_is_a_cache_hit(
    mock_server: MockServer, mock_settings: ModelSettings, tmp_path: Path
) -> None:
    broken_call = ToolCallSpec(name="book_room", arguments="{")
    mock_server.script(ReplySpec(text="booked", reasoning="ok", tool_calls=[broken_call]))

    async def scenario(cache: CallCache) -> tuple[ModelResponse, ModelResponse, ModelClient]:
        async with ModelClient(mock_settings, cache=cache, retry=FAST_RETRY) as client:
            first = await client.complete(USER, tools=TOOLS, session_id="ep-1")
            second = await client.complete(USER, tools=TOOLS, session_id="ep-2")
            return first, second, client

    with CallCache(tmp_path / "c.sqlite") as cache:
        first, second, client = run(scenario(cache))
    assert not first.cache_hit and second.cache_hit and second.attempts == 0
    assert first.cache_key == second.cache_key  # the session id is not part of the key
    assert second.model_dump(exclude={"cache_hit", "attempts", "latency_s"}) == first.model_dump(
        exclude={"cache_hit", "attempts", "latency_s"}
    )
    assert second.tool_calls[0].parse_error  # re-parsed from the stored raw arguments
    assert mock_server.stats().chat_completions == 1
    assert client.stats().cache_hits == 1 and client.stats().cache_misses == 1
    assert [r["headers"]["x-session-id"] for r in mock_server.requests()] == ["ep-1"]


def test_same_model_behind_another_url_hits_the_cache(
    mock_server: MockServer, mock_settings: ModelSettings, tmp_path: Path
) -> None:
    path = tmp_path / "c.sqlite"
    with CallCache(path) as cache:
        first, _ = run(one_call(mock_settings, cache=cache))
    with MockServer() as other, CallCache(path) as cache:
        elsewhere = mock_settings.model_copy(update={"base_url": other.base_url})
        second, _ = run(one_call(elsewhere, cache=cache))
        assert other.stats().chat_completions == 0
    assert second.cache_hit and second.text == first.text


def test_sample_index_changes_the_key_and_the_seed(
    mock_server: MockServer, mock_settings: ModelSettings, tmp_path: Path
) -> None:
    settings = mock_settings.model_copy(update={"seed": 100, "temperature": 0.7})

    async def scenario(cache: CallCache) -> list[ModelResponse]:
        async with ModelClient(settings, cache=cache, retry=FAST_RETRY) as client:
            return [await client.complete(USER, sample_index=k) for k in (0, 1, 0)]

    with CallCache(tmp_path / "c.sqlite") as cache:
        zero, one, zero_again = run(scenario(cache))
    assert zero.cache_key != one.cache_key and zero_again.cache_hit
    assert [r["body"]["seed"] for r in mock_server.requests()] == [100, 101]
    assert mock_server.requests()[0]["body"]["temperature"] == 0.7


def test_replay_only_raises_cache_miss(mock_server: MockServer, mock_settings: ModelSettings, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with CallCache(path) as cache:
        recorded, _ = run(one_call(mock_settings, cache=cache))
    with CallCache(path, "replay_only") as replay:
        replayed, _ = run(one_call(mock_settings, cache=replay))
        assert replayed.cache_hit and replayed.text == recorded.text
        with pytest.raises(CacheMiss, match="mock-model"):
            run(one_call(mock_settings, cache=replay, messages=[{"role": "user", "content": "never seen"}]))
    assert mock_server.stats().chat_completions == 1


def test_extra_body_and_response_format_reach_the_server(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    schema = {
        "type": "json_schema",
        "json_schema": {"name": "label", "schema": {"type": "object", "properties": {"consults": {"type": "boolean"}}}},
    }
    settings = mock_settings.model_copy(
        update={"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}, "reasoning_effort": "low"}
    )
    response, client = run(one_call(settings, response_format=schema, tools=TOOLS, tool_choice="auto"))
    assert response.ok
    body = mock_server.requests()[0]["body"]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["response_format"] == schema
    assert body["tool_choice"] == "auto" and body["tools"] == TOOLS
    assert body["reasoning_effort"] == "low" and body["temperature"] == 0.0
    assert "seed" not in body and "top_p" not in body
    assert client.key_for(USER, tools=TOOLS, tool_choice="auto", response_format=schema) == response.cache_key
    assert client.key_for(USER, tools=TOOLS, tool_choice="auto") != response.cache_key


@pytest.mark.parametrize("extra", [{"top_k": 20}, {"huge": 2**70}])
def test_a_body_reaches_the_server_as_the_same_json_however_it_is_written(
    mock_server: MockServer, mock_settings: ModelSettings, extra: dict[str, Any]
) -> None:
    """orjson writes the body; a value it cannot write (an integer beyond 64 bits) is left to the SDK."""
    settings = mock_settings.model_copy(update={"extra_body": extra})
    response, _ = run(one_call(settings, tools=TOOLS))
    assert response.ok
    (request,) = mock_server.requests()
    assert request["headers"]["content-type"] == "application/json"
    assert request["body"] == {"model": settings.model, "messages": USER, "tools": TOOLS, "temperature": 0.0, **extra}


# ---------------------------------------------------------------- parsing (pure)
@pytest.mark.parametrize(
    ("raw", "arguments", "error_part"),
    [
        ('{"room": "A"}', {"room": "A"}, None),
        ("", {}, None),
        ("  ", {}, None),
        ('{"room": ', None, "not valid JSON"),
        ("[1]", None, "JSON object"),
        ("null", None, "JSON object"),
    ],
)
def test_parse_tool_arguments(raw: str, arguments: dict[str, Any] | None, error_part: str | None) -> None:
    parsed, error = parse_tool_arguments(raw)
    assert parsed == arguments
    assert (error is None) if error_part is None else (error_part in (error or ""))


@pytest.mark.parametrize(
    ("payload", "error_kind", "check"),
    [
        ({"choices": []}, ModelErrorKind.EMPTY_CHOICES, None),
        ({}, ModelErrorKind.EMPTY_CHOICES, None),
        ("text", ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"finish_reason": "stop"}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": None}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": ["text"]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": {"tool_calls": {"function": {}}}}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": {"tool_calls": "f()"}}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": {"content": ["a", 1]}}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": {"content": [{"text": 5}]}}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": {"content": {"text": "a"}}}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": {"content": 42}}]}, ModelErrorKind.INVALID_RESPONSE, None),
        ({"choices": [{"message": {"content": "a", "reasoning": ["x"]}}]}, ModelErrorKind.INVALID_RESPONSE, None),
        (
            {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "image_url"}]}}]},
            None,
            lambda f: f["text"] == "a",
        ),
        (
            {"choices": [{"message": {"content": None, "tool_calls": None}}]},
            None,
            lambda f: f["text"] is None and f["tool_calls"] == [],
        ),
        (
            {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]},
            None,
            lambda f: f["text"] == "ab",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}}]},
            None,
            lambda f: f["tool_calls"][0].arguments == {"x": 1} and f["tool_calls"][0].id == "call_0",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}, "junk"]}}]},
            None,
            lambda f: [c.parse_error is not None for c in f["tool_calls"]] == [True, True],
        ),
        (
            {"choices": [{"message": {"content": "x", "reasoning_content": "why"}}], "usage": None},
            None,
            lambda f: f["reasoning"] == "why" and f["usage"].prompt_tokens == 0,
        ),
    ],
)
def test_parse_completion_never_raises(payload: Any, error_kind: ModelErrorKind | None, check: Any) -> None:
    fields, error = parse_completion(payload, fallback_model="m")
    if error_kind is None:
        assert error is None and check(fields)
    else:
        assert error is not None and error.kind is error_kind


def test_settings_validate_and_describe_identity() -> None:
    settings = ModelSettings(model="qwen", temperature=0.2, seed=3, extra_body={"top_k": 20})
    assert settings.identity() == {
        "model": "qwen",
        "sampling": {"temperature": 0.2, "seed": 3},
        "extra_body": {"top_k": 20},
    }
    with pytest.raises(ValueError):
        ModelSettings(model="qwen", temprature=0.2)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        ModelSettings(model="")


# ------------------------------------------------------------ identical requests in flight
def test_identical_requests_in_flight_share_one_answer(
    mock_server: MockServer, mock_settings: ModelSettings, tmp_path: Path
) -> None:
    """A server need not answer one prompt twice the same way; concurrent twins must not ask twice,
    or the cache would hold one answer while a trace holds the other and replay would diverge."""
    mock_server.set_latency(50)
    mock_server.script(ReplySpec(text="first answer"), ReplySpec(text="second answer"))

    async def twins() -> tuple[list[ModelResponse], ModelClient]:
        cache = CallCache(tmp_path / "cache.sqlite")
        async with ModelClient(mock_settings, cache=cache, retry=FAST_RETRY) as client:
            responses = await asyncio.gather(*(client.complete(USER) for _ in range(3)))
        cache.close()
        return list(responses), client

    responses, client = run(twins())
    assert {r.text for r in responses} == {"first answer"}
    assert sum(not r.cache_hit for r in responses) == 1
    assert client.stats().http_requests == 1
    assert mock_server.stats().chat_completions == 1
    replay = CallCache(tmp_path / "cache.sqlite", mode="replay_only")
    response, _ = run(one_call(mock_settings, cache=replay))
    assert response.cache_hit and response.text == "first answer"


def test_without_a_cache_identical_requests_are_separate_samples(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.set_latency(50)
    mock_server.script(ReplySpec(text="one"), ReplySpec(text="two"))

    async def twins() -> list[ModelResponse]:
        async with ModelClient(mock_settings, cache=CallCache(None, mode="off"), retry=FAST_RETRY) as client:
            return list(await asyncio.gather(*(client.complete(USER) for _ in range(2))))

    responses = run(twins())
    assert sorted(r.text for r in responses) == ["one", "two"]
    assert mock_server.stats().chat_completions == 2


# ---------------------------------------------------------------- a deadline per attempt
TRICKLED = {
    # a body announced as 100,000 bytes that comes one byte at a time
    "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
    # headers that never end
    "headers": b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000,
}


@pytest.mark.parametrize("part", list(TRICKLED))
def test_a_server_that_trickles_its_answer_times_out_and_is_retried(part: str) -> None:
    """The HTTP client's timeout bounds each wait for a byte; the attempt as a whole needs its own deadline."""
    stop = threading.Event()
    with RawServer(trickling(TRICKLED[part], 0.05, stop)) as server:
        settings = ModelSettings(model="m", base_url=server.base_url, api_key_env=None, timeout=0.5)
        retry = RetryPolicy(max_attempts=2, base_delay_s=0.001, max_delay_s=0.002, seed=0)
        started = time.monotonic()
        try:
            response, _ = run(asyncio.wait_for(one_call(settings, retry=retry), 60))
        finally:
            stop.set()
        took = time.monotonic() - started
    assert response.error is not None and response.error.kind is ModelErrorKind.TIMEOUT, response.error
    assert "within 0.5 s" in response.error.message and "gave up after 2 attempts" in response.error.message
    assert response.attempts == 2 and len(server.requests) == 2
    assert took < 30  # two deadlines of 0.5 s, not a byte every 0.05 s for ever


@pytest.mark.parametrize(("status", "text", "expected"), [
    (400, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens", True),
    (400, "'max_tokens' is too large: 1024. This model's maximum context length is 4096 tokens", True),
    (400, "Error code: context_length_exceeded", True),
    (400, "the request exceeds the available context size, try increasing it", True),
    (400, "Requested tokens (5000) exceed context window of 4096", True),
    (400, "The input (5000 tokens) is longer than the model's context length (4096 tokens).", True),
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', False),
    (422, "field required", False),
    (500, "maximum context length exceeded while loading", False),  # a server fault, not a prompt too long
])
def test_context_length_answers_are_told_apart(status: int, text: str, expected: bool) -> None:
    from commitbench.callerrors import is_context_length

    assert is_context_length(status, text) is expected


def test_context_length_answer_is_its_own_kind_and_not_retried() -> None:
    body = {"error": {"message": "This model's maximum context length is 4096 tokens.", "code": None}}
    with RawServer(json_answer(body, status=400)) as server:
        settings = ModelSettings(model="m", base_url=server.base_url, api_key_env=None, timeout=5)
        response, client = run(one_call(settings))
        assert len(server.requests) == 1
    assert response.error is not None and response.error.kind is ModelErrorKind.CONTEXT_LENGTH
    assert client.stats().errors == {"context_length": 1}
