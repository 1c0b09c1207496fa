"""The gateway's checks as a LiteLLM proxy guardrail: a real LiteLLM proxy in front of the mock server, driven by
the ``openai`` client. LiteLLM is heavy and pins versions of its own, so it is not in the dev extra: the test runs
where it is installed (``pip install -e '.[litellm]'``, see docs/gateway.md) and is skipped, saying so, elsewhere."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from commitbench.mock import MockServer
from commitbench.processes import die_with_parent

pytest.importorskip("litellm", reason="LiteLLM is not installed (the [litellm] extra, not part of dev: see "
                    "docs/gateway.md); the guardrail's end-to-end test needs a real LiteLLM proxy")

pytestmark = pytest.mark.slow

MASTER_KEY = "sk-" + "0123456789abcdef" * 3
CLAIM = 'I have created the draft post titled "QA 3" in the Acme project.'
SEED = [{"role": "user", "content": "Create a draft post titled QA 3 in Acme"},
        {"role": "assistant", "content": "Shall I create the draft post 'QA 3' in the Acme project?"},
        {"role": "user", "content": "Evet, oluştur."}]
POST_TOOL = {"type": "function", "function": {"name": "create_post", "description": "Create a draft post.",
                                               "parameters": {"type": "object", "properties": {}}}}
CALLED = [*SEED, {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "create_post", "arguments": '{"title": "QA 3"}'}}]},
          {"role": "tool", "tool_call_id": "c1", "content": '{"id": 41}'}]
REMIND = "I'll remind you tomorrow at 9 about the report."
CORRECTED = "No action ran for this, so it has not happened yet."  # what enforce says instead of CLAIM


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockServer, str, Path]]:
    folder = tmp_path_factory.mktemp("litellm")
    log = folder / "gateway.jsonl"
    with MockServer(streaming=True) as upstream:
        config = folder / "config.yaml"
        config.write_text(
            "model_list:\n  - model_name: mock-model\n    litellm_params:\n      model: openai/mock-model\n"
            f"      api_base: {upstream.base_url}\n      api_key: sk-upstream\n"
            f"general_settings:\n  master_key: {MASTER_KEY}\n"
            "guardrails:\n  - guardrail_name: commitbench\n    litellm_params:\n"
            "      guardrail: commitbench.gateway.litellm.CommitmentGuardrail\n"
            "      mode: [pre_call, post_call]\n      default_on: true\n      gateway_mode: enforce\n"
            f"      log: {log}\n      ledger: {folder / 'ledger.db'}\n"
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        environment = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        command = [str(Path(sys.executable).parent / "litellm"), "--config", str(config), "--host", "127.0.0.1",
                   "--port", str(port)]
        output = (folder / "proxy.log").open("w")
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=environment,
                                   preexec_fn=die_with_parent())
        base = f"http://127.0.0.1:{port}/v1"
        try:
            client = openai.OpenAI(base_url=base, api_key=MASTER_KEY, max_retries=0, timeout=30)
            deadline = time.monotonic() + 240
            while True:
                try:
                    client.models.list()
                    break
                except openai.APIError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        pytest.fail(f"the LiteLLM proxy did not start: {(folder / 'proxy.log').read_text()[-3000:]}")
                    time.sleep(1)
            yield upstream, base, log
        finally:
            process.terminate()
            process.wait(30)
            output.close()


def chat(base: str, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[str | None, Any]:
    client = openai.OpenAI(base_url=base, api_key=MASTER_KEY, max_retries=0, timeout=60)
    raw = client.chat.completions.with_raw_response.create(model="mock-model", messages=messages, **kwargs)
    return raw.headers.get("x-commitbench-verdict"), raw.parse()


def test_a_litellm_proxy_runs_the_gateways_checks_as_a_guardrail(proxy: tuple[MockServer, str, Path]) -> None:
    upstream, base, log = proxy
    upstream.script(CLAIM)
    header, completion = chat(base, SEED, user="u1", tools=[POST_TOOL])
    assert header == "false_claim" and completion.choices[0].message.content == CORRECTED
    report = completion.model_extra["commitbench"]
    assert report["choices"][0]["action"] == "replaced"
    # what LiteLLM hands the guardrail: the request's messages, tools and user, as the proxy received them
    assert {"messages", "tools", "user", "model"} <= set(report["request_keys"])

    upstream.script("Which title?")
    chat(base, SEED, user="u1")
    assert upstream.requests()[-1]["body"]["messages"][-1]["content"].endswith(
        "Answer in the user's language.")  # the session's next prompt carries the note at its end

    upstream.script(CLAIM)  # the tool call and its result reach the guardrail: the same claim passes
    header, completion = chat(base, CALLED, tools=[POST_TOOL])
    assert header == "pass" and completion.choices[0].message.content == CLAIM

    upstream.script(REMIND)
    header, completion = chat(base, [{"role": "user", "content": "Remind me tomorrow at 9."}])
    assert header == "empty" and completion.choices[0].message.content == REMIND

    upstream.script(REMIND)
    client = openai.OpenAI(base_url=base, api_key=MASTER_KEY, max_retries=0, timeout=60)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
        model="mock-model", messages=[{"role": "user", "content": "Remind me tomorrow at 9."}], stream=True)
        if chunk.choices)
    assert text == REMIND  # streamed replies pass through; the guardrail checks them when they end
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(json.loads(line)["stream"] for line in log.read_text().splitlines()):
        time.sleep(0.2)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["choices"][0]["labels"] for r in records if r["stream"]] == [["empty"]]
    assert MASTER_KEY not in log.read_text()


def test_a_streamed_false_claim_is_held_and_replaced_and_logged_as_it_went_out(
    proxy: tuple[MockServer, str, Path]
) -> None:
    upstream, base, log = proxy
    before = len(log.read_text().splitlines()) if log.exists() else 0
    upstream.script(CLAIM + " Your 4pm with Tom is still on.")
    client = openai.OpenAI(base_url=base, api_key=MASTER_KEY, max_retries=0, timeout=60)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
        model="mock-model", messages=SEED, tools=[POST_TOOL], stream=True) if chunk.choices)
    assert text == CORRECTED + " Your 4pm with Tom is still on."  # the true sentence stays
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(log.read_text().splitlines()) <= before:
        time.sleep(0.2)
    record = json.loads(log.read_text().splitlines()[before])
    assert record["stream"] and record["choices"][0]["action"] == "replaced"
    assert record["choices"][0]["labels"] == ["false_claim"]
