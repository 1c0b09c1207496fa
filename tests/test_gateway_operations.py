"""The gateway in operation, through real sockets: what it exposes, who may read the ledger, the upstream's
faults (a trickling reply, a base URL with a query, URL credentials beside a client's key, a streamed reply
that is no stream, error statuses) and its metrics."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest
from _raw_server import RawRequest, RawServer, completion, http_bytes, json_answer, trickling

from commitbench.cli import main
from commitbench.gateway.server import GatewayProcess
from commitbench.mock import FaultConfig, FaultKind, MockServer, ReplySpec, ToolCallSpec

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "What is on my calendar?"}]


@pytest.fixture
def upstream() -> Iterator[MockServer]:
    with MockServer(streaming=True) as server:
        yield server


def gateway(upstream_url: str, *args: str) -> GatewayProcess:
    return GatewayProcess(["--upstream", upstream_url, *args]).start()


def test_only_the_documented_paths_reach_the_upstream(upstream: MockServer) -> None:
    process = gateway(upstream.base_url)
    try:
        origin = process.base_url.removesuffix("/v1")
        faults = httpx2.post(f"{origin}/faults", json={"rate": 1.0})
        assert faults.status_code == 404 and faults.json()["error"]["type"] == "not_found_error"
        assert "/faults" in faults.json()["error"]["message"]
        assert httpx2.get(f"{process.base_url}/models").status_code == 200
        health = httpx2.get(f"{origin}/health")
        assert health.status_code == 200 and health.json()["upstream"]["reachable"] is True
        ledger = httpx2.get(f"{process.base_url}/commitments", params={"user": "ana"})
        assert ledger.status_code == 404 and "--commitments-token" in ledger.json()["error"]["message"]
    finally:
        process.stop()
    process = gateway(upstream.base_url, "--pass-path", "/faults")
    try:
        origin = process.base_url.removesuffix("/v1")
        assert httpx2.post(f"{origin}/faults", json={"rate": 0.0}).status_code != 404  # passed on, as asked
    finally:
        process.stop()


def test_the_ledger_route_needs_its_token_and_health_says_when_the_upstream_is_gone(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    process = gateway(dead, "--ledger", str(tmp_path / "owed.db"), "--commitments-token", "s3cret")
    try:
        url = f"{process.base_url}/commitments"
        assert httpx2.get(url, params={"user": "ana"}).status_code == 401
        wrong = httpx2.get(url, params={"user": "ana"}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
        right = httpx2.get(url, params={"user": "ana"}, headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200 and right.json()["data"] == []
        health = httpx2.get(f"{process.base_url.removesuffix('/v1')}/health")
        assert health.status_code == 503 and health.json()["upstream"]["reachable"] is False
    finally:
        process.stop()
    assert "s3cret" not in process.stderr()


def test_a_trickling_upstream_ends_at_the_deadline() -> None:
    stop = threading.Event()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    with RawServer(trickling(head, 0.25, stop)) as raw:
        process = gateway(raw.base_url, "--upstream-timeout", "3")
        try:
            started = time.monotonic()
            answer = httpx2.post(f"{process.base_url}/chat/completions", json={"model": "m", "messages": ASK},
                                 timeout=60)
            elapsed = time.monotonic() - started
            assert answer.status_code == 504 and answer.json()["error"]["type"] == "timeout"
            assert elapsed < 8, elapsed  # the 3 s deadline, not the 25 s the trickle would take
        finally:
            stop.set()
            process.stop()


def test_a_base_url_with_a_query_and_credentials_beside_a_clients_key() -> None:
    seen: list[RawRequest] = []

    def answer(request: RawRequest, conn: socket.socket) -> None:
        seen.append(request)
        body = completion({"role": "assistant", "content": "Your 3pm is free."})
        conn.sendall(http_bytes(200, json.dumps(body).encode()))

    with RawServer(answer) as raw:
        base = raw.base_url.replace("http://", "http://svc:pa%40ss@") + "?api-version=2024-06-01"
        process = gateway(base)
        try:
            client = openai.OpenAI(base_url=process.base_url, api_key="client-key", max_retries=0)
            reply = client.chat.completions.create(model="m", messages=ASK)
            assert reply.choices[0].message.content == "Your 3pm is free."
            assert seen[-1].path == "/v1/chat/completions?api-version=2024-06-01"
            assert seen[-1].headers["authorization"] == "Bearer client-key"  # the client's key wins
            plain = httpx2.post(f"{process.base_url}/chat/completions", json={"model": "m", "messages": ASK})
            assert plain.status_code == 200
            assert seen[-1].headers["authorization"].startswith("Basic ")  # else the URL's credentials
        finally:
            process.stop()
        assert "pa@ss" not in process.stderr() and "pa%40ss" not in process.stderr()


def test_a_streamed_enforce_reply_that_is_no_stream_is_a_502(tmp_path: Path) -> None:
    log = tmp_path / "gateway.jsonl"
    with RawServer(json_answer({"not": "a stream"})) as raw:
        process = gateway(raw.base_url, "--mode", "enforce", "--log", str(log))
        try:
            answer = httpx2.post(f"{process.base_url}/chat/completions",
                                 json={"model": "m", "messages": ASK, "stream": True})
            assert answer.status_code == 502 and "no JSON chunk" in answer.json()["error"]["message"]
            assert "x-commitbench-verdict" not in answer.headers
        finally:
            process.stop()
    assert json.loads(log.read_text().splitlines()[0])["status"] == 502


def test_upstream_errors_are_logged_reported_and_counted(upstream: MockServer, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "gateway.jsonl"
    process = gateway(upstream.base_url, "--log", str(log), "--upstream-timeout", "4")
    try:
        client = openai.OpenAI(base_url=process.base_url, api_key="k", max_retries=0)
        upstream.script("Your 3pm is free.", "Noted.")
        client.chat.completions.create(model="mock-model", messages=ASK)
        upstream.set_faults(FaultConfig(sequence=[FaultKind.HTTP_500, FaultKind.HTTP_500]))
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                client.chat.completions.create(model="mock-model", messages=ASK)
        upstream.set_faults(None)
        client.chat.completions.create(model="mock-model", messages=ASK)
        metrics = httpx2.get(f"{process.base_url.removesuffix('/v1')}/metrics").text
    finally:
        process.stop()
    statuses = [json.loads(line)["status"] for line in log.read_text().splitlines()]
    assert sorted(statuses) == [200, 200, 500, 500]
    assert main(["gateway", "report", str(log), "--n-boot", "20"]) == 0
    assert "upstream errors: 2 of 4 requests (50.0%; by status: 500 2)" in capsys.readouterr().out
    assert 'commitbench_gateway_requests_total{route="chat",status="200"} 2.0' in metrics
    assert 'commitbench_gateway_requests_total{route="chat",status="500"} 2.0' in metrics
    assert 'commitbench_gateway_upstream_errors_total{status="500"} 2.0' in metrics
    assert 'commitbench_gateway_verdicts_total{label="pass"} 2.0' in metrics
    assert "commitbench_gateway_added_seconds_bucket" in metrics
    assert "commitbench_gateway_check_seconds_count 2.0" in metrics



REMIND_ASK = [{"role": "user", "content": "Remind me tomorrow at 9 to pay the rent."}]
REMINDER = {"type": "function", "function": {"name": "create_reminder", "description": "Create a reminder.",
                                              "parameters": {"type": "object", "properties": {}}}}


def _reminder_reply(day: int) -> ReplySpec:
    return ReplySpec(text="I'll remind you tomorrow at 9 to pay the rent.", tool_calls=[
        ToolCallSpec(name="create_reminder", arguments={"remind_at": f"2030-01-0{day}T09:00:00",
                                                        "message": "pay the rent"})])


def test_the_same_request_on_three_days_records_three_promises(upstream: MockServer, tmp_path: Path) -> None:
    process = gateway(upstream.base_url, "--ledger", str(tmp_path / "owed.db"), "--commitments-token", "t")
    try:
        client = openai.OpenAI(base_url=process.base_url, api_key="k", max_retries=0)
        upstream.script(_reminder_reply(2), _reminder_reply(3), _reminder_reply(4), _reminder_reply(4))
        recorded = []
        for _ in range(4):  # three days, then a client's retry of the third
            raw = client.chat.completions.with_raw_response.create(model="mock-model", messages=REMIND_ASK,
                                                                   tools=[REMINDER], user="sarah")
            recorded.append(raw.parse().model_extra["commitbench"]["recorded"])
        assert len({tuple(r) for r in recorded[:3]}) == 3 and recorded[3] == recorded[2]
        owed = httpx2.get(f"{process.base_url}/commitments", params={"user": "sarah"},
                          headers={"Authorization": "Bearer t"}).json()["data"]
        assert sorted(item["due_at"] for item in owed) == [
            "2030-01-02T09:00:00+00:00", "2030-01-03T09:00:00+00:00", "2030-01-04T09:00:00+00:00"]
    finally:
        process.stop()


def test_require_user_keeps_promises_without_a_user_out_of_the_ledger(upstream: MockServer, tmp_path: Path) -> None:
    process = gateway(upstream.base_url, "--ledger", str(tmp_path / "owed.db"), "--require-user")
    try:
        client = openai.OpenAI(base_url=process.base_url, api_key="k", max_retries=0)
        upstream.script(_reminder_reply(2), _reminder_reply(2))
        raw = client.chat.completions.with_raw_response.create(model="mock-model", messages=REMIND_ASK,
                                                               tools=[REMINDER])
        report = raw.parse().model_extra["commitbench"]
        assert report["recorded"] == [] and "--require-user" in report["ledger"]
        raw = client.chat.completions.with_raw_response.create(
            model="mock-model", messages=REMIND_ASK, tools=[REMINDER], extra_headers={"x-session-id": "tab-1"})
        assert len(raw.parse().model_extra["commitbench"]["recorded"]) == 1  # the session names the creditor
    finally:
        process.stop()


def test_a_12_mb_request_does_not_hold_up_small_ones(upstream: MockServer) -> None:
    process = gateway(upstream.base_url)
    try:
        url = f"{process.base_url}/chat/completions"
        small = {"model": "mock-model", "messages": ASK}

        def timed() -> float:
            started = time.monotonic()
            assert httpx2.post(url, json=small, timeout=60).status_code == 200
            return time.monotonic() - started

        upstream.set_responder(lambda request: "Your 3pm is free.")
        quiet = max(timed() for _ in range(10))
        tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "x" * 12_000,
                                                   "parameters": {"type": "object", "properties": {}}}}
                 for i in range(1000)]
        big = json.dumps({"model": "mock-model", "messages": ASK, "tools": tools}).encode()
        assert len(big) > 12_000_000
        answers: list[int] = []
        thread = threading.Thread(target=lambda: answers.append(httpx2.post(
            url, content=big, headers={"content-type": "application/json"}, timeout=120).status_code))
        thread.start()
        busy = [timed() for _ in range(20)]
        thread.join()
        assert answers == [200]
        assert max(busy) < max(2.0, 20 * quiet), (quiet, busy)  # served meanwhile, not after it
    finally:
        process.stop()


TWO_PROMISES = "I'll remind you to call mum at 6pm and remind you tomorrow at 9 am to pay the rent."


def test_two_promises_are_two_rows_with_their_whole_words_and_an_uncalled_one_is_unanchored(
    upstream: MockServer, tmp_path: Path
) -> None:
    process = gateway(upstream.base_url, "--ledger", str(tmp_path / "owed.db"), "--commitments-token", "t")
    call = ToolCallSpec(name="create_reminder", arguments={"remind_at": "2030-01-01T18:00:00", "message": "call mum"})
    second = ToolCallSpec(name="create_reminder", arguments={"remind_at": "2030-01-02T09:00:00",
                                                              "message": "pay the rent"})
    try:
        client = openai.OpenAI(base_url=process.base_url, api_key="k", max_retries=0)
        upstream.script(ReplySpec(text=TWO_PROMISES, tool_calls=[call, second]))
        raw = client.chat.completions.with_raw_response.create(model="mock-model", messages=REMIND_ASK,
                                                               tools=[REMINDER], user="ana")
        report = raw.parse().model_extra["commitbench"]
        assert raw.headers["x-commitbench-verdict"] == "pass" and len(report["recorded"]) == 2
        owed = httpx2.get(f"{process.base_url}/commitments", params={"user": "ana"},
                          headers={"Authorization": "Bearer t"}).json()["data"]
        assert sorted(item["action"] for item in owed) == [
            "remind you to call mum at 6pm", "remind you tomorrow at 9 am to pay the rent"]

        upstream.script(ReplySpec(text=TWO_PROMISES, tool_calls=[call]))  # one call for two promises
        raw = client.chat.completions.with_raw_response.create(model="mock-model", messages=REMIND_ASK,
                                                               tools=[REMINDER], user="bo")
        report = raw.parse().model_extra["commitbench"]
        assert raw.headers["x-commitbench-verdict"] == "unanchored" and len(report["recorded"]) == 1
        (verdict,) = report["choices"][0]["verdicts"]
        assert verdict["text"] == "remind you tomorrow at 9 am to pay the rent."
        assert "for another promise only" in verdict["reason"]
    finally:
        process.stop()
