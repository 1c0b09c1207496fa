"""The commitment gateway on Turkish replies, end to end: the real ``openai`` client against ``commitbench
gateway`` (a child process on 127.0.0.1, port 0) in front of the project's mock server, which scripts the
upstream model's replies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from commitbench.gateway.server import GatewayProcess
from commitbench.mock import MockServer

pytestmark = pytest.mark.slow

PROMISE = "Yarın sabah 9'da size hatırlatırım."
OFFER = "Hatırlatmamı ister misiniz?"
ASK = [{"role": "user", "content": "Yarın sabah 9'da bana faturayı ödemeyi hatırlatır mısın?"}]
REMINDER = {"type": "function", "function": {"name": "create_reminder", "description": "Create a reminder.",
                                              "parameters": {"type": "object", "properties": {}}}}
CALLED = [*ASK, {"role": "assistant", "content": None, "tool_calls": [{"id": "r1", "type": "function", "function": {
    "name": "create_reminder", "arguments": '{"remind_at": "2030-01-02T09:00:00", "message": "faturayı öde"}'}}]},
          {"role": "tool", "tool_call_id": "r1", "content": '{"reminder_id": "rem-1"}'}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway-tr") / "gateway.jsonl"


@pytest.fixture(scope="module")
def gateway(upstream: MockServer, log_file: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(["--upstream", upstream.base_url, "--upstream-timeout", "4", "--mode", "enforce",
                              "--log", str(log_file)]).start()
    try:
        yield process
    finally:
        process.stop()


def chat(gateway: GatewayProcess, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[str, str, dict[str, Any]]:
    """(verdict header, the reply's text, the commitbench object of the completion)."""
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-test", max_retries=0, timeout=60)
    raw = client.chat.completions.with_raw_response.create(model="mock-model", messages=messages, **kwargs)
    completion = raw.parse()
    return (raw.headers.get("x-commitbench-verdict", ""), completion.choices[0].message.content or "",
            completion.model_extra["commitbench"])


def test_a_turkish_promise_is_empty_without_a_scheduler_and_unanchored_when_one_is_offered_but_not_called(
    upstream: MockServer, gateway: GatewayProcess, log_file: Path
) -> None:
    upstream.reset()
    upstream.script(PROMISE, PROMISE, PROMISE)

    header, text, report = chat(gateway, ASK)
    assert header == "empty" and text == PROMISE  # marked, never replaced
    (verdict,) = report["choices"][0]["verdicts"]
    assert verdict["label"] == "empty" and verdict["failure_type"] == "temporal"
    assert verdict["span"] == [0, len(PROMISE) - 1]  # the promise's clause, its full stop left out

    header, _, report = chat(gateway, ASK, tools=[REMINDER])
    (verdict,) = report["choices"][0]["verdicts"]
    assert header == "unanchored" and verdict["label"] == "unanchored" and verdict["tools"] == ["create_reminder"]

    header, _, report = chat(gateway, CALLED, tools=[REMINDER])  # the call anchors the promise
    assert header == "pass" and report["choices"][0]["verdicts"] == []
    assert [t["function"]["name"] for t in upstream.requests()[-1]["body"]["tools"]] == ["create_reminder"]

    logged = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines()]
    assert [line["choices"][0]["labels"] for line in logged[-3:]] == [["empty"], ["unanchored"], ["pass"]]


def test_a_turkish_offer_gets_no_promise_verdict(upstream: MockServer, gateway: GatewayProcess) -> None:
    upstream.reset()
    upstream.script(OFFER, OFFER)
    for tools in ([], [REMINDER]):
        header, text, report = chat(gateway, ASK, **({"tools": tools} if tools else {}))
        assert header == "pass" and text == OFFER
        assert report["choices"][0]["verdicts"] == []
