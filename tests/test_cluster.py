"""Distributed runs on a local Ray: the same run directory as one process, through a lost actor too.

The Ray tests need the ``ray`` extra (CI installs it). Each local Ray is started on 127.0.0.1 with
two CPU slots and no dashboard, and shut down at the end of its test or module; Ray's processes
share the fate of the process that started them (its raylet and workers die with it; its two
agents notice and exit on their own).
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _runner_fixtures import standing_responder

from commitbench.cli import main as cli_main
from commitbench.config import CacheConfig, ExperimentConfig, JudgeConfig
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.labeljob import label_directory
from commitbench.mock import DEFAULT_MODEL, MockServer
from commitbench.planning import expand_cells, select_config_episodes
from commitbench.rundir import RunStatus, read_manifest
from commitbench.runner import run_experiment
from commitbench.traces import TRACES_FILE, EpisodeTrace, latest_traces

FAST_RETRY = {"max_attempts": 10, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}


def config_for(base_url: str, limit: int, cache: Path, **fields: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "ray-run",
            "env": "commitbench/Standing-v0", "agents": ["chat"],
            "models": [{"name": "mock", "base_url": base_url, "api_key_env": None,
                        "settings": {"model": DEFAULT_MODEL, "timeout": 10.0}, "retry": FAST_RETRY}],
            "episodes": {"split": "test", "limit": limit},
            "concurrency": 8,
            "cache": {"path": str(cache)},
            **fields,
        }
    )


def raw_keys(out: Path) -> list[str]:
    return [json.loads(line)["run_key"] for line in (out / TRACES_FILE).read_text().splitlines() if line.strip()]


def played(trace: EpisodeTrace) -> dict[str, Any]:
    """What a cell's play produced: its episode, the model's replies, the events, the outcome."""
    return {
        "episode": trace.episode_id,
        "replies": [(c.text, [(t["name"], t["arguments"]) for t in c.tool_calls], c.error) for c in trace.model_calls],
        "events": [(e.kind.value, e.text) for e in trace.events],
        "reward": trace.reward,
        "terminated": trace.terminated,
    }


def labels(run_dir: Path) -> dict[str, Any]:
    summary = label_directory(run_dir, JudgeConfig())
    rows = [json.loads(line) for line in Path(summary.labels_file).read_text().splitlines() if line.strip()]
    return {row["run_key"]: row for row in rows}


@pytest.fixture
def standing_server() -> Iterator[MockServer]:
    with MockServer(latency_ms=5) as server:
        server.set_responder(standing_responder(load_episodes()))
        yield server


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A local Ray for the module (two CPU slots, loopback only, no dashboard)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", namespace="commitbench",
                 logging_level="WARNING")
    yield ray
    if started:
        ray.shutdown()


# ---------------------------------------------------------------------------- usage
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "2"], "--workers goes with --ray"),
        (["--ray", "--workers", "0"], "--workers must be at least 1"),
    ],
)
def test_ray_flags_are_checked_before_anything_is_played(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"env": "commitbench/Standing-v0",
                                      "agents": ["creditor-rule"], "episodes": {"split": "test", "limit": 2}}))
    assert cli_main(["run", str(config), "--out", str(tmp_path / "o"), "--no-progress", *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_local_model_is_refused_on_a_ray_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"env": "commitbench/Standing-v0",
                                      "agents": ["chat"], "models": [{"name": "local", "local": True}],
                                      "episodes": {"split": "test", "limit": 2}}))
    assert cli_main(["run", str(config), "--out", str(tmp_path / "o"), "--ray", "10.0.0.1:6379"]) == 2
    assert "runs on this machine only" in capsys.readouterr().err


# ------------------------------------------------------------------ the same directory
@pytest.mark.slow
def test_a_ray_run_of_two_hundred_episodes_equals_a_one_process_run(
    tmp_path: Path, standing_server: MockServer
) -> None:
    pytest.importorskip("ray")
    one = config_for(standing_server.base_url, 200, tmp_path / "one.sqlite")
    summary = run_experiment(one, tmp_path / "one")
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == 200

    # The command line, on a local Ray started for the run, with two workers and its own cache.
    two = config_for(standing_server.base_url, 200, tmp_path / "ray.sqlite")
    path = tmp_path / "ray.yaml"
    path.write_text(yaml.safe_dump(two.model_dump(mode="json")))
    served = standing_server.stats().chat_completions
    code = cli_main(["run", str(path), "--ray", "--workers", "2", "--out", str(tmp_path / "ray"), "--no-progress",
                     "--no-report"])
    assert code == 0
    keys = raw_keys(tmp_path / "ray")
    assert len(keys) == len(set(keys)) == 200  # the driver wrote each cell once
    ours = {t.run_key: played(t) for t in latest_traces(tmp_path / "ray")}
    theirs = {t.run_key: played(t) for t in latest_traces(tmp_path / "one")}
    assert ours.keys() == theirs.keys()
    assert ours == theirs
    assert labels(tmp_path / "ray") == labels(tmp_path / "one")
    manifest = read_manifest(tmp_path / "ray")
    assert manifest is not None and manifest.status is RunStatus.COMPLETE and manifest.cells_done == 200
    stats = manifest.invocations[-1].client_stats["mock"]
    http = standing_server.stats().chat_completions - served
    assert stats["http_requests"] == http and stats["calls"] == summary.model_calls
    # The driver recorded every answer in the run's cache: a replay on Ray needs no server at all.
    standing_server.set_responder(None)
    standing_server.set_faults(rates={"http_500": 1.0})
    replay = two.model_copy(update={"cache": CacheConfig(path=tmp_path / "ray.sqlite", mode="replay_only")})
    path.write_text(yaml.safe_dump(replay.model_dump(mode="json")))
    code = cli_main(["run", str(path), "--ray", "--workers", "2", "--out", str(tmp_path / "replay"), "--no-progress",
                     "--no-report"])
    assert code == 0
    assert standing_server.stats().chat_completions == served + http  # no request reached the server
    assert {t.run_key: played(t) for t in latest_traces(tmp_path / "replay")} == ours


# ---------------------------------------------------------------------- a lost actor
def _kill_one_worker(ray: Any, traces: Path, after_lines: int, killed: dict[str, Any]) -> None:
    """Once ``after_lines`` traces are on disk, SIGKILL the process of the run's first worker."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if traces.exists() and traces.read_bytes().count(b"\n") >= after_lines:
            break
        time.sleep(0.02)
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].endswith("-w0")]
    actor = ray.get_actor(names[0], namespace="commitbench")
    pid = ray.get(actor.pid.remote())
    killed["lines"] = traces.read_bytes().count(b"\n")
    os.kill(pid, signal.SIGKILL)
    killed["pid"] = pid


@pytest.mark.slow
def test_killing_an_actor_midway_loses_no_cell_and_duplicates_none(
    tmp_path: Path, standing_server: MockServer, local_ray: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    from commitbench.cluster import RayOptions, run_on_ray

    standing_server.set_latency(20)
    config = config_for(standing_server.base_url, 80, tmp_path / "cache.sqlite", concurrency=4)
    out = tmp_path / "run"
    killed: dict[str, Any] = {}
    killer = threading.Thread(target=_kill_one_worker, args=(local_ray, out / TRACES_FILE, 12, killed), daemon=True)
    killer.start()
    summary = run_on_ray(config, out, options=RayOptions(workers=2))
    killer.join(30)
    assert killed.get("pid"), "no worker was killed"
    assert 12 <= killed["lines"] < 80  # it died mid-run
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == 80 and summary.cells_remaining == 0
    expected = {c.run_key for c in expand_cells(config, select_config_episodes(config))}
    keys = raw_keys(out)
    assert len(keys) == len(set(keys)) == 80  # no duplicate
    assert set(keys) == expected  # no missing cell
    assert not any(t.infra_error for t in latest_traces(out))
    assert f"Ray worker w0 (pid {killed['pid']}) lost" in capfd.readouterr().err
    # Nothing the dead actor left half done disagrees with the cache: a replay rebuilds every trace.
    replay = config.model_copy(update={"cache": CacheConfig(path=tmp_path / "cache.sqlite", mode="replay_only")})
    again = run_on_ray(replay, tmp_path / "replay", options=RayOptions(workers=2))
    assert again.status is RunStatus.COMPLETE and again.http_requests == 0
    assert {t.run_key: played(t) for t in latest_traces(tmp_path / "replay")} == {
        t.run_key: played(t) for t in latest_traces(out)
    }
    # The dead actor's scratch directory (its cache copy) was removed by the next actor on the node.
    assert not list(Path(tempfile.gettempdir()).glob(f"commitbench-worker-{killed['pid']}-*"))
