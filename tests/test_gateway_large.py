"""Large chat requests, read in the gateway's worker process: the same reading as a small request's (turn,
deployment, digest, nudge, refusals), checked through a real socket, and a worker that ends with the gateway."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _gateway_cases import CREATE_POST, SEED, SEED_CALLED, SEED_CLAIM

from commitbench.gateway.actions import with_nudge
from commitbench.gateway.bodies import RequestProblem, parse_request
from commitbench.gateway.catalog import load_catalog
from commitbench.gateway.largework import BULKY_FIELDS, LARGE_BYTES, read_request
from commitbench.gateway.server import GatewayProcess
from commitbench.gateway.turn import extract_turn, turn_digest
from commitbench.mock import MockServer

REMINDER = {"type": "function", "function": {"name": "create_reminder", "description": "Create a reminder.",
                                              "parameters": {"type": "object", "properties": {}}}}


def padding_tools(count: int = 300, chars: int = 1_200) -> list[dict[str, Any]]:
    """Read-only tools with long descriptions: enough of them make a request large."""
    return [{"type": "function", "function": {
        "name": f"lookup_{i}", "description": f"Look up record {i}. " + "r" * chars,
        "parameters": {"type": "object", "properties": {}}}} for i in range(count)]


def large(messages: list[dict[str, Any]], tools: list[dict[str, Any]] = (), **extra: Any) -> dict[str, Any]:
    request = {"model": "mock-model", "messages": messages, "tools": [*tools, *padding_tools()], **extra}
    assert len(json.dumps(request).encode()) > LARGE_BYTES
    return request


# ------------------------------------------------------------------------------------------ in process
@pytest.mark.parametrize("creditor_header", [None, "tab-4"])
@pytest.mark.parametrize("user", [None, "ayse"])
def test_the_worker_reads_a_request_as_the_chat_route_does(
    creditor_header: str | None, user: str | None, tmp_path: Path
) -> None:
    catalog = load_catalog()
    request = large(SEED_CALLED, [CREATE_POST, REMINDER], **({"user": user} if user else {}))
    body = json.dumps(request).encode()
    read = read_request(body, 64, creditor_header, approval=True, catalog=catalog)
    data = parse_request(body, 64)
    creditor = user or creditor_header or ""
    assert read.digest == turn_digest(data, creditor) and read.turn_error is None and read.body_path is None
    assert read.turn == extract_turn(data, True)
    assert read.deployment == catalog.deployment(extract_turn(data, True).offered)
    assert read.data == {k: v for k, v in data.items() if k not in BULKY_FIELDS} and "messages" not in read.data
    spooled = tmp_path / "request.json"
    spooled.write_bytes(body)
    assert read_request(spooled, 64, creditor_header, approval=True, catalog=catalog) == read
    nudged = read_request(spooled, 64, creditor_header, approval=False, nudge="NOTE", catalog=catalog)
    assert nudged.body_path is not None and Path(nudged.body_path).parent == tmp_path
    assert json.loads(Path(nudged.body_path).read_bytes()) == with_nudge(data, "NOTE")
    assert nudged.digest == turn_digest(with_nudge(data, "NOTE"), creditor)
    assert nudged.turn == extract_turn(with_nudge(data, "NOTE"), False)


@pytest.mark.parametrize(("body", "problem"), [
    (b'{"model": "m", "messages": "' + b"a" * 300_000 + b'\xff"}', "not UTF-8"),
    (b"[" + b"1," * 200_000 + b"1]", "must be a JSON object, not list"),
    (b'{"model": "m", "messages": "' + b"a" * 300_000, "not JSON"),
    (b'{"model": "m", "pad": "' + b"a" * 300_000 + b'", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}",
     "nested deeper than 64"),
])
def test_the_worker_refuses_what_the_chat_route_refuses(body: bytes, problem: str) -> None:
    with pytest.raises(RequestProblem) as refused:
        read_request(body, 64, None, False, catalog=load_catalog())
    assert problem in str(refused.value)
    with pytest.raises(RequestProblem) as small_path:
        parse_request(body, 64)
    assert str(small_path.value) == str(refused.value)


# ------------------------------------------------------------------------------------------ through a socket
@pytest.fixture(scope="module")
def upstream() -> Iterator[MockServer]:
    with MockServer(streaming=True) as server:
        yield server


@pytest.fixture
def enforce(upstream: MockServer, tmp_path: Path) -> Iterator[GatewayProcess]:
    upstream.reset()
    process = GatewayProcess(["--upstream", upstream.base_url, "--mode", "enforce", "--log",
                              str(tmp_path / "log.jsonl"), "--log-text"]).start()
    try:
        yield process
    finally:
        process.stop()


def chat(gateway: GatewayProcess, request: dict[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="k", max_retries=0, timeout=60)
    raw = client.chat.completions.with_raw_response.create(**request)
    completion = raw.parse()
    return raw.headers.get("x-commitbench-verdict", ""), completion, completion.model_extra["commitbench"]


@pytest.mark.slow
def test_a_large_request_is_checked_nudged_and_logged_as_a_small_one(
    upstream: MockServer, enforce: GatewayProcess, tmp_path: Path
) -> None:
    honest = "No action ran for this, so it has not happened yet."
    upstream.script(SEED_CLAIM, SEED_CLAIM, "Which project?")
    header, completion, report = chat(enforce, large(SEED, user="ayse"))
    assert header == "false_claim" and completion.choices[0].message.content == honest
    assert report["choices"][0]["action"] == "replaced"
    header, completion, report = chat(enforce, large(SEED_CALLED, [CREATE_POST]))
    assert (header, completion.choices[0].message.content) == ("pass", SEED_CLAIM)
    # the session's next request is large too: the note goes at the end of its prompt, in the worker
    follow = [*SEED, {"role": "assistant", "content": "..."}, {"role": "user", "content": "Peki, şimdi oluştur."}]
    chat(enforce, large(follow, user="ayse"))
    sent = upstream.requests()[-1]["body"]
    assert sent["messages"][:-1] == follow[:-1] and len(sent["tools"]) == 300
    assert sent["messages"][-1]["content"].startswith("Peki, şimdi oluştur.\n\n[Note from the runtime]")
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [line["user"] for line in lines] == ["Evet, oluştur.", "Evet, oluştur.", sent["messages"][-1]["content"]]
    assert [line["nudged"] for line in lines] == [False, False, True]
    stream_client = openai.OpenAI(base_url=enforce.base_url, api_key="k", max_retries=0, timeout=60)
    upstream.script(SEED_CLAIM)
    with stream_client.chat.completions.with_streaming_response.create(stream=True, **large(SEED)) as response:
        assert response.headers["x-commitbench-verdict"] == "false_claim"
        text = "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
    assert text == honest


@pytest.mark.slow
def test_a_large_bad_body_gets_the_400_of_a_small_one(enforce: GatewayProcess) -> None:
    response = httpx2.post(enforce.base_url + "/chat/completions", timeout=60,
                           content=b'{"model": "m", "messages": "' + b"a" * 300_000,
                           headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert "not JSON" in response.json()["error"]["message"]


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_the_worker_starts_at_the_first_large_request_and_ends_with_the_gateway(
    upstream: MockServer, tmp_path: Path
) -> None:
    upstream.reset()
    upstream.script("Your 3pm is free.", "Your 3pm is free.")
    scratch = tmp_path / "tmp"  # the gateway's temporary files: SIGKILL leaves its spool folder behind
    scratch.mkdir()
    gateway = GatewayProcess(["--upstream", upstream.base_url, "--mode", "enforce"],
                             env={**os.environ, "TMPDIR": str(scratch)}).start()
    try:
        chat(gateway, {"model": "mock-model", "messages": SEED})
        assert _children(gateway.pid) == set()  # no large request yet: no worker
        chat(gateway, large(SEED))
        workers = _children(gateway.pid)
        assert len(workers) >= 1
        os.kill(gateway.pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while any(Path(f"/proc/{w}").exists() and "(Z)" not in _state(w) for w in workers):
            assert time.monotonic() < deadline, f"the workers {workers} outlived the gateway"
            time.sleep(0.05)
    finally:
        gateway.stop()
    (spool,) = scratch.iterdir()  # the spool, with no request left in it: each is removed once it is read
    assert spool.name.startswith("commitbench-gateway-") and list(spool.iterdir()) == []


def _state(pid: int) -> str:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return "(gone)"
    return f"({fields[0]})"


@pytest.mark.slow
def test_a_large_request_is_rewritten_and_observed_as_a_small_one(upstream: MockServer, tmp_path: Path) -> None:
    honest = "I can't set reminders. Put one in your phone's calendar for tomorrow at 9."
    remind = "I'll remind you tomorrow at 9 about the report."
    ask = [{"role": "user", "content": "Remind me tomorrow at 9 to send the report."}]
    upstream.reset()
    process = GatewayProcess(["--upstream", upstream.base_url, "--mode", "rewrite"]).start()
    try:
        upstream.script(remind, honest)
        header, completion, report = chat(process, large(ask))
        assert header == "empty" and completion.choices[0].message.content == honest
        assert report["choices"][0]["action"] == "rewritten"
        rewrite = upstream.requests()[-1]["body"]  # the rewrite request: the model's name from the worker's fields
        assert rewrite["model"] == "mock-model" and "tools" not in rewrite
        assert "lookup_0" in rewrite["messages"][0]["content"]  # the card lists the large request's tools
    finally:
        process.stop()
    process = GatewayProcess(["--upstream", upstream.base_url, "--mode", "observe"]).start()
    try:
        upstream.script(SEED_CLAIM)
        client = openai.OpenAI(base_url=process.base_url, api_key="k", max_retries=0, timeout=60)
        report = None
        text = ""
        with client.chat.completions.with_streaming_response.create(stream=True, **large(SEED)) as response:
            for chunk in response.parse():
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                elif chunk.model_extra and "commitbench" in chunk.model_extra:
                    report = chunk.model_extra["commitbench"]
        assert text == SEED_CLAIM  # observed: passed on as it came
        assert report is not None and report["verdict"] == "false_claim"
    finally:
        process.stop()
