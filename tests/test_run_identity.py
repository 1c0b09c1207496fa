"""One run identity: a run, its Ray twin and its merged shards agree on every identity field, each computed
through the public functions of :mod:`commitbench.identity` and :mod:`commitbench.planning`."""

from __future__ import annotations

from pathlib import Path

import pytest

from commitbench import identity
from commitbench.cli import main
from commitbench.config import load_config
from commitbench.planning import expand_cells, select_config_episodes
from commitbench.rundir import read_manifest
from commitbench.traces import latest_traces

CONFIG = """\
env: commitbench/Standing-v0
name: identity
agents: [creditor-rule, always-execute]
interventions: [none, policy:explicit]
episodes: {split: test, types: [deploy_service], cells: [BASE, CRED-DIRECT, PEER-DIRECT], gaps: [1], surfaces: [0, 1]}
concurrency: 4
"""
# Every manifest field that says what was played (the rest says when, where and by which invocation).
IDENTITY_FIELDS = ("name", "suite", "config", "config_hash", "cells_hash", "cells_total", "players", "interventions",
                   "episodes", "samples", "seeds", "prompt_hashes", "episode_set_version")


def _run(config: Path, out: Path, *extra: str) -> None:
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--no-report", *extra]) == 0


@pytest.mark.slow
def test_a_run_its_ray_twin_and_its_merged_shards_agree_on_every_identity_field(tmp_path: Path) -> None:
    config = tmp_path / "identity.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    loaded = load_config(config)
    expected = {cell.run_key for cell in expand_cells(loaded, select_config_episodes(loaded))}
    assert len(expected) == 2 * 2 * 12  # two players x two arms x 3 cells x 2 policies x 2 surfaces

    one, ray, merged = tmp_path / "one", tmp_path / "ray", tmp_path / "merged"
    _run(config, one)
    _run(config, ray, "--ray", "--workers", "2")
    shards = [tmp_path / f"shard{k}" for k in range(2)]
    for k, shard in enumerate(shards):
        _run(config, shard, "--shard", f"{k}/2")
    assert main(["merge", str(merged), *map(str, shards)]) == 0

    # The shards split the cells by the key alone: disjoint, covering, each key in its own shard.
    shard_keys = [{t.run_key for t in latest_traces(shard)} for shard in shards]
    assert shard_keys[0].isdisjoint(shard_keys[1]) and shard_keys[0] | shard_keys[1] == expected
    for k, keys in enumerate(shard_keys):
        assert keys and all(identity.in_shard(key, (k, 2)) for key in keys)

    manifests = {}
    for directory in (one, ray, merged):
        manifest = read_manifest(directory)
        assert manifest is not None
        traces = latest_traces(directory)
        keys = {t.run_key for t in traces}
        assert keys == expected, directory.name
        assert manifest.cells_hash == identity.cells_hash(keys)
        assert manifest.config_hash == identity.config_hash(manifest.config)
        assert manifest.interventions == [arm.label() for arm in loaded.interventions]
        assert {identity.arm_label(t.interventions) for t in traces} == {"none", "policy:explicit"}
        manifests[directory.name] = {name: getattr(manifest, name) for name in IDENTITY_FIELDS}
    assert manifests["one"] == manifests["ray"] == manifests["merged"]
