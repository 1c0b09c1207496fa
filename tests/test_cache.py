"""The call cache: canonical keys, modes, persistence of statistics, concurrent writers, CLI."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitbench import jsoncodec
from commitbench.cache import (
    CacheMiss,
    CacheMode,
    CallCache,
    cache_key,
    canonical_json,
    describe_cache,
)
from commitbench.cli import main as cli_main
from commitbench.llm import ModelSettings

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Book room A."}]
IDENTITY = {"model": "qwen", "sampling": {"temperature": 0.0, "seed": 1}, "extra_body": {}}


# ---------------------------------------------------------------- canonical JSON and keys
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": [1, {"d": 2, "c": 3}]}, '{"a":[1,{"c":3,"d":2}],"b":1}'),
        ({"text": "Çalışma günü ✓"}, '{"text":"Çalışma günü ✓"}'),
        ([1.5, None, True, "x y"], '[1.5,null,true,"x y"]'),
    ],
)
def test_canonical_json(value: Any, expected: str) -> None:
    assert canonical_json(value) == expected


@pytest.mark.parametrize("bad", [math.nan, {"when": object()}, {1, 2}])
def test_canonical_json_rejects_values_that_are_not_plain_json(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(bad)


# Keys written by earlier versions of the harness: a cache filled then must be read by this one.
KEPT_KEYS = [
    (
        {"model": "qwen", "sampling": {"temperature": 0.7, "top_p": 1e-05, "seed": 1},
         "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
        [
            {"role": "system", "content": 'Be brief. Ünïcode ✓ 😀 "quoted" \\ back\nline\x01'},
            {"role": "user", "content": "Book room A at 0.00001 past e-5."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call00001", "type": "function", "function": {"name": "lookup", "arguments": '{"query": "x"}'}}
            ]},
        ],
        [{"type": "function", "function": {"name": "lookup", "parameters": {
            "type": "object", "properties": {"query": {"type": "string", "minimum": 2.5e-07}}}}}],
        {"tool_choice": "required", "temperature": 0.0},
        3,
        "861b2cdf96b485e0181fa6832de336c772903312ce54abbecf32c36fda31b143",
    ),
    (
        {"model": "m", "sampling": {"temperature": 0.0}, "extra_body": {}}, [{"role": "user", "content": "hi"}],
        None, None, 0, "bcd7d35ff0107ba469bbd07ca5c4e5c4092574ad98eff3e5da006acd6fad5439",
    ),
]


@pytest.mark.parametrize(("identity", "messages", "tools", "options", "sample", "key"), KEPT_KEYS)
def test_keys_of_earlier_versions_are_kept(identity: Any, messages: Any, tools: Any, options: Any, sample: int,
                                           key: str) -> None:
    assert cache_key(identity, messages, tools=tools, options=options, sample_index=sample) == key


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-05, -2.5e-07, 9.99e-05, 1e-09, 1e-10, 0.0001, 1e16, 1.5e-300, -0.0]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(JSON_VALUES)
def test_fast_canonical_json_is_the_canonical_json_byte_for_byte(value: Any) -> None:
    try:
        expected = canonical_json(value).encode("utf-8")
    except (TypeError, ValueError):  # a lone surrogate cannot be UTF-8: refused both ways
        with pytest.raises((TypeError, ValueError)):
            jsoncodec.canonical(value)
        return
    assert jsoncodec.canonical(value) == expected


@pytest.mark.parametrize("value", [{1: "a", 2: "b"}, [2**64, -(2**63) - 1], {"x": 12345678901234567890}])
def test_fast_canonical_json_writes_what_orjson_cannot_as_json_does(value: Any) -> None:
    assert jsoncodec.canonical(value) == canonical_json(value).encode("utf-8")


@pytest.mark.parametrize("bad", [{"when": object()}, {1, 2}, "\udc80", math.inf])
def test_fast_canonical_json_refuses_what_the_canonical_json_refuses(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(bad).encode("utf-8")
    if bad is math.inf:  # orjson writes a non-finite float as null (see jsoncodec.canonical)
        assert jsoncodec.canonical(bad) == b"null"
        return
    with pytest.raises((TypeError, ValueError)):
        jsoncodec.canonical(bad)


def test_key_is_independent_of_dict_order() -> None:
    reordered_messages = [{"content": m["content"], "role": m["role"]} for m in MESSAGES]
    reordered_identity = {"extra_body": {}, "sampling": {"seed": 1, "temperature": 0.0}, "model": "qwen"}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    tools_reordered = [
        {"function": {"parameters": {"properties": {}, "type": "object"}, "name": "f"}, "type": "function"}
    ]
    assert cache_key(IDENTITY, MESSAGES, tools=tools) == cache_key(
        reordered_identity, reordered_messages, tools=tools_reordered
    )


@pytest.mark.parametrize(
    "change",
    [
        {"messages": [*MESSAGES, {"role": "user", "content": "and B"}]},
        {"identity": {**IDENTITY, "model": "llama"}},
        {"identity": {**IDENTITY, "sampling": {"temperature": 0.7, "seed": 1}}},
        {"identity": {**IDENTITY, "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"options": {"tool_choice": "required"}},
        {"options": {"response_format": {"type": "json_object"}}},
        {"sample_index": 1},
    ],
)
def test_everything_that_changes_the_output_changes_the_key(change: dict[str, Any]) -> None:
    base: dict[str, Any] = {"identity": IDENTITY, "messages": MESSAGES}
    changed = {**base, **change}
    identity, messages = changed.pop("identity"), changed.pop("messages")
    assert cache_key(IDENTITY, MESSAGES) != cache_key(identity, messages, **changed)


def test_endpoint_url_key_and_timeout_are_not_part_of_the_identity() -> None:
    local = ModelSettings(model="qwen", base_url="http://127.0.0.1:8000/v1", api_key_env=None, timeout=5)
    hosted = ModelSettings(model="qwen", base_url="https://router.example/v1", api_key_env="SECRET_KEY", timeout=99)
    assert local.identity() == hosted.identity()
    assert "base_url" not in json.dumps(local.identity())
    assert cache_key(local.identity(), MESSAGES) == cache_key(hosted.identity(), MESSAGES)


def test_key_is_a_sha256_hex_digest() -> None:
    key = cache_key(IDENTITY, MESSAGES)
    assert len(key) == 64 and int(key, 16) >= 0


# ---------------------------------------------------------------- storage and modes
def test_put_then_get_and_first_write_wins(tmp_path: Path) -> None:
    with CallCache(tmp_path / "c.sqlite") as cache:
        assert cache.get("k1", "qwen") is None
        assert cache.put("k1", "qwen", {"text": "first"}) is True
        assert cache.put("k1", "qwen", {"text": "second"}) is False
        assert cache.get("k1", "qwen") == {"text": "first"}
        assert len(cache) == 1
        assert cache.stats.model_dump() == {"hits": 1, "misses": 1, "writes": 1}
    with CallCache(tmp_path / "c.sqlite") as reopened:
        assert reopened.get("k1", "qwen") == {"text": "first"}


def test_database_uses_wal_and_stores_no_endpoint(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with CallCache(path) as cache:
        cache.put("k", "qwen", {"text": "hi"})
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    columns = {row[1] for row in conn.execute("PRAGMA table_info(entries)")}
    assert columns == {"key", "model", "created_at", "value"}
    conn.close()


def test_off_mode_touches_nothing(tmp_path: Path) -> None:
    path = tmp_path / "never.sqlite"
    cache = CallCache(path, CacheMode.OFF)
    assert cache.get("k", "m") is None
    assert cache.put("k", "m", {"text": "x"}) is False
    cache.close()
    assert not path.exists()
    assert CallCache(None, "off").mode is CacheMode.OFF


def test_replay_only_raises_on_a_miss_naming_key_and_model(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with CallCache(path) as cache:
        cache.put("recorded", "qwen", {"text": "hi"})
    with CallCache(path, "replay_only") as replay:
        assert replay.get("recorded", "qwen") == {"text": "hi"}
        with pytest.raises(CacheMiss) as caught:
            replay.get("deadbeef" * 8, "qwen")
        assert caught.value.key == "deadbeef" * 8
        assert "deadbeef" * 8 in str(caught.value) and "'qwen'" in str(caught.value)
        assert replay.put("new", "qwen", {"text": "x"}) is False
    with pytest.raises(FileNotFoundError):
        CallCache(tmp_path / "missing.sqlite", "replay_only")


def test_bad_mode_and_missing_path_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        CallCache(tmp_path / "c.sqlite", "sometimes")
    with pytest.raises(ValueError, match="path"):
        CallCache(None)


def test_writes_are_cheap(tmp_path: Path) -> None:
    with CallCache(tmp_path / "c.sqlite") as cache:
        payload = {"text": "I'll book the room once the agenda is final." * 4, "tool_calls": []}
        started = time.process_time()
        for i in range(500):
            cache.get(f"key{i}", "m")
            cache.put(f"key{i}", "m", payload)
        per_call_ms = 1000 * (time.process_time() - started) / 500
    assert per_call_ms < 2.0  # the whole harness budget per call; in practice ~0.05 ms


# ---------------------------------------------------------------- statistics
def test_session_stats_are_stored_and_grouped_by_run(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with CallCache(path, run_id="run-1") as cache:
        cache.put("a", "m", {})
        cache.get("a", "m")
    with CallCache(path, run_id="run-2") as first, CallCache(path, run_id="run-2") as second:
        first.get("a", "m")
        first.get("b", "m")
        second.get("a", "m")
        second.put("b", "m", {})
    report = describe_cache(path)
    assert report.entries == 2 and report.entries_by_model == {"m": 2}
    assert report.runs == 2
    assert report.last_run is not None
    run = report.last_run
    assert (run.run_id, run.sessions, run.hits, run.misses, run.writes) == ("run-2", 2, 2, 1, 1)
    assert run.hit_rate == pytest.approx(2 / 3)
    assert report.size_bytes > 0


def test_describe_cache_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        describe_cache(tmp_path / "none.sqlite")
    not_a_db = tmp_path / "junk.sqlite"
    not_a_db.write_text("hello")
    with pytest.raises(ValueError, match="not a commitbench cache"):
        describe_cache(not_a_db)


# ---------------------------------------------------------------- several processes
_WRITER = """
import sys, time
from commitbench.cache import CallCache
path, worker, run_id, start_at = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
with CallCache(path, run_id=run_id) as cache:
    time.sleep(max(0.0, start_at - time.time()))  # all writers begin together
    for i in range(__N__):
        key = f"shared-{i}" if i % 2 == 0 else f"own-{worker}-{i}"
        if cache.get(key, "m") is None:
            cache.put(key, "m", {"worker": worker, "i": i})
"""


@pytest.mark.slow
def test_several_processes_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    n, n_workers = 2000, 4
    start_at = str(time.time() + 1.0)
    script = _WRITER.replace("__N__", str(n))
    workers = [
        subprocess.Popen([sys.executable, "-c", script, str(path), str(w), "multi", start_at], stderr=subprocess.PIPE)
        for w in range(n_workers)
    ]
    for proc in workers:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    report = describe_cache(path)
    assert report.entries == n // 2 + n_workers * n // 2  # shared keys once, each worker's own keys
    assert report.last_run is not None
    assert report.last_run.sessions == n_workers
    assert report.last_run.writes == report.entries  # no write was lost or doubled
    assert report.last_run.hits + report.last_run.misses == n_workers * n
    with CallCache(path) as cache:
        for i in range(0, n, 2):
            assert cache.get(f"shared-{i}", "m")["i"] == i


# ---------------------------------------------------------------- CLI
def test_cache_stats_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.sqlite"
    with CallCache(path, run_id="last") as cache:
        cache.put("a", "qwen", {})
        cache.get("a", "qwen")
        cache.get("b", "qwen")
    assert cli_main(["cache", "stats", "--db", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries"] == 1
    assert report["last_run"]["run_id"] == "last"
    assert report["last_run"]["hit_rate"] == 0.5
    assert cli_main(["cache", "stats", "--db", str(path)]) == 0
    text = capsys.readouterr().out
    assert "entries:      1" in text and "hit rate 50.0%" in text and "qwen: 1" in text


def test_cache_stats_cli_on_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["cache", "stats", "--db", str(tmp_path / "nope.sqlite")]) == 2
    assert "no cache database" in capsys.readouterr().err
