"""The commitment gateway end to end: the real ``openai`` client against ``commitbench gateway`` (a child
process on 127.0.0.1, port 0) in front of the project's mock server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _gateway_cases import CREATE_POST, SEED, SEED_CALLED, SEED_CLAIM

from commitbench.claimguard.guard import looks_like_write_claim
from commitbench.cli import main
from commitbench.gateway.server import GatewayProcess
from commitbench.llm import SESSION_HEADER
from commitbench.mock import FaultConfig, FaultKind, MockServer, ReplySpec, ToolCallSpec

pytestmark = pytest.mark.slow

REMIND = "I'll remind you tomorrow at 9 about the report."
LEDGER_TOKEN = "ledger-reader-token"
ASK = [{"role": "user", "content": "Remind me tomorrow at 9 to send the report."}]
REMINDER = {"type": "function", "function": {"name": "create_reminder", "description": "Create a reminder.",
                                              "parameters": {"type": "object", "properties": {}}}}
CALLED = [*ASK, {"role": "assistant", "content": None, "tool_calls": [{"id": "r1", "type": "function", "function": {
    "name": "create_reminder", "arguments": '{"remind_at": "2030-01-02T09:00:00", "message": "send the report"}'}}]},
          {"role": "tool", "tool_call_id": "r1", "content": '{"reminder_id": "rem-1"}'}]
KEY = "sk-test-secret-123"


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockServer]:
    with MockServer(streaming=True) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(upstream: MockServer) -> None:
    upstream.reset()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway")


def _gateway(upstream: MockServer, *args: str) -> Iterator[GatewayProcess]:
    process = GatewayProcess(["--upstream", upstream.base_url, "--upstream-timeout", "4", *args]).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def enforce(upstream: MockServer, files: Path) -> Iterator[GatewayProcess]:
    yield from _gateway(upstream, "--mode", "enforce", "--ledger", str(files / "ledger.db"),
                        "--log", str(files / "enforce.jsonl"), "--commitments-token", LEDGER_TOKEN)


@pytest.fixture(scope="module")
def observe(upstream: MockServer, files: Path) -> Iterator[GatewayProcess]:
    yield from _gateway(upstream, "--mode", "observe", "--max-request-bytes", "200000",
                        "--log", str(files / "observe.jsonl"))


def client(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, timeout=60)


def chat(gateway: GatewayProcess, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[str, Any, dict[str, Any]]:
    """(verdict header, the completion, its commitbench object)."""
    raw = client(gateway).chat.completions.with_raw_response.create(model="mock-model", messages=messages, **kwargs)
    completion = raw.parse()
    return raw.headers.get("x-commitbench-verdict", ""), completion, completion.model_extra["commitbench"]


def stream(gateway: GatewayProcess, messages: list[dict[str, Any]], **kwargs: Any
           ) -> tuple[str | None, str, dict[str, Any] | None, list[float]]:
    """(verdict header, the streamed text, the commitbench object of the last event, content arrival times)."""
    text, report, times = "", None, []
    with client(gateway).chat.completions.with_streaming_response.create(
        model="mock-model", messages=messages, stream=True, **kwargs
    ) as response:
        header = response.headers.get("x-commitbench-verdict")
        for chunk in response.parse():
            if chunk.choices:
                piece = chunk.choices[0].delta.content or ""
                if piece:
                    times.append(time.monotonic())
                text += piece
            elif chunk.model_extra and "commitbench" in chunk.model_extra:
                report = chunk.model_extra["commitbench"]
    return header, text, report, times


# ------------------------------------------------------------------------------------------ the seed's case
def test_the_seed_case_is_replaced_and_marked_streamed_and_not(upstream: MockServer, enforce: GatewayProcess) -> None:
    honest = "No action ran for this, so it has not happened yet."  # both of its sentences claim a write
    upstream.script(SEED_CLAIM)
    header, completion, report = chat(enforce, SEED)
    assert header == "false_claim" and completion.choices[0].message.content == honest
    verdicts = report["choices"][0]["verdicts"]
    assert report["choices"][0]["action"] == "replaced" and [v["span"][0] for v in verdicts] == [7, 98]
    assert verdicts[0]["text"].startswith("created the draft post")
    assert looks_like_write_claim(completion.choices[0].message.content) is None
    upstream.script(SEED_CLAIM)
    header, text, report, _ = stream(enforce, SEED)
    assert (header, text) == ("false_claim", honest) and report is not None and report["verdict"] == "false_claim"
    assert upstream.stats().chat_completions == 2  # replaced without another upstream call

    upstream.script(SEED_CLAIM, SEED_CLAIM)
    header, completion, report = chat(enforce, SEED_CALLED, tools=[CREATE_POST])
    assert (header, completion.choices[0].message.content) == ("pass", SEED_CLAIM)
    assert report["choices"][0]["action"] == "none"
    header, text, report, _ = stream(enforce, SEED_CALLED, tools=[CREATE_POST])
    assert (header, text) == ("pass", SEED_CLAIM) and report is not None and report["verdict"] == "pass"


def test_the_sessions_next_request_gets_the_note_at_the_end_of_its_prompt(
    upstream: MockServer, enforce: GatewayProcess
) -> None:
    upstream.script(SEED_CLAIM, "Which project?", "Fine.")
    chat(enforce, SEED, user="ayse")
    follow = [*SEED, {"role": "assistant", "content": "..."}, {"role": "user", "content": "Peki, şimdi oluştur."}]
    chat(enforce, follow, user="ayse")
    chat(enforce, follow, user="ayse")  # the note is given once
    sent = [r["body"]["messages"] for r in upstream.requests()]
    assert sent[1][:-1] == follow[:-1]  # the prefix is untouched: the upstream's prefix cache still holds it
    assert sent[1][-1]["content"].startswith("Peki, şimdi oluştur.\n\n[Note from the runtime]")
    assert "no tool executed" in sent[1][-1]["content"] and sent[2] == follow
    upstream.script(SEED_CLAIM, "ok", "ok")
    enforce_client = client(enforce)
    # The session header as the harness's client spells it; the gateway reads it in any case.
    enforce_client.chat.completions.create(model="m", messages=SEED, extra_headers={SESSION_HEADER: "tab-7"})
    enforce_client.chat.completions.create(model="m", messages=ASK, extra_headers={"x-session-id": "tab-8"})
    assert upstream.requests()[-1]["body"]["messages"] == ASK  # another session gets no note
    enforce_client.chat.completions.create(model="m", messages=ASK, extra_headers={"X-SESSION-ID": "tab-7"})
    assert "[Note from the runtime]" in upstream.requests()[-1]["body"]["messages"][-1]["content"]


# ------------------------------------------------------------------------------------------ promises
def test_a_promise_is_empty_unanchored_or_anchored_and_recorded_once(
    upstream: MockServer, enforce: GatewayProcess, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream.script(REMIND, REMIND, REMIND, REMIND)
    header, completion, report = chat(enforce, ASK)
    assert header == "empty" and completion.choices[0].message.content == REMIND  # marked, not replaced
    assert report["choices"][0]["verdicts"][0]["failure_type"] == "temporal"
    header, _, report = chat(enforce, ASK, tools=[REMINDER])
    assert header == "unanchored" and report["choices"][0]["verdicts"][0]["tools"] == ["create_reminder"]
    header, _, report = chat(enforce, CALLED, tools=[REMINDER], user="sarah")
    assert header == "pass" and len(report["recorded"]) == 1
    _, _, retried = chat(enforce, CALLED, tools=[REMINDER], user="sarah")  # a client retry
    assert retried["recorded"] == report["recorded"]

    assert main(["ledger", "--db", str(files / "ledger.db"), "due"]) == 0
    listed = capsys.readouterr().out
    assert "remind you tomorrow at 9 about the report" in listed and "2030-01-02 09:00Z" in listed
    assert "mock-model -> sarah" in listed and listed.count("sarah") == 1
    token = {"Authorization": f"Bearer {LEDGER_TOKEN}"}
    owed = httpx2.get(enforce.base_url + "/commitments", params={"user": "sarah"}, headers=token, timeout=30).json()
    assert [(i["action"], i["due_at"]) for i in owed["data"]] == [
        ("remind you tomorrow at 9 about the report", "2030-01-02T09:00:00+00:00")]
    assert httpx2.get(enforce.base_url + "/commitments", headers=token, timeout=30).status_code == 400


def test_every_choice_is_checked(upstream: MockServer, enforce: GatewayProcess) -> None:
    upstream.script(REMIND)
    header, _completion, report = chat(enforce, ASK, n=2)
    assert header == "empty" and [c["labels"] for c in report["choices"]] == [["empty"], ["empty"]]
    upstream.script(ReplySpec(text=REMIND, tool_calls=[ToolCallSpec(name="create_reminder", arguments={})]))
    header, _, _ = chat(enforce, ASK, tools=[REMINDER])  # the reply's own call anchors its promise
    assert header == "pass"


# ------------------------------------------------------------------------------------------ observe streams
def test_an_observed_stream_passes_through_as_it_comes_and_ends_with_the_verdicts(
    upstream: MockServer, observe: GatewayProcess
) -> None:
    upstream.script(ReplySpec(text=REMIND + " " + REMIND, chunk_delay_ms=250))
    header, text, report, times = stream(observe, ASK)
    assert header is None and text == REMIND + " " + REMIND
    assert report is not None and report["verdict"] == "empty" and report["choices"][0]["action"] == "marked"
    assert times[-1] - times[0] > 1.0  # the pieces came as the upstream sent them, not all at the end


# ------------------------------------------------------------------------------------------ faults and bounds
def test_upstream_faults_get_the_documented_answers_and_the_gateway_keeps_serving(
    upstream: MockServer, observe: GatewayProcess
) -> None:
    gateway = client(observe)
    upstream.set_faults(FaultConfig(sequence=[FaultKind.HTTP_500], timeout_hold_s=30))
    with pytest.raises(openai.InternalServerError) as error:
        gateway.chat.completions.create(model="m", messages=ASK)
    assert error.value.status_code == 500 and "injected server error" in str(error.value)

    upstream.set_faults(FaultConfig(sequence=[FaultKind.TIMEOUT], timeout_hold_s=30))
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as error:
        gateway.chat.completions.create(model="m", messages=ASK)
    assert error.value.status_code == 504 and "did not answer within 4 s" in str(error.value)
    assert time.monotonic() - started < 25

    upstream.set_faults(FaultConfig(sequence=[FaultKind.TRUNCATED_BODY]))
    with pytest.raises(openai.APIStatusError) as error:
        gateway.chat.completions.create(model="m", messages=ASK)
    assert error.value.status_code == 502 and "not JSON" in str(error.value)

    huge = "word " * 200_000  # a 1 MB reply: passed on as it came, too long to check
    upstream.script(huge)
    header, completion, report = chat(observe, ASK)
    assert header == "check_error" and completion.choices[0].message.content == huge
    assert "1,000,000 characters long" in report["choices"][0]["verdicts"][0]["reason"]

    upstream.script(REMIND)
    assert chat(observe, ASK)[0] == "empty"  # still serving


@pytest.mark.parametrize(("body", "problem"), [
    (b"x" * 300_000, "more than the limit of 200,000"),
    (b'{"model": "m", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested deeper than 64"),
    (b'{"model": "m\xff"}', "not UTF-8"),
    (b'{"model": ', "not JSON"),
])
def test_a_bad_request_gets_a_400_naming_the_problem(observe: GatewayProcess, body: bytes, problem: str) -> None:
    response = httpx2.post(observe.base_url + "/chat/completions", content=body, timeout=30,
                           headers={"content-type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert problem in error["message"] and error["type"] == "invalid_request_error" and error["code"] == 400


def test_other_paths_pass_through_and_no_key_is_logged(
    upstream: MockServer, observe: GatewayProcess, files: Path
) -> None:
    models = client(observe).models.list()
    assert [m.id for m in models.data] == ["mock-model"]
    stats = httpx2.get(observe.base_url.removesuffix("/v1") + "/stats", timeout=30)
    assert stats.status_code == 404  # the upstream's own routes are not exposed (--pass-path adds them)
    upstream.script("Sure.")
    chat(observe, ASK, user="kim")
    assert upstream.requests()[-1]["headers"]["authorization"] == f"Bearer {KEY}"  # it went upstream
    log = (files / "observe.jsonl").read_text()
    assert KEY not in log and "authorization" not in log.lower() and '"kim"' not in log
    assert "Remind me tomorrow" not in log  # no message text without --log-text


# ------------------------------------------------------------------------------------------ rewrite, LLM detector
def test_rewrite_mode_returns_the_checked_rewrite_and_logs_the_original(upstream: MockServer, files: Path) -> None:
    honest = "I can't set reminders. Put one in your phone's calendar for tomorrow at 9."
    log = files / "rewrite.jsonl"
    for gateway in _gateway(upstream, "--mode", "rewrite", "--log", str(log), "--log-text"):
        upstream.script(REMIND, honest)
        header, completion, report = chat(gateway, ASK)
        assert header == "empty" and completion.choices[0].message.content == honest
        assert report["choices"][0]["action"] == "rewritten" and report["choices"][0]["rewrite"]["labels"] == ["pass"]
        rewrite = upstream.requests()[-1]["body"]
        assert "tools" not in rewrite and REMIND in rewrite["messages"][0]["content"]
        upstream.script(SEED_CLAIM, SEED_CLAIM)  # a rewrite that claims again is replaced
        header, text, report, _ = stream(gateway, SEED)
        assert header == "false_claim" and text == "No action ran for this, so it has not happened yet."
        assert report is not None and report["choices"][0]["action"] == "rewritten_then_replaced"
    record = json.loads(log.read_text().splitlines()[0])
    assert record["choices"][0]["text"] == {"reply": REMIND, "sent": honest} and record["user"] == ASK[0]["content"]


def test_the_llm_detector_is_used_when_given_and_a_failing_one_marks_check_error(
    upstream: MockServer, files: Path
) -> None:
    answer = {"commitments": [{"span": "Noted.", "action": "follow up", "performer": "self",
                               "trigger_type": "time", "time_expression": "tomorrow", "required_capabilities": [],
                               "is_offer": False, "confidence": 0.9}]}
    with MockServer() as judge:
        for gateway in _gateway(upstream, "--judge-model", "judge", "--judge-base-url", judge.base_url,
                                "--judge-cache", str(files / "judge.sqlite")):
            judge.script(json.dumps(answer))
            upstream.script("Noted.")
            header, completion, report = chat(gateway, ASK)
            assert header == "empty" and report["detector"] == "llm:judge"
            upstream.script("Noted.")
            assert chat(gateway, ASK)[0] == "empty" and judge.stats().chat_completions == 1  # cached
            judge.script("not json", "still not", "no")
            upstream.script("Something else.")
            header, completion, report = chat(gateway, ASK)
            assert header == "check_error" and completion.choices[0].message.content == "Something else."
            assert "no usable output" in report["choices"][0]["verdicts"][0]["reason"]


def test_the_report_of_a_log(enforce: GatewayProcess, files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gateway", "report", str(files / "enforce.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "false claims" in out and "empty commitments" in out and "unanchored" in out
    assert main(["gateway", "report", str(files / "enforce.jsonl"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["replies"] >= 1 and "false_claims" in data["rates"]
    assert main(["gateway", "report", str(files / "missing.jsonl")]) == 2
    assert main(["gateway"]) == 2  # no --upstream
