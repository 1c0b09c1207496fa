"""The experiment runner: configs, run keys, resume, cache, replay, faults, crashes and signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import yaml
from _runner_fixtures import standing_responder

from commitbench.cli import main as cli_main
from commitbench.config import CacheConfig, ConfigError, ExperimentConfig, load_config
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.mock import FaultConfig, FaultKind, MockServer, MockServerProcess
from commitbench.oracles import registry
from commitbench.oracles.base import Intervention, InterventionEntry
from commitbench.planning import expand_cells, select_config_episodes
from commitbench.rundir import MANIFEST_FILE, RunStatus, read_manifest
from commitbench.runner import Runner, run_experiment
from commitbench.traces import TRACES_FILE, EpisodeTrace, latest_traces, read_traces

ROOT = Path(__file__).resolve().parent.parent
FAST_RETRY = {"max_attempts": 10, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}


def chat_config(base_url: str, limit: int, **fields: Any) -> ExperimentConfig:
    data: dict[str, Any] = {
        "name": "mock-run",
        "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [
            {
                "name": "mock",
                "base_url": base_url,
                "api_key_env": None,
                "settings": {"model": "mock-model", "timeout": 10.0},
                "retry": FAST_RETRY,
            }
        ],
        "episodes": {"split": "test", "limit": limit},
        "concurrency": 16,
    }
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return ExperimentConfig.model_validate(data)


def reference_config(limit: int, **fields: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {"env": "commitbench/Standing-v0",
         "agents": ["creditor-rule", "always-execute"], "episodes": {"split": "test", "limit": limit}, **fields}
    )


def comparable(trace: EpisodeTrace) -> dict[str, Any]:
    """A trace without what differs between two plays of the same cell.

    That is timings, and the ids the server gave tool calls: two identical requests in flight at
    once are both answered by the server, and the cache keeps the first answer for both.
    """
    data = trace.model_dump(mode="json", exclude={"started_at", "duration_s"})
    for call in data["model_calls"]:
        call.pop("latency_s")
        call.pop("cache_hit")
        for tool_call in call["tool_calls"]:
            tool_call.pop("id")
    return data


def raw_keys(out: Path) -> list[str]:
    return [json.loads(line)["run_key"] for line in (out / TRACES_FILE).read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------ configs
def test_example_configs_load() -> None:
    local = load_config(ROOT / "configs" / "example-local.yaml")
    assert [m.local for m in local.models] == [True]
    vllm = load_config(ROOT / "configs" / "example-vllm.yaml")
    assert vllm.models and all(m.base_url for m in vllm.models)
    assert vllm.models[0].settings.extra_body


def test_the_documented_full_example_is_a_valid_config(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "runner.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "documented.yaml"
    path.write_text(block)
    config = load_config(path)
    assert [m.name for m in config.models] == ["qwen3-8b", "local"]
    labels = [arm.label() for arm in config.interventions]
    assert labels == ["none", "policy:explicit", "policy:explicit+ledger:self-kept"]
    assert config.judge.kind == "llm" and config.judge_is_tested() == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agents": ["creditor-rule"], "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"agents": ["oracle"]}, "unknown agent 'oracle'"),
        ({"agents": ["chat"]}, "plays on the config's models: name at least one under models"),
        ({"agents": ["creditor-rule"], "models": [{"name": "m", "base_url": "http://x/v1"}]}, "no agent plays on them"),
        ({"agents": ["chat"], "models": [{"name": "m"}]}, "needs base_url"),
        ({"agents": ["creditor-rule"], "interventions": ["ledger"]}, "unknown intervention 'ledger'"),
        ({"agents": ["creditor-rule"], "samples": 0}, "samples: Input should be greater than or equal to 1"),
        (["agents"], "the top level must be a mapping"),
        ({"env": None, "agents": ["creditor-rule"]}, "env is required: the environment id of the suite to play"),
        ({"env": "nope-v0", "agents": ["creditor-rule"]}, "nope-v0"),
    ],
)
def test_config_errors_name_the_file_and_the_problem(tmp_path: Path, data: Any, message: str) -> None:
    path = tmp_path / "bad.yaml"
    # Every config names its suite's environment; the cases that test something else name the standing one.
    if isinstance(data, dict):
        data = {"env": STANDING_ENV_ID, **data}
        if data["env"] is None:
            del data["env"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"bad\.yaml") as info:
        load_config(path)
    assert message in str(info.value)


class Tagged(Intervention):
    kind = "tag"
    slot = "tag"
    env_ids = frozenset({"commitbench/Standing-v0"})

    def __init__(self, env: gym.Env[Any, Any], v: str = "plain") -> None:
        self.v = v
        super().__init__(env, v=v)


class Marked(Tagged):
    kind = "mark"
    slot = "mark"


def test_intervention_arms_accept_none_names_and_params(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (Tagged, Marked):
        entry = InterventionEntry(cls.kind, cls, lambda env, params, services, c=cls: c(env, **params), params=("v",))
        monkeypatch.setitem(registry.INTERVENTIONS, cls.kind, entry)
    arms = ["none", "tag", [{"name": "tag", "params": {"v": "x"}}, "mark"], "mark[v=y]"]
    config = reference_config(3, interventions=arms)
    assert [arm.label() for arm in config.interventions] == ["none", "tag", "tag[v=x]+mark", "mark[v=y]"]
    assert config.interventions[3].stack[0].params == {"v": "y"}
    assert reference_config(3, interventions=[[]]).interventions == reference_config(3).interventions
    with pytest.raises(ValueError, match="intervention arms must differ"):
        reference_config(3, interventions=["none", []])
    with pytest.raises(ValueError, match="takes v, not w"):
        reference_config(3, interventions=["tag[w=1]"])
    env = registry.apply_interventions(
        gym.make("commitbench/Standing-v0", disable_env_checker=True), config.interventions[2].stack
    )
    assert isinstance(env, Marked) and env.v == "plain" and isinstance(env.env, Tagged) and env.env.v == "x"
    with pytest.raises(registry.UnknownInterventionError, match=r"unknown intervention 'nope' \(known: .*\btag\b"):
        registry.check_intervention("nope")


def test_registered_interventions_run_and_bad_combinations_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="two release policies"):
        reference_config(2, interventions=[["policy:explicit", "policy:silent"]])
    config = reference_config(4, interventions=["none", "oracle:B4"])
    summary = run_experiment(config, tmp_path)
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == 2 * 2 * 4
    traces = latest_traces(tmp_path)
    with_oracle = [t for t in traces if t.interventions]
    plain = [t for t in traces if not t.interventions]
    assert len(with_oracle) == len(plain) == 8
    assert {tuple(t.interventions) for t in with_oracle} == {("oracle:B4",)}
    # The intervention's own prompt hashes are kept next to the runner's.
    assert all(len(t.prompt_hashes) > len(plain[0].prompt_hashes) for t in with_oracle)
    assert {t.run_key for t in with_oracle}.isdisjoint({t.run_key for t in plain})


def test_run_keys_are_stable_and_follow_the_identity() -> None:
    episodes = select_config_episodes(reference_config(5))
    base = {"name": "m", "base_url": "http://127.0.0.1:1/v1", "settings": {"model": "x"}}
    one = ExperimentConfig.model_validate(
        {"env": "commitbench/Standing-v0",
         "agents": ["chat", "creditor-rule"], "models": [base], "episodes": {"limit": 5}, "samples": 2}
    )
    cells = expand_cells(one, episodes)
    assert len(cells) == 5 * 2 + 5  # chat: 2 samples; the reference agent plays sample 0 only
    assert len({c.run_key for c in cells}) == len(cells)
    assert [c.run_key for c in expand_cells(one, episodes)] == [c.run_key for c in cells]
    moved = one.model_copy(update={"models": [one.models[0].model_copy(update={"base_url": "http://elsewhere/v1"})]})
    assert [c.run_key for c in expand_cells(moved, episodes)] == [c.run_key for c in cells]
    hotter = ExperimentConfig.model_validate(
        {**one.model_dump(), "models": [{**base, "settings": {"model": "x", "temperature": 0.7}}]}
    )
    changed = {c.run_key for c in expand_cells(hotter, episodes)} ^ {c.run_key for c in cells}
    assert len(changed) == 2 * 10  # every chat key changed, no reference key did


# ------------------------------------------------------------------------------ resume
def test_reference_run_writes_traces_and_a_manifest_and_resumes(tmp_path: Path) -> None:
    config = reference_config(30)
    first = run_experiment(config, tmp_path, argv=["test"])
    assert first.status is RunStatus.COMPLETE and first.cells_done == 60 and first.cells_remaining == 0
    traces = read_traces(tmp_path / TRACES_FILE)
    assert len(traces) == 60 and len({t.run_key for t in traces}) == 60
    assert {t.agent.name for t in traces if t.agent} == {"creditor-rule", "always-execute"}
    assert all(t.terminated and t.interventions == [] and t.prompt_hashes["system_prompt"] for t in traces)
    manifest = read_manifest(tmp_path)
    assert manifest is not None and manifest.status is RunStatus.COMPLETE
    assert manifest.cells_total == manifest.cells_done == 60
    assert manifest.packages["commitbench"] and manifest.packages["python"]
    assert set(manifest.prompt_hashes) >= {"standing_data", "chat_render"}
    assert manifest.git is None or len(manifest.git["commit"]) == 40
    assert manifest.invocations[0].status is RunStatus.COMPLETE

    second = run_experiment(config, tmp_path, argv=["test"])
    assert (second.cells_skipped, second.cells_done) == (60, 0)
    again = read_manifest(tmp_path)
    assert again is not None and len(again.invocations) == 2
    assert (again.run_id, again.started_at, again.config_hash) == (manifest.run_id, manifest.started_at,
                                                                    manifest.config_hash)
    assert len(read_traces(tmp_path / TRACES_FILE)) == 60


def test_torn_last_line_and_failed_cells_are_replayed_once(tmp_path: Path) -> None:
    config = reference_config(10)
    run_experiment(config, tmp_path)
    path = tmp_path / TRACES_FILE
    lines = path.read_text().splitlines(keepends=True)
    failed = EpisodeTrace.model_validate_json(lines[-3])
    failed.infra_error = "server_error: gave up after 6 attempts"
    torn = lines[-1][: len(lines[-1]) // 2]
    path.write_text("".join(lines[:-3]) + failed.model_dump_json() + "\n" + torn)

    summary = run_experiment(config, tmp_path)
    assert summary.torn_bytes_dropped == len(torn)
    assert (summary.cells_done, summary.cells_skipped, summary.status) == (3, 17, RunStatus.COMPLETE)
    keys = raw_keys(tmp_path)
    assert len(keys) == 21 and Counter(keys)[failed.run_key] == 2
    latest = latest_traces(tmp_path)
    assert len(latest) == 20 and not any(t.infra_error for t in latest)


def test_a_directory_in_use_by_another_run_is_refused(tmp_path: Path) -> None:
    from commitbench.rundir import RunDirectoryBusyError, directory_lock

    code = (
        "import sys, time; from pathlib import Path; from commitbench.rundir import directory_lock\n"
        "with directory_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(30)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirectoryBusyError, match=f"in use by pid {holder.pid}"):
            run_experiment(reference_config(2), tmp_path)
    finally:
        holder.kill()
        holder.wait(10)
    # The kernel drops the lock with the process, however it died.
    with directory_lock(tmp_path):
        pass
    assert run_experiment(reference_config(2), tmp_path).cells_done == 4


def test_a_directory_of_another_experiment_is_refused(tmp_path: Path) -> None:
    run_experiment(reference_config(3), tmp_path)
    with pytest.raises(ValueError, match=r"holds a different experiment.*--force"):
        run_experiment(reference_config(4), tmp_path)
    summary = run_experiment(reference_config(4), tmp_path, force=True)
    assert (summary.cells_skipped, summary.cells_done) == (6, 2)


def test_cli_shorthand_runs_a_reference_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    args = ["run", "standing", "--agent", "creditor-rule", "--cells", "BASE", "PEER-DIRECT", "--gaps", "1",
            "--out", str(out), "--no-progress", "--no-report"]
    assert cli_main(args) == 0
    traces = read_traces(out / TRACES_FILE)
    assert len(traces) == 2 * 2 * 6 * 3  # cells x policies x test types x surfaces
    assert {t.factors["cell"] for t in traces} == {"BASE", "PEER-DIRECT"}
    assert "complete: 72 cells played" in capsys.readouterr().err
    assert cli_main(args) == 0 and "72 already done" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "standing"], "needs --agent"),
        (["run", "standing", "--agent", "chat"], "plays on a model: give --model"),
        (["run", "standing", "--agent", "creditor-rule", "--model", "x"], "go with an agent that plays on a model"),
        (["run", "standing", "--agent", "creditor-rule", "--cells", "NOPE"], "unknown cell: NOPE"),
        (["run", "missing.yaml", "--agent", "chat"], "--agent only go with"),
        (["run", "missing.yaml"], "cannot read config missing.yaml"),
    ],
)
def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert cli_main([*args, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------------------ chat runs
def test_chat_run_then_a_cached_rerun_makes_no_http_request(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    cache = tmp_path / "shared-cache.sqlite"
    config = chat_config(mock_server.base_url, 8, cache={"path": str(cache)})
    first = run_experiment(config, tmp_path / "a")
    assert first.status is RunStatus.COMPLETE and first.cells_done == 8
    served = mock_server.stats().chat_completions
    assert served == first.http_requests > 8
    traces_a = {t.run_key: t for t in latest_traces(tmp_path / "a")}
    assert all(t.model_calls and t.agent and t.agent.kind == "chat" for t in traces_a.values())
    assert sum(1 for t in traces_a.values() for c in t.tool_calls() if c.is_write) > 0

    second = run_experiment(config, tmp_path / "b")
    assert second.status is RunStatus.COMPLETE and second.cells_done == 8
    assert mock_server.stats().chat_completions == served  # zero HTTP requests
    assert second.http_requests == 0 and second.cache_hits == second.model_calls == first.model_calls
    traces_b = {t.run_key: t for t in latest_traces(tmp_path / "b")}
    assert traces_a.keys() == traces_b.keys()
    assert all(comparable(traces_a[k]) == comparable(traces_b[k]) for k in traces_a)
    assert all(call.cache_hit for t in traces_b.values() for call in t.model_calls)


@pytest.mark.slow
def test_many_requests_in_flight_are_spread_over_several_clients(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    config = chat_config(mock_server.base_url, 12, concurrency=130, samples=11)  # 132 cells: 130 in flight
    runner = Runner(config, tmp_path)
    summary = runner.run()
    assert summary.status is RunStatus.COMPLETE
    shards = runner.player.clients["mock"]
    assert len(shards) == 3 and all(c.limiter.max_limit == 44 for c in shards)
    assert all(c.stats().calls > 0 for c in shards)
    assert summary.http_requests == mock_server.stats().chat_completions
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    assert manifest.invocations[-1].client_stats["mock"]["calls"] == summary.model_calls


def test_replay_only_rebuilds_a_run_with_the_server_stopped(tmp_path: Path) -> None:
    with MockServer() as server:
        server.set_responder(standing_responder(load_episodes()))
        base_url = server.base_url
        config = chat_config(base_url, 6, cache={"path": str(tmp_path / "cache.sqlite")})
        run_experiment(config, tmp_path / "live")
    # The server is gone: a replay needs nothing but the cache.
    replay = config.model_copy(update={"cache": CacheConfig(path=config.cache.path, mode="replay_only")})
    summary = run_experiment(replay, tmp_path / "replay")
    assert summary.status is RunStatus.COMPLETE and summary.http_requests == 0
    live = {t.run_key: comparable(t) for t in latest_traces(tmp_path / "live")}
    rebuilt = {t.run_key: comparable(t) for t in latest_traces(tmp_path / "replay")}
    assert live == rebuilt

    # A call that was never recorded fails its cell (recorded, re-run later), never silently.
    other = chat_config(base_url, 2, samples=2, cache={"path": str(tmp_path / "cache.sqlite"),
                                                             "mode": "replay_only"})
    partial = run_experiment(other, tmp_path / "missing")
    assert partial.status is RunStatus.INCOMPLETE and partial.cells_failed == 2 and partial.cells_done == 2
    assert all(f.split(": ", 1)[1].startswith("cache_miss") for f in partial.failures)


def test_an_endpoint_that_rejects_the_model_aborts_the_run(tmp_path: Path, mock_server: MockServer) -> None:
    config = chat_config(mock_server.base_url.replace("/v1", "/wrong/v1"), 4)
    summary = run_experiment(config, tmp_path)
    assert summary.status is RunStatus.ABORTED and "rejected model 'mock-model'" in summary.message
    manifest = read_manifest(tmp_path)
    assert manifest is not None and manifest.status is RunStatus.ABORTED


@pytest.mark.slow
def test_two_hundred_episodes_through_twenty_percent_faults(tmp_path: Path, mock_server: MockServer) -> None:
    rates = {
        FaultKind.HTTP_500: 0.06, FaultKind.HTTP_429: 0.02, FaultKind.TIMEOUT: 0.01, FaultKind.DISCONNECT: 0.02,
        FaultKind.TRUNCATED_BODY: 0.03, FaultKind.EMPTY_CHOICES: 0.02, FaultKind.MALFORMED_TOOL_ARGS: 0.03,
        FaultKind.REFUSAL: 0.01,
    }
    # A held answer outlasts the client's timeout; the timeout leaves a busy machine's slowest ordinary answers
    # room, so every retry is one of the faults the mock counted.
    mock_server.set_faults(FaultConfig(seed=11, rates=rates, timeout_hold_s=4.0))
    mock_server.set_responder(standing_responder(load_episodes()))
    config = chat_config(
        mock_server.base_url, 200, concurrency=32, cache={"mode": "off"},
        models=[{"name": "mock", "base_url": mock_server.base_url, "api_key_env": None,
                 "settings": {"model": "mock-model", "timeout": 3.0}, "retry": FAST_RETRY}],
    )
    summary = run_experiment(config, tmp_path)
    assert summary.status is RunStatus.COMPLETE, summary.failures
    assert summary.cells_done == 200 and summary.cells_remaining == 0
    traces = latest_traces(tmp_path)
    assert len(traces) == 200 and all(t.terminated and not t.infra_error for t in traces)

    outcomes = mock_server.stats().outcomes
    transport = sum(outcomes.get(k.value, 0) for k in rates if k not in (FaultKind.MALFORMED_TOOL_ARGS,
                                                                            FaultKind.REFUSAL))
    assert transport > 100
    # Every failed attempt was retried, and every HTTP request is accounted for.
    assert summary.retries == transport and summary.errors == {}
    assert summary.http_requests == mock_server.stats().chat_completions
    # Spoiled completions are in the traces: malformed arguments as tool errors, refusals as call errors.
    calls = [c for t in traces for c in t.tool_calls()]
    malformed = [c for c in calls if c.raw_arguments is not None and not c.ok]
    assert len(malformed) == outcomes[FaultKind.MALFORMED_TOOL_ARGS.value] > 0
    assert all(c.error_kind == "bad_arguments" for c in malformed)
    refusals = [m for t in traces for m in t.model_calls if m.error.startswith("refusal:")]
    assert len(refusals) == outcomes.get(FaultKind.REFUSAL.value, 0)
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    assert manifest.invocations[-1].client_stats["mock"]["retries"] == transport


# ------------------------------------------------------------------------------ crashes
def _write_config(tmp_path: Path, base_url: str, limit: int) -> Path:
    config = chat_config(base_url, limit, concurrency=8, cache={"path": str(tmp_path / "cache.sqlite")})
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    return path


def _start_run(config: Path, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "commitbench.cli", "run", str(config), "--out", str(out), "--no-progress",
         "--no-report"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
    )


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {n} lines")


@pytest.fixture(scope="module")
def slow_server() -> Any:
    with MockServerProcess(latency_ms=25) as server:
        yield server


@pytest.mark.slow
def test_sigkill_midway_then_rerun_completes_without_duplicates(tmp_path: Path, slow_server: Any) -> None:
    config_path = _write_config(tmp_path, slow_server.base_url, 48)
    out = tmp_path / "run"
    proc = _start_run(config_path, out)
    _wait_for_lines(out / TRACES_FILE, 8, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    killed_at = len(raw_keys(out)) if (out / TRACES_FILE).stat().st_size else 0
    assert 8 <= killed_at < 48

    rerun = _start_run(config_path, out)
    assert rerun.wait(120) == 0, rerun.stderr.read().decode() if rerun.stderr else ""
    config = load_config(config_path)
    expected = {c.run_key for c in expand_cells(config, select_config_episodes(config))}
    keys = raw_keys(out)
    assert len(keys) == len(set(keys)) == 48  # no duplicate
    assert set(keys) == expected  # no missing cell
    manifest = read_manifest(out)
    assert manifest is not None and manifest.status is RunStatus.COMPLETE
    assert [i.status for i in manifest.invocations] == [RunStatus.KILLED, RunStatus.COMPLETE]  # marked by the rerun


@pytest.mark.slow
def test_sigint_stops_cleanly_and_leaves_a_resumable_directory(tmp_path: Path, slow_server: Any) -> None:
    config_path = _write_config(tmp_path, slow_server.base_url, 40)
    out = tmp_path / "run"
    proc = _start_run(config_path, out)
    _wait_for_lines(out / TRACES_FILE, 5, proc)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 130
    assert (out / TRACES_FILE).read_bytes().endswith(b"\n")
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["status"] == "interrupted" and manifest["invocations"][0]["ended_at"]
    done = len(raw_keys(out))
    assert 5 <= done < 40
    assert _start_run(config_path, out).wait(120) == 0
    keys = raw_keys(out)
    assert len(keys) == len(set(keys)) == 40


# ------------------------------------------------------------------------------ local model
@pytest.mark.slow
@pytest.mark.usefixtures("embedded_model")
def test_local_model_plays_episodes_and_a_replay_needs_no_server(tmp_path: Path) -> None:
    config = ExperimentConfig.model_validate(
        {
            "env": "commitbench/Standing-v0", "agents": ["chat"],
            "models": [{"name": "local", "local": True, "settings": {"max_tokens": 24}}],
            "episodes": {"split": "test", "cells": ["BASE"], "gaps": [1], "policies": ["explicit"], "limit": 2},
            "concurrency": 1,
            "cache": {"path": str(tmp_path / "cache.sqlite")},
        }
    )
    live = run_experiment(config, tmp_path / "live")
    assert live.status is RunStatus.COMPLETE and live.cells_done == 2 and live.http_requests > 0
    traces = latest_traces(tmp_path / "live")
    calls = [m for t in traces for m in t.model_calls]
    assert calls and all(not m.error for m in calls)
    assert any(m.text.strip() or m.tool_calls for m in calls) and all(m.completion_tokens > 0 for m in calls)
    assert traces[0].agent is not None and traces[0].agent.settings["model"]["model"] == "smollm2"

    # The local server stopped with the first run; a replay-only run starts none and calls nothing.
    replay = config.model_copy(update={"cache": CacheConfig(path=config.cache.path, mode="replay_only")})
    again = run_experiment(replay, tmp_path / "replay")
    assert again.status is RunStatus.COMPLETE and again.http_requests == 0
    assert again.cache_hits == again.model_calls == live.model_calls
    assert os.path.exists(tmp_path / "replay" / TRACES_FILE)


def test_a_run_without_a_terminal_prints_progress_lines(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from commitbench.progress import PROGRESS_INTERVAL_S, PROGRESS_LINES
    from commitbench.runner import Runner

    assert PROGRESS_INTERVAL_S <= 30  # a log shows a line at least every 30 s
    mock_server.set_responder(standing_responder(load_episodes()))
    mock_server.set_latency(20)
    runner = Runner(chat_config(mock_server.base_url, 4, concurrency=1), tmp_path / "run", progress=PROGRESS_LINES)
    runner.progress_interval_s = 0.05  # the interval, shortened for the test
    summary = runner.run()
    assert summary.cells_done == 4
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress: ")]
    assert len(lines) >= 2  # some while playing, one at the end
    assert lines[-1].startswith("progress: 4/4 cells done, ") and " model calls, " in lines[-1]
    assert " s elapsed" in lines[-1]
