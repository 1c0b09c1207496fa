"""Drills: a cache is untrusted input.

A cache is a file users copy, merge and share. An entry of the wrong shape is never taken as the model's
answer: in read-write mode its call is made again and the answer written over it (and said), in
replay-only mode it is a named error of the cell with its key, never scored. Tool arguments over the
bound are cached as the run keeps them (cut short, with the reason), so a replay plays the same trace.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from commitbench.cache import CallCache
from commitbench.config import CacheConfig, ExperimentConfig
from commitbench.llm import ModelErrorKind, parse_cache_entry, parse_completion
from commitbench.mock import MockServer
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.traces import TRACES_FILE, latest_traces, read_traces

FAST_RETRY = {"max_attempts": 2, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}


def chat_config(base_url: str, cache: Path, mode: str = "read_write", limit: int = 2) -> ExperimentConfig:
    return ExperimentConfig.model_validate({
        "name": "untrusted-cache", "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [{"name": "mock", "base_url": base_url, "api_key_env": None,
                    "settings": {"model": "mock-model", "timeout": 10.0}, "retry": FAST_RETRY}],
        "episodes": {"split": "test", "limit": limit}, "concurrency": 2,
        "cache": {"path": str(cache), "mode": mode},
    })


def poison(cache: Path, value: str) -> int:
    """Write ``value`` over every entry of ``cache`` (as `sqlite3 cache.sqlite "update entries set value=..."`)."""
    with sqlite3.connect(cache) as conn:
        return conn.execute("UPDATE entries SET value=?", (value,)).rowcount


# What differs between two plays of the same answers: times, and whether a call came from the cache.
VARYING = frozenset({"latency_s", "model_time_s", "cache_hit", "duration_s", "started_at"})


def comparable(trace: Any) -> dict[str, Any]:
    """A trace as JSON without what differs between two plays of the same answers (times, cache hits)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VARYING}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(trace.model_dump_json()))


POISONS = {
    "an empty object": "{}",
    "a server reply with a null message": '{"choices":[{"message":null}]}',
    "a list": "[1, 2]",
    "text that is not JSON": "not json {",
    "null": "null",
    "text that is a number": '{"model": "m", "text": 7, "tool_calls": [], "finish_reason": "stop", "usage": {}}',
    "a tool call without arguments": '{"model": "m", "text": null, "tool_calls": [{"id": "c", "name": "lookup"}], '
                                     '"finish_reason": "tool_calls", "usage": {}}',
}


@pytest.mark.parametrize("value", POISONS.values(), ids=list(POISONS))
def test_a_poisoned_entry_is_made_again_and_replaced_in_read_write_mode(
    tmp_path: Path, mock_server: MockServer, value: str
) -> None:
    cache = tmp_path / "cache.sqlite"
    first = run_experiment(chat_config(mock_server.base_url, cache), tmp_path / "first")
    assert first.status is RunStatus.COMPLETE and first.http_requests > 0
    entries = poison(cache, value)
    assert entries == first.http_requests

    again = run_experiment(chat_config(mock_server.base_url, cache), tmp_path / "again")
    assert again.status is RunStatus.COMPLETE and again.cells_failed == 0, again.failures
    # Never the poisoned answer: every call was made again, none counted as a hit or an error.
    assert again.http_requests == entries and again.cache_hits == 0 and not again.errors
    assert again.cache_replaced == entries and len(again.cache_replaced_keys) == min(5, entries)
    before = sorted((comparable(t) for t in latest_traces(tmp_path / "first")), key=lambda t: t["run_key"])
    after = sorted((comparable(t) for t in latest_traces(tmp_path / "again")), key=lambda t: t["run_key"])
    assert before == after
    # The entries were written over: each is a recorded completion again, and a replay takes them.
    with sqlite3.connect(cache) as conn:
        stored = [json.loads(v) for (v,) in conn.execute("SELECT value FROM entries")]
    assert len(stored) == entries and all(parse_cache_entry(v, fallback_model="m")[1] is None for v in stored)
    replay = run_experiment(chat_config(mock_server.base_url, cache, "replay_only"), tmp_path / "replay")
    assert replay.status is RunStatus.COMPLETE and replay.http_requests == 0 and replay.cache_hits == entries


@pytest.mark.parametrize("value", list(POISONS.values())[:2], ids=list(POISONS)[:2])
def test_a_poisoned_entry_is_a_named_error_of_the_cell_in_replay_mode(
    tmp_path: Path, mock_server: MockServer, value: str
) -> None:
    cache = tmp_path / "cache.sqlite"
    first = run_experiment(chat_config(mock_server.base_url, cache), tmp_path / "first")
    assert first.status is RunStatus.COMPLETE
    poison(cache, value)
    served = mock_server.stats().chat_completions
    replay = run_experiment(chat_config(mock_server.base_url, cache, "replay_only"), tmp_path / "replay")
    assert replay.status is RunStatus.INCOMPLETE and replay.cells_failed == 2 and replay.cells_done == 0
    assert replay.http_requests == 0 and mock_server.stats().chat_completions == served
    assert replay.errors == {"invalid_response": 2}
    traces = read_traces(tmp_path / "replay" / TRACES_FILE)
    with sqlite3.connect(cache) as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM entries")}
    for trace in traces:  # never scored: an infrastructure error, which every metric leaves out
        assert trace.infra_error is not None and trace.infra_error.startswith("invalid_response: cache entry ")
        named = trace.infra_error.split()[3]
        assert named in keys and "it is not a recorded completion" in trace.infra_error
    with sqlite3.connect(cache) as conn:  # replay-only never writes: the entries are as the user left them
        assert {v for (v,) in conn.execute("SELECT value FROM entries")} == {value}


def recorded(**fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"model": "m", "text": "hi", "reasoning": None, "tool_calls": [], "finish_reason": "stop",
                             "refusal": None, "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                                        "reasoning_tokens": 0}, "latency_s": 0.5}
    entry.update(fields)
    return entry


ENTRIES: dict[str, tuple[Any, str | None]] = {
    "a recorded answer": (recorded(), None),
    "a recorded tool call": (recorded(text=None, tool_calls=[{"id": "c1", "name": "lookup", "arguments": "{}"}]),
                             None),
    "an entry of the first cache version (no latency)": ({k: v for k, v in recorded().items() if k != "latency_s"},
                                                          None),
    "an empty object": ({}, "lacks model, text, tool_calls, finish_reason, usage"),
    "a server reply": ({"choices": [{"message": None}]}, "lacks model"),
    "not an object": ([], "not a recorded completion"),
    "text an object": (recorded(text={"a": 1}), "message.content is an object"),
    "reasoning a number": (recorded(reasoning=3), "message.reasoning is a number"),
    "tool_calls an object": (recorded(tool_calls={}), "tool_calls is not a list"),
    "a tool call of numbers": (recorded(tool_calls=[{"id": 1, "name": 2, "arguments": 3}]), "tool call 0"),
    "usage a list": (recorded(usage=[1]), "usage is not an object"),
    "model a number": (recorded(model=5), "model is a number"),
    "finish_reason an object": (recorded(finish_reason={}), "finish_reason is an object"),
    "a stored reason that is no text": (
        recorded(tool_calls=[{"id": "c", "name": "n", "arguments": "", "error": 5}]), "tool call 0"),
}


@pytest.mark.parametrize("entry,problem", ENTRIES.values(), ids=list(ENTRIES))
def test_an_entry_is_read_as_a_server_reply_is(entry: Any, problem: str | None) -> None:
    fields, error = parse_cache_entry(entry, fallback_model="fallback")
    if problem is None:
        assert error is None and fields["model"] == "m"
        return
    assert error is not None and error.kind is ModelErrorKind.INVALID_RESPONSE and problem in error.message, error


def test_a_recorded_completion_reads_back_as_the_reply_it_records() -> None:
    reply = {"model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "ok", "reasoning": "think", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}},
            {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "not json"}},
            {"id": "c3", "type": "function", "function": {"name": "", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 4, "completion_tokens_details": {"reasoning_tokens": 2}}}
    from commitbench.llm import ModelResponse

    fields, error = parse_completion(reply, fallback_model="x")
    assert error is None
    response = ModelResponse(**fields, cache_key="k")
    again, problem = parse_cache_entry(response.cache_payload(), fallback_model="x")
    assert problem is None
    assert ModelResponse(**again, cache_key="k") == response


def test_tool_arguments_over_the_bound_are_cached_cut_short_and_replay_the_same_trace(tmp_path: Path) -> None:
    from _raw_server import RawServer, completion, http_bytes

    huge = json.dumps({"query": "y" * 1_000_000})

    def handle(request: Any, conn: Any) -> None:
        messages = request.json()["messages"]
        if messages[-1]["role"] == "tool" and len(messages) > 12:
            message: dict[str, Any] = {"role": "assistant", "content": "Looked it up."}
        else:  # one lookup with 1 MB of arguments on nearly every call
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{len(messages)}", "type": "function", "function": {"name": "lookup", "arguments": huge}}]}
        conn.sendall(http_bytes(200, json.dumps(completion(message)).encode()))

    cache = tmp_path / "cache.sqlite"
    with RawServer(handle) as server:
        config = chat_config(server.base_url, cache, limit=1)
        live = run_experiment(config, tmp_path / "live")
    assert live.status is RunStatus.COMPLETE and live.http_requests >= 5, live.failures
    (trace,) = read_traces(tmp_path / "live" / TRACES_FILE)
    calls = [c for c in trace.tool_calls() if c.tool == "lookup"]
    assert len(calls) >= 5 and all(not c.ok and c.error_kind == "bad_arguments" for c in calls)
    # The cache holds what the run keeps: each call's arguments cut short, with the reason; never 1 MB.
    with CallCache(cache) as opened:
        assert len(opened) == live.http_requests
    size = cache.stat().st_size + sum(p.stat().st_size for p in tmp_path.glob("cache.sqlite-*"))
    assert size < 1_000_000, size  # at least five calls of 1 MB each: over 5 MB if they were kept whole
    with sqlite3.connect(cache) as conn:
        values = [json.loads(v) for (v,) in conn.execute("SELECT value FROM entries")]
    stored_calls = [c for v in values for c in v["tool_calls"]]
    assert stored_calls and all(c["over_bound"] is True and len(c["arguments"]) < 2000 and
                                "more than the" in c["error"] for c in stored_calls)
    # A replay plays the same trace: the same tool errors, the same calls, the same keys.
    replay = run_experiment(config.model_copy(update={"cache": CacheConfig(path=cache, mode="replay_only")}),
                            tmp_path / "replay")
    assert replay.status is RunStatus.COMPLETE and replay.http_requests == 0
    (again,) = read_traces(tmp_path / "replay" / TRACES_FILE)
    assert comparable(again) == comparable(trace)
