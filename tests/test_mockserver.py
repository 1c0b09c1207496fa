"""The mock server, seen through the real ``openai`` client and raw HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest
from pydantic import ValidationError

from commitbench.cli import build_parser
from commitbench.cli import main as cli_main
from commitbench.mock import (
    FaultConfig,
    FaultKind,
    MockServer,
    MockServerProcess,
    ReasoningField,
    ReplySpec,
    ToolCallSpec,
)
from commitbench.mock.app import MAX_BODY_BYTES
from commitbench.mock.cli import ServeOptions, command_line, options_from_args

USER = [{"role": "user", "content": "please book the room"}]


def chat(server: MockServer | MockServerProcess, messages: list[dict[str, Any]] = USER, **kwargs: Any) -> Any:
    async def go() -> Any:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as client:
            return await client.chat.completions.create(model="mock-model", messages=messages, **kwargs)

    return asyncio.run(go())


def http(server: MockServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    root = server.base_url.rsplit("/v1", 1)[0]
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json"}
    request = urllib.request.Request(root + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_scripted_replies_come_back_in_order_then_echo(mock_server: MockServer) -> None:
    mock_server.script(
        "first",
        ReplySpec(text="calling", tool_calls=[ToolCallSpec(name="book_room", arguments={"room": "A", "n": 2})]),
    )
    first = chat(mock_server)
    assert first.choices[0].message.content == "first"
    assert first.choices[0].finish_reason == "stop"
    second = chat(mock_server)
    call = second.choices[0].message.tool_calls[0]
    assert second.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "book_room"
    assert json.loads(call.function.arguments) == {"room": "A", "n": 2}
    third = chat(mock_server)
    assert third.choices[0].message.content == "echo: please book the room"


@pytest.mark.parametrize(
    ("field", "present", "absent"),
    [
        (ReasoningField.REASONING, ["reasoning"], ["reasoning_content"]),
        (ReasoningField.REASONING_CONTENT, ["reasoning_content"], ["reasoning"]),
        (ReasoningField.BOTH, ["reasoning", "reasoning_content"], []),
    ],
)
def test_reasoning_goes_in_the_requested_field(
    mock_server: MockServer, field: ReasoningField, present: list[str], absent: list[str]
) -> None:
    mock_server.script(ReplySpec(text="done", reasoning="the agenda is final", reasoning_field=field))
    message = chat(mock_server).choices[0].message.model_dump()
    assert message["content"] == "done"
    for name in present:
        assert message[name] == "the agenda is final"
    for name in absent:
        assert name not in message


def test_responder_sees_the_conversation_and_queue_wins(mock_server: MockServer) -> None:
    def drops_on_any_cancel(request: dict[str, Any]) -> str | None:
        text = " ".join(str(m.get("content")) for m in request["messages"])
        return "Dropping it." if "cancel" in text else None

    mock_server.set_responder(drops_on_any_cancel)
    mock_server.script("queued first")
    assert chat(mock_server).choices[0].message.content == "queued first"
    cancelled = [*USER, {"role": "user", "content": "Dana: cancel the booking"}]
    assert chat(mock_server, cancelled).choices[0].message.content == "Dropping it."
    assert chat(mock_server).choices[0].message.content.startswith("echo: ")  # None falls through


def test_async_responder_and_dict_replies(mock_server: MockServer) -> None:
    async def responder(request: dict[str, Any]) -> dict[str, Any]:
        return {"text": f"{len(request['messages'])} messages"}

    mock_server.set_responder(responder)
    assert chat(mock_server).choices[0].message.content == "1 messages"


def test_usage_counts_and_n_choices(mock_server: MockServer) -> None:
    mock_server.script(ReplySpec(text="one two three", reasoning="a b"))
    response = chat(mock_server, n=2)
    assert len(response.choices) == 2
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens == 5  # three words of text + two of reasoning
    assert response.usage.total_tokens == response.usage.prompt_tokens + 5
    assert response.usage.completion_tokens_details.reasoning_tokens == 2


def test_streaming_is_refused_with_a_clear_400(mock_server: MockServer) -> None:
    with pytest.raises(openai.BadRequestError, match="stream"):
        chat(mock_server, stream=True)
    assert mock_server.stats().outcomes == {"bad_request": 1}


def test_a_streaming_server_sends_the_reply_as_events_and_keeps_the_connection() -> None:
    reply = ReplySpec(text="I will book room A for the two of you.",
                      tool_calls=[ToolCallSpec(name="book_room", arguments={"room": "A", "n": 2})])

    async def go(server: MockServer) -> tuple[list[Any], Any]:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as client:
            stream = await client.chat.completions.create(
                model="mock-model", messages=USER, stream=True, stream_options={"include_usage": True}, n=2
            )
            chunks = [chunk async for chunk in stream]
            plain = await client.chat.completions.create(model="mock-model", messages=USER)
            return chunks, plain

    with MockServer(streaming=True) as server:
        server.script(reply)
        chunks, plain = asyncio.run(go(server))
    texts: dict[int, str] = {0: "", 1: ""}
    arguments = ""
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        texts[choice.index] += choice.delta.content or ""
        if choice.index == 0:
            arguments += "".join(c.function.arguments or "" for c in choice.delta.tool_calls or [])
    assert texts == {0: reply.text, 1: reply.text} and json.loads(arguments) == {"room": "A", "n": 2}
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert plain.choices[0].message.content.startswith("echo:")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": USER}, "'model'"),
        ({"model": "m", "messages": []}, "'messages'"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]"),
        ({"model": "m", "messages": USER, "n": 0}, "'n'"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_requests_name_the_problem(mock_server: MockServer, body: Any, message: str) -> None:
    status, payload = http(mock_server, "POST", "/v1/chat/completions", body)
    assert status == 400
    assert message in payload["error"]["message"]


def test_models_stats_reset_and_unknown_routes(mock_server: MockServer) -> None:
    status, models = http(mock_server, "GET", "/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == ["mock-model"]
    mock_server.script("x", "y")
    chat(mock_server)
    status, stats = http(mock_server, "GET", "/stats")
    assert status == 200
    assert stats["chat_completions"] == 1 and stats["outcomes"] == {"ok": 1} and stats["queued_replies"] == 1
    assert http(mock_server, "GET", "/nope") == (
        404, {"error": {"message": "no route for GET /nope", "type": "not_found_error", "code": 404}}
    )
    status, wrong_method = http(mock_server, "GET", "/v1/chat/completions")
    assert status == 405 and "POST" in wrong_method["error"]["message"]
    assert http(mock_server, "POST", "/reset", {})[0] == 200
    after = mock_server.stats()
    assert after.total == 0 and after.queued_replies == 0


def test_script_and_faults_over_http(mock_server: MockServer) -> None:
    status, _ = http(mock_server, "POST", "/script", [{"text": "from http"}])
    assert status == 200
    assert http(mock_server, "POST", "/faults", {"sequence": ["http_500"]})[0] == 200
    with pytest.raises(openai.InternalServerError):
        chat(mock_server)
    assert chat(mock_server).choices[0].message.content == "from http"
    assert http(mock_server, "POST", "/faults", {"rates": {"http_500": 2}})[0] == 400
    assert http(mock_server, "POST", "/script", [{"txt": "typo"}])[0] == 400


def test_transport_faults_keep_the_scripted_reply(mock_server: MockServer) -> None:
    mock_server.script("the real reply")
    mock_server.set_faults(sequence=[FaultKind.HTTP_500, FaultKind.EMPTY_CHOICES, FaultKind.HTTP_429])
    with pytest.raises(openai.InternalServerError):
        chat(mock_server)
    assert chat(mock_server).choices == []
    with pytest.raises(openai.RateLimitError):
        chat(mock_server)
    assert chat(mock_server).choices[0].message.content == "the real reply"
    assert mock_server.stats().outcomes == {"http_500": 1, "empty_choices": 1, "http_429": 1, "ok": 1}


def test_429_carries_retry_after(mock_server: MockServer) -> None:
    mock_server.set_faults(sequence=[FaultKind.HTTP_429], retry_after_s=1.5)
    with pytest.raises(openai.RateLimitError) as caught:
        chat(mock_server)
    assert caught.value.response.headers["retry-after"] == "1.5"
    assert caught.value.response.headers["retry-after-ms"] == "1500"


def test_malformed_tool_arguments_and_refusal_spoil_the_reply(mock_server: MockServer) -> None:
    mock_server.script(
        ReplySpec(tool_calls=[ToolCallSpec(name="book_room", arguments={"room": "A"})]),
        ReplySpec(text="sure", fault=FaultKind.REFUSAL),
    )
    mock_server.set_faults(sequence=[FaultKind.MALFORMED_TOOL_ARGS])
    call = chat(mock_server).choices[0].message.tool_calls[0]
    assert call.function.name == "book_room"
    with pytest.raises(ValueError):
        json.loads(call.function.arguments)
    refused = chat(mock_server).choices[0].message
    assert refused.content is None and refused.refusal
    assert mock_server.stats().queued_replies == 0


def test_truncated_body_is_a_cut_json_document(mock_server: MockServer) -> None:
    mock_server.set_faults(sequence=[FaultKind.TRUNCATED_BODY])
    root = mock_server.base_url
    body = json.dumps({"model": "m", "messages": USER}).encode()
    request = urllib.request.Request(f"{root}/chat/completions", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        raw = response.read()
    assert raw.startswith(b'{"id":"chatcmpl-mock-')
    with pytest.raises(ValueError):
        json.loads(raw)


def test_timeout_holds_and_disconnect_drops(mock_server: MockServer) -> None:
    mock_server.set_faults(sequence=[FaultKind.TIMEOUT, FaultKind.DISCONNECT], timeout_hold_s=5.0)
    started = time.perf_counter()
    with pytest.raises(openai.APITimeoutError):
        chat(mock_server, timeout=0.2)
    assert time.perf_counter() - started < 2.0
    with pytest.raises(openai.APIConnectionError):
        chat(mock_server)
    assert mock_server.stats().outcomes == {"timeout": 1, "disconnect": 1}


def test_seeded_fault_rates_are_reproducible() -> None:
    def outcomes(seed: int) -> list[str]:
        async def go(server: MockServer) -> list[str]:
            seen = []
            async with openai.AsyncOpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as client:
                for _ in range(40):
                    try:
                        await client.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]
                        seen.append("ok")
                    except openai.APIStatusError as exc:
                        seen.append(str(exc.status_code))
            return seen

        faults = FaultConfig(seed=seed, rates={FaultKind.HTTP_500: 0.3, FaultKind.HTTP_429: 0.2})
        with MockServer(faults=faults) as server:
            return asyncio.run(go(server))

    first, again, other = outcomes(7), outcomes(7), outcomes(8)
    assert first == again
    assert first != other
    assert {"ok", "500", "429"} <= set(first)


def test_fault_config_rejects_impossible_rates() -> None:
    with pytest.raises(ValidationError, match="sum"):
        FaultConfig(rates={FaultKind.HTTP_500: 0.7, FaultKind.TIMEOUT: 0.6})
    with pytest.raises(ValidationError):
        FaultConfig(rates={"no_such_fault": 0.1})


def test_a_streamed_reply_cut_short_ends_without_its_last_chunk() -> None:
    async def go(server: MockServer) -> tuple[list[Any], BaseException | None]:
        chunks: list[Any] = []
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as client:
            try:
                stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
                async for chunk in stream:
                    chunks.append(chunk)
            except openai.APIConnectionError as exc:
                return chunks, exc
        return chunks, None

    full = "one two three four five six seven eight nine ten eleven twelve"
    with MockServer(streaming=True, faults=FaultConfig(sequence=[FaultKind.TRUNCATED_BODY])) as server:
        server.script(ReplySpec(text=full))
        chunks, error = asyncio.run(go(server))
        assert error is not None  # the chunked body ended without its terminating chunk
        assert chunks and chunks[0].choices[0].delta.role == "assistant"
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        assert text and full.startswith(text) and len(text) < len(full)  # the first events came, then nothing
        assert server.stats().queued_replies == 1  # no completion reached the client: the reply stays


def test_stopping_the_server_ends_a_hold_at_once() -> None:
    server = MockServer(faults=FaultConfig(sequence=[FaultKind.TIMEOUT], timeout_hold_s=60)).start()
    body = json.dumps({"model": "m", "messages": USER}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
        deadline = time.monotonic() + 5
        while server.stats().outcomes != {"timeout": 1} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.stats().outcomes == {"timeout": 1}
        started = time.perf_counter()
        server.stop()
        assert time.perf_counter() - started < 5.0
        assert sock.recv(100) == b""  # closed, never answered


def test_a_body_over_the_bound_gets_a_413_and_nothing_is_kept(mock_server: MockServer) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
    with socket.create_connection(("127.0.0.1", mock_server.port), timeout=30) as sock:
        sock.sendall(head)
        block = b" " * (1 << 20)
        for _ in range(MAX_BODY_BYTES // len(block)):
            sock.sendall(block)
        sock.sendall(b" ")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert mock_server.stats().chat_completions == 0 and mock_server.requests() == []


def test_a_client_that_leaves_mid_body_is_no_error(mock_server: MockServer, caplog: pytest.LogCaptureFixture) -> None:
    with socket.create_connection(("127.0.0.1", mock_server.port), timeout=5) as sock:
        sock.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"model"')
        deadline = time.monotonic() + 5
        while mock_server.stats().total == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(0.2)  # the server sees the connection go
    assert mock_server.stats().total == 1 and mock_server.stats().chat_completions == 0
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert chat(mock_server).choices[0].message.content.startswith("echo:")  # still serving


def test_latency_is_applied(mock_server: MockServer) -> None:
    mock_server.set_latency(60)
    started = time.perf_counter()
    chat(mock_server)
    assert time.perf_counter() - started >= 0.06
    # A reply's own latency replaces the server's: with the server at 30 s, a reply scripted at 0 ms
    # comes back long before (a wide margin, so the check holds on a busy machine).
    mock_server.set_latency(30_000)
    mock_server.script(ReplySpec(text="fast", latency_ms=0))
    started = time.perf_counter()
    chat(mock_server)
    assert time.perf_counter() - started < 15.0


def _raw_exchange(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length_line = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    length = int(length_line.split(b":")[1])
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


def test_keep_alive_and_chunked_bodies_on_one_connection(mock_server: MockServer) -> None:
    body = json.dumps({"model": "m", "messages": USER}).encode()
    plain = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    chunked = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n" % (10, body[:10])
        + b"%x\r\n%s\r\n" % (len(body) - 10, body[10:])
        + b"0\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", mock_server.port), timeout=5) as sock:
        first = _raw_exchange(sock, plain)
        second = _raw_exchange(sock, chunked)
    for response in (first, second):
        assert response.startswith(b"HTTP/1.1 200 OK")
        assert b"connection: close" not in response.lower()  # HTTP/1.1: the connection stays open
        assert b'"echo: please book the room"' in response
    assert mock_server.stats().outcomes == {"ok": 2}


def test_many_concurrent_clients(mock_server: MockServer) -> None:
    mock_server.set_latency(20)

    async def go() -> list[str]:
        async with openai.AsyncOpenAI(base_url=mock_server.base_url, api_key="EMPTY", max_retries=0) as client:
            responses = await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": f"request {i}"}]
                    )
                    for i in range(200)
                )
            )
        return [r.choices[0].message.content for r in responses]

    texts = asyncio.run(go())
    assert texts == [f"echo: request {i}" for i in range(200)]
    stats = mock_server.stats()
    assert stats.outcomes == {"ok": 200}
    assert stats.max_in_flight > 10


def test_capacity_serves_at_most_k_at_once_and_queues_the_rest(mock_server: MockServer) -> None:
    mock_server.set_capacity(2)
    mock_server.set_latency(100)

    async def go() -> list[str]:
        async with openai.AsyncOpenAI(base_url=mock_server.base_url, api_key="EMPTY", max_retries=0) as client:
            responses = await asyncio.gather(
                *(client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"r{i}"}])
                  for i in range(6))
            )
        return [r.choices[0].message.content for r in responses]

    started = time.perf_counter()
    assert asyncio.run(go()) == [f"echo: r{i}" for i in range(6)]
    elapsed = time.perf_counter() - started
    stats = mock_server.stats()
    assert stats.capacity == 2 and stats.max_serving == 2  # never more than two served at once
    assert stats.max_in_flight > 2  # the others waited in line
    assert elapsed >= 0.3  # six requests, two at a time, 100 ms each: three rounds at least
    mock_server.reset()
    assert mock_server.stats().capacity is None
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        MockServer(capacity=0)


def test_requests_are_recorded_with_headers(mock_server: MockServer) -> None:
    chat(mock_server, extra_headers={"X-Session-ID": "episode-7"})
    (recorded,) = mock_server.requests()
    assert recorded["headers"]["x-session-id"] == "episode-7"
    assert recorded["body"]["messages"] == USER


@pytest.mark.slow
def test_server_as_a_separate_process() -> None:
    with MockServerProcess(latency_ms=5, capacity=3) as server:
        server.script(ReplySpec(text="from the process"))
        server.set_faults(sequence=[FaultKind.HTTP_500, FaultKind.DISCONNECT, FaultKind.TIMEOUT], timeout_hold_s=30)
        with pytest.raises(openai.InternalServerError):
            chat(server)
        with pytest.raises(openai.APIConnectionError):
            chat(server)
        started = time.perf_counter()
        with pytest.raises(openai.APITimeoutError):
            chat(server, timeout=0.3)
        assert time.perf_counter() - started < 5.0
        assert chat(server).choices[0].message.content == "from the process"
        assert server.stats().outcomes == {"http_500": 1, "disconnect": 1, "timeout": 1, "ok": 1}
        assert server.stats().capacity == 3
        server.reset()
        assert server.stats().total == 1  # the /stats request after the reset


# ------------------------------------------------------------------------------------------ the command line
def test_serve_mock_reads_back_the_options_it_is_started_with() -> None:
    options = ServeOptions(
        port=8123, latency_ms=12.5, latency_jitter_ms=0.3, record_requests=0, capacity=3, streaming=True,
        models=["a", "b"],
        faults=FaultConfig(seed=9, rates={FaultKind.HTTP_500: 0.05, FaultKind.TIMEOUT: 0.125}, retry_after_s=1.5,
                           timeout_hold_s=2.0),
    )
    args = build_parser().parse_args(["serve-mock", *command_line(options)])
    assert options_from_args(args) == options
    assert options_from_args(build_parser().parse_args(["serve-mock"])) == ServeOptions()
    with pytest.raises(ValueError, match="fault sequence"):
        command_line(ServeOptions(faults=FaultConfig(sequence=[FaultKind.HTTP_500])))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--capacity", "0"], "--capacity: Input should be greater than or equal to 1"),
        (["--fault", "http_500=0.7", "--fault", "timeout=0.6"], "--fault: Value error, fault rates sum to 1.300"),
        (["--port", "70000"], "--port: Input should be less than or equal to 65535"),
        (["--fault", "nope=0.1"], "expected KIND=RATE with KIND one of http_500"),
        (["--fault", "http_500=lots"], "the rate must be a number between 0 and 1"),
    ],
)
def test_serve_mock_refuses_bad_options_with_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = cli_main(["serve-mock", *argv])
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_serve_mock_on_a_port_in_use_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli_main(["serve-mock", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


PARENT = textwrap.dedent(
    """
    import time
    from commitbench.mock import MockServerProcess

    server = MockServerProcess().start()
    print(server.base_url, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.slow
def test_the_server_process_dies_with_the_process_that_started_it() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        base_url = parent.stdout.readline().strip()
        root = base_url.rsplit("/v1", 1)[0]
        with urllib.request.urlopen(root + "/stats", timeout=10) as response:
            assert json.loads(response.read())["total"] == 1
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        refused = False
        while not refused and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(root + "/stats", timeout=1).close()
                time.sleep(0.1)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                refused = True
        assert refused, "the mock server outlived the process that started it"
    finally:
        parent.kill()
        parent.wait(10)
        if parent.stdout is not None:
            parent.stdout.close()
