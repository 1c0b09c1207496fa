"""Replicas of one model: session affinity, per-replica limits, a replica that dies, all on real mock servers."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _runner_fixtures import standing_responder

from commitbench.config import ConfigError, ExperimentConfig, load_config
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.llm import ModelClient, ModelError, ModelErrorKind, ModelSettings, ReplicaPolicy, ReplicaPool
from commitbench.mock import DEFAULT_MODEL, MockServer
from commitbench.modelentry import ModelEntry
from commitbench.rundir import RunStatus, read_manifest
from commitbench.runner import run_experiment
from commitbench.traces import EpisodeTrace, latest_traces

FAST_RETRY = {"max_attempts": 10, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}


@pytest.fixture
def two_replicas() -> Iterator[list[MockServer]]:
    servers = [MockServer().start(), MockServer().start()]
    responder = standing_responder(load_episodes())
    for server in servers:
        server.set_responder(responder)
    yield servers
    for server in servers:
        server.stop()


def replica_config(urls: list[str], limit: int, **fields: Any) -> ExperimentConfig:
    model: dict[str, Any] = {
        "name": "mock",
        "base_urls": urls,
        "api_key_env": None,
        "settings": {"model": DEFAULT_MODEL, "timeout": 5.0},
        "retry": FAST_RETRY,
    }
    model.update(fields.pop("model", {}))
    return ExperimentConfig.model_validate(
        {"name": "replicas", "env": "commitbench/Standing-v0",
                             "agents": ["chat"], "models": [model], "episodes": {"split": "test", "limit": limit},
         "concurrency": 8, "cache": {"mode": "off"}, **fields}
    )


def sessions_by_replica(servers: list[MockServer]) -> list[Counter[str]]:
    """Per replica: how many chat requests each session id sent it (from the servers' request logs)."""
    return [
        Counter(r["headers"].get("x-session-id", "") for r in server.requests() if r["path"].endswith("completions"))
        for server in servers
    ]


def http_calls(trace: EpisodeTrace) -> int:
    return sum(1 for call in trace.model_calls if call.purpose != "notice" and not call.cache_hit)


# ---------------------------------------------------------------------------- the pool
def test_rendezvous_order_is_stable_and_moves_only_the_sessions_of_a_removed_replica() -> None:
    urls = [f"http://127.0.0.1:{9000 + i}/v1" for i in range(4)]
    pool = ReplicaPool(urls)
    sessions = [f"run-key-{i}" for i in range(400)]
    home = {s: pool.order(s)[0].label for s in sessions}
    assert home == {s: ReplicaPool(urls).order(s)[0].label for s in sessions}  # the same in every process
    assert set(Counter(home.values())) == set(urls) and min(Counter(home.values()).values()) > 50
    smaller = ReplicaPool(urls[:3])
    for session in sessions:
        new_home = smaller.order(session)[0].label
        if home[session] != urls[3]:
            assert new_home == home[session]  # a session whose replica stays does not move


def test_a_replica_that_stops_answering_is_taken_out_and_its_sessions_move() -> None:
    urls = ["http://127.0.0.1:9001/v1", "http://127.0.0.1:9002/v1"]
    pool = ReplicaPool(urls, policy=ReplicaPolicy(failures_to_eject=2, eject_s=60))
    session = next(f"s{i}" for i in range(100) if pool.order(f"s{i}")[0].label == urls[0])
    assert pool.place(session) == (pool.replicas[0], None)
    refused = ModelError(kind=ModelErrorKind.CONNECTION, message="connection refused")
    pool.on_failure(pool.replicas[0], ModelError(kind=ModelErrorKind.SERVER_ERROR, message="HTTP 500"))
    pool.on_failure(pool.replicas[0], refused)
    assert pool.out_of_rotation() == []  # a 500 is an answer: only refusals and timeouts count
    pool.on_failure(pool.replicas[0], refused)
    assert pool.out_of_rotation() == [urls[0]]
    replica, move = pool.place(session)
    assert replica is pool.replicas[1] and move is not None
    assert move.startswith(f"{urls[0]} -> {urls[1]}: ") and "connection failures in a row" in move
    assert pool.place(session) == (pool.replicas[1], None)  # it stays where it moved: one move, recorded once


def test_a_new_session_skips_a_replica_already_loaded_beyond_its_share() -> None:
    urls = ["http://127.0.0.1:9001/v1", "http://127.0.0.1:9002/v1"]
    pool = ReplicaPool(urls, max_concurrency=8)
    sessions = [f"s{i}" for i in range(200)]
    homed_on_first = [s for s in sessions if pool.order(s)[0] is pool.replicas[0]]

    async def load_first_replica() -> None:
        for _ in range(6):
            await pool.replicas[0].limiter.acquire()

    asyncio.run(load_first_replica())
    replica, move = pool.place(homed_on_first[0])
    assert replica is pool.replicas[1] and move is None  # a placement by load, not a move
    assert pool.place(homed_on_first[0]) == (pool.replicas[1], None)  # and it sticks
    for _ in range(6):
        pool.replicas[0].limiter.release()
    assert pool.place(homed_on_first[1]) == (pool.replicas[0], None)  # home again once the load is even


# --------------------------------------------------------------------------- affinity
def test_every_call_of_an_episode_reaches_one_replica_with_its_run_key(
    tmp_path: Path, two_replicas: list[MockServer]
) -> None:
    config = replica_config([s.base_url for s in two_replicas], 16)
    summary = run_experiment(config, tmp_path)
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == 16
    traces = latest_traces(tmp_path)
    seen = sessions_by_replica(two_replicas)
    assert all(seen)  # both replicas served episodes
    for trace in traces:
        served_by = [i for i, counts in enumerate(seen) if trace.run_key in counts]
        assert len(served_by) == 1, f"{trace.run_key} reached replicas {served_by}"
        assert seen[served_by[0]][trace.run_key] == http_calls(trace) > 0
        assert not any(call.replica_move for call in trace.model_calls)
    assert set().union(*seen) == {t.run_key for t in traces}  # no request without its episode's run key
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    per_replica = manifest.invocations[-1].client_stats["mock"]["replica_requests"]
    assert per_replica == {s.base_url: sum(c.values()) for s, c in zip(two_replicas, seen, strict=True)}


def test_each_replica_gets_at_most_its_own_limit(two_replicas: list[MockServer]) -> None:
    for server in two_replicas:
        server.set_responder(None)
        server.set_latency(30)
    settings = ModelSettings(model=DEFAULT_MODEL, base_urls=tuple(s.base_url for s in two_replicas), api_key_env=None)
    pool = ReplicaPool(settings.endpoints(), max_concurrency=64, policy=ReplicaPolicy(max_concurrency=3))

    async def go() -> list[Any]:
        async with ModelClient(settings, replicas=pool, max_concurrency=64) as client:
            return await asyncio.gather(*(
                client.complete([{"role": "user", "content": f"q{i}"}], session_id=f"episode-{i}") for i in range(40)
            ))

    responses = asyncio.run(go())
    assert all(r.ok for r in responses)
    stats = [s.stats() for s in two_replicas]
    assert sum(s.chat_completions for s in stats) == 40
    assert all(0 < s.max_in_flight <= 3 for s in stats)
    assert {r.replica for r in responses} == {s.base_url for s in two_replicas}


# ----------------------------------------------------------------------- a dead replica
def test_a_replica_stopped_halfway_moves_its_episodes_to_the_other(
    tmp_path: Path, two_replicas: list[MockServer]
) -> None:
    doomed, survivor = two_replicas
    responder = standing_responder(load_episodes())
    served = 0

    def answer_then_die(request: dict[str, Any]) -> Any:
        nonlocal served
        served += 1
        if served == 25:  # stop the whole server from another thread, mid-run
            threading.Thread(target=doomed.stop, daemon=True).start()
        return responder(request)

    doomed.set_responder(answer_then_die)
    for server in two_replicas:
        server.set_latency(5)
    config = replica_config(
        [doomed.base_url, survivor.base_url], 24,
        model={"replicas": {"failures_to_eject": 2, "eject_s": 120}},
    )
    doomed_url = doomed.base_url
    summary = run_experiment(config, tmp_path)
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == 24, summary.failures
    traces = latest_traces(tmp_path)
    assert len(traces) == 24 and not any(t.infra_error for t in traces)
    moved = [t for t in traces if any(c.replica_move for c in t.model_calls)]
    assert moved, "no episode recorded a move"
    for trace in moved:
        moves = [c.replica_move for c in trace.model_calls if c.replica_move]
        assert len(moves) == 1  # moved once, then stayed
        assert moves[0].startswith(f"{doomed_url} -> {survivor.base_url}: ")
    by_survivor = sessions_by_replica([survivor])[0]
    assert {t.run_key for t in moved} <= set(by_survivor)
    assert summary.errors == {}  # every refused attempt was retried on the survivor


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"base_url": "http://a/v1", "base_urls": ["http://b/v1"]}, "give one of base_url, base_urls"),
        ({"base_urls": ["http://a/v1", "http://a/v1"]}, "lists a replica twice"),
        ({"base_urls": []}, "at least 1 item"),
        ({"base_urls": ["http://a/v1"], "local": True}, "give one of base_url, base_urls"),
    ],
)
def test_replica_lists_are_validated(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelEntry.model_validate({"name": "m", **fields})


def test_replicas_are_not_part_of_any_identity(tmp_path: Path) -> None:
    one = ModelEntry.model_validate({"name": "m", "base_url": "http://a/v1"}).model_settings()
    many = ModelEntry.model_validate({"name": "m", "base_urls": ["http://b/v1", "http://c/v1"]}).model_settings()
    assert one.identity() == many.identity()
    assert many.endpoints() == ("http://b/v1", "http://c/v1") and one.endpoints() == ("http://a/v1",)
    path = tmp_path / "bad.yaml"
    path.write_text("env: commitbench/Standing-v0\nagents: [chat]\n"
                    "models: [{name: m, base_urls: ['http://x/v1', 'http://x/v1']}]\n")
    with pytest.raises(ConfigError, match=r"models\.0: .*lists a replica twice"):
        load_config(path)
