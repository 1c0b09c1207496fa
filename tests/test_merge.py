"""Shards of one experiment played apart, joined by ``commitbench merge``: one trace per cell, caches that agree."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _runner_fixtures import standing_responder

from commitbench.cli import main as cli_main
from commitbench.config import CacheConfig, ExperimentConfig
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.identity import in_shard
from commitbench.merge import MergeError, merge_runs
from commitbench.mock import DEFAULT_MODEL, MockServer
from commitbench.planning import expand_cells, select_config_episodes
from commitbench.rundir import MANIFEST_FILE, RunStatus, read_manifest
from commitbench.runner import run_experiment
from commitbench.traces import TRACES_FILE, latest_traces

FAST_RETRY = {"max_attempts": 10, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}


def config_for(base_url: str, limit: int = 8, **fields: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {"name": "merge", "env": "commitbench/Standing-v0", "agents": ["chat"],
         "models": [{"name": "mock", "base_url": base_url, "api_key_env": None,
                     "settings": {"model": DEFAULT_MODEL, "timeout": 10.0}, "retry": FAST_RETRY}],
         "episodes": {"split": "test", "limit": limit}, "concurrency": 4, **fields}
    )


def raw_keys(out: Path) -> list[str]:
    return [json.loads(line)["run_key"] for line in (out / TRACES_FILE).read_text().splitlines() if line.strip()]


def all_keys(config: ExperimentConfig) -> set[str]:
    return {c.run_key for c in expand_cells(config, select_config_episodes(config))}


def test_shards_are_disjoint_and_merge_into_one_complete_run(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    config = config_for(mock_server.base_url)
    first = run_experiment(config, tmp_path / "a", shard=(0, 2))
    second = run_experiment(config, tmp_path / "b", shard=(1, 2))
    assert first.status is second.status is RunStatus.COMPLETE  # each shard is complete on its own
    a, b = set(raw_keys(tmp_path / "a")), set(raw_keys(tmp_path / "b"))
    assert a and b and not a & b and a | b == all_keys(config)
    assert all(in_shard(key, (0, 2)) for key in a)
    served = mock_server.stats().chat_completions

    assert cli_main(["merge", str(tmp_path / "all"), str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "complete: 8 of 8 cells" in capsys.readouterr().out
    keys = raw_keys(tmp_path / "all")
    assert len(keys) == len(set(keys)) == 8
    manifest = read_manifest(tmp_path / "all")
    assert manifest is not None and manifest.status is RunStatus.COMPLETE and manifest.cells_done == 8
    assert len(manifest.invocations) == 2
    # The merged directory is the experiment's: running the config on it plays nothing more ...
    resumed = run_experiment(config, tmp_path / "all")
    assert resumed.status is RunStatus.COMPLETE and resumed.cells_done == 0 and resumed.cells_skipped == 8
    # ... and its merged cache replays every trace with no request.
    replay = config.model_copy(update={"cache": CacheConfig(path=tmp_path / "all" / "cache.sqlite",
                                                            mode="replay_only")})
    rebuilt = run_experiment(replay, tmp_path / "replay")
    assert rebuilt.status is RunStatus.COMPLETE and rebuilt.http_requests == 0
    assert mock_server.stats().chat_completions == served
    texts = {t.run_key: [c.text for c in t.model_calls] for t in latest_traces(tmp_path / "all")}
    assert texts == {t.run_key: [c.text for c in t.model_calls] for t in latest_traces(tmp_path / "replay")}


def test_a_cell_played_twice_is_kept_once(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    config = config_for(mock_server.base_url, 6)
    run_experiment(config, tmp_path / "a")
    run_experiment(config, tmp_path / "b")
    summary = merge_runs(tmp_path / "all", [tmp_path / "a", tmp_path / "b"])
    assert summary.status is RunStatus.COMPLETE and summary.duplicates_dropped == 6
    assert summary.traces_by_source == {str(tmp_path / "a"): 6, str(tmp_path / "b"): 0}
    assert raw_keys(tmp_path / "all") == raw_keys(tmp_path / "a")


def test_a_trace_played_with_an_answer_another_cache_contradicts_is_played_again(
    tmp_path: Path, mock_server: MockServer
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    config = config_for(mock_server.base_url, 6)
    run_experiment(config, tmp_path / "b")
    traces = {t.run_key: t for t in latest_traces(tmp_path / "b")}
    # Source a: the same experiment, with only half the cells, and a cache that answered the first call of one of
    # the other cells differently.
    a = tmp_path / "a"
    a.mkdir()
    shutil.copy(tmp_path / "b" / MANIFEST_FILE, a / MANIFEST_FILE)
    lines = (tmp_path / "b" / TRACES_FILE).read_text().splitlines(keepends=True)
    kept = [line for line in lines if in_shard(json.loads(line)["run_key"], (0, 2))]
    (a / TRACES_FILE).write_text("".join(kept))
    missing = next(key for key in traces if not in_shard(key, (0, 2)))
    contradicted = traces[missing].model_calls[0].cache_key
    shutil.copy(tmp_path / "b" / "cache.sqlite", a / "cache.sqlite")
    other = {"model": DEFAULT_MODEL, "text": "A different answer.", "reasoning": None, "tool_calls": [],
             "finish_reason": "stop", "refusal": None, "usage": {}}
    with sqlite3.connect(a / "cache.sqlite") as db:
        assert db.execute("UPDATE entries SET value=? WHERE key=?", (json.dumps(other), contradicted)).rowcount == 1

    summary = merge_runs(tmp_path / "all", [a, tmp_path / "b"])
    assert summary.cache_conflicts == 1 and summary.conflicted_dropped >= 1
    assert summary.status is RunStatus.INCOMPLETE and missing not in raw_keys(tmp_path / "all")
    # The next run plays the dropped cell from the merged cache, so its trace agrees with the cache.
    resumed = run_experiment(config, tmp_path / "all")
    assert resumed.status is RunStatus.COMPLETE and resumed.cells_done == summary.conflicted_dropped
    replayed = {t.run_key: t for t in latest_traces(tmp_path / "all")}[missing]
    assert replayed.model_calls[0].text == "A different answer."
    keys = raw_keys(tmp_path / "all")
    assert len(keys) == len(set(keys)) == 6


def test_other_experiments_and_used_targets_are_refused(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    run_experiment(config_for(mock_server.base_url, 2), tmp_path / "a")
    run_experiment(config_for(mock_server.base_url, 2, samples=2), tmp_path / "b")
    with pytest.raises(MergeError, match=r"holds another experiment .* differ in samples"):
        merge_runs(tmp_path / "all", [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(MergeError, match="is not empty"):
        merge_runs(tmp_path / "b", [tmp_path / "a"])
    with pytest.raises(MergeError, match="is not a run directory"):
        merge_runs(tmp_path / "all", [tmp_path / "a", tmp_path / "nothing"])
    assert cli_main(["run", "standing", "--agent", "creditor-rule", "--limit", "2", "--shard", "2/2",
                     "--out", str(tmp_path / "s")]) == 2
