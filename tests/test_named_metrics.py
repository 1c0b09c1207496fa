"""The papers' numbers by name in ``report --json``, each with its interval: the failure types of empty commitments,
the unanchored rate with clarifying replies, pooled rows over models, the BASE drop rate per gap, the best oracle
store per model, and the ledger's recorded releases without standing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.mock import MockServer
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment


def report_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", str(run_dir), "--json", "--n-boot", "200"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def has_interval(record: dict[str, Any], low: str = "low", high: str = "high") -> bool:
    return record.get(low) is not None and record.get(high) is not None and record[low] <= record[high]


@pytest.mark.slow
def test_standing_names_base_drops_per_gap_the_best_oracle_store_and_ledger_releases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = ExperimentConfig(
        env=STANDING_ENV_ID, agents=["creditor-rule", "drop-on-any-cancel"],
        interventions=["none", "oracle:B1", "oracle:B3", "ledger:self-kept"],
        episodes={"split": "test", "cells": ["BASE", "PEER-DIRECT", "CRED-DIRECT", "RELAY-TRUE"],
                  "policies": ["explicit"], "surfaces": [0]},
    )
    assert run_experiment(config, tmp_path / "run").status is RunStatus.COMPLETE
    report = report_json(tmp_path / "run", capsys)
    drops = [m for m in report["by_gap"] if m["metric"] == "base_drop_rate"]
    assert {m["group"]["gap"] for m in drops} == {"1", "20"}
    assert all(m["estimate"] == 0.0 and m["n"] == 6 and m["clusters"] == 6 and has_interval(m) for m in drops)
    best = report["best_oracle_store"]
    assert {(b["group"]["agent"], b["group"]["policy"]) for b in best} == {
        ("creditor-rule", "explicit"), ("drop-on-any-cancel", "explicit")}
    for row in best:
        assert row["family"] == "oracle" and row["arms_compared"] == ["oracle:B1", "oracle:B3"]
        assert row["arm"] == "oracle:B1"  # the reference agents read no prompt: a tie, the first by name
        assert has_interval(row)
    rule = next(b for b in best if b["group"]["agent"] == "creditor-rule")
    assert rule["estimate"] == 1.0
    ledger = [m for m in report["metrics"] if m["metric"] == "ledger_recorded_unauthorized_release"]
    assert [m["group"]["interventions"] for m in ledger if m["n"]] == ["ledger:self-kept", "ledger:self-kept"]
    assert all(has_interval(m) for m in ledger if m["n"])


@pytest.mark.slow
def test_followup_names_failure_types_unanchored_with_clarifying_and_pooled_rows(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    config = ExperimentConfig.model_validate({
        "name": "named", "env": FOLLOWUP_ENV_ID, "agents": ["chat"],
        "models": [{"name": name, "base_url": mock_server.base_url, "api_key_env": None,
                    "settings": {"model": name}} for name in ("m1", "m2")],
        "episodes": {"setups": ["C0", "C2"], "variants": ["inferred"], "personas": ["generic"], "limit": 40},
    })
    mock_server.set_responder(lambda request: _promising_reply(request))
    assert run_experiment(config, tmp_path / "run").status is RunStatus.COMPLETE
    report = report_json(tmp_path / "run", capsys)
    types = {r["metric"] for r in report["failure_types"]}
    assert types == {"ecr", "ecr_capability", "ecr_temporal", "ecr_agentive"}
    ecr = [r for r in report["failure_types"] if r["metric"] == "ecr" and r["denominator"]]
    assert ecr and all(has_interval(r) for r in ecr)
    clarifying = report["unanchored_with_clarifying"]
    assert clarifying and {r["metric"] for r in clarifying} == {"unanchored_rate_with_clarifying"}
    assert {r["model"] for r in clarifying} == {"m1", "m2"}
    pooled = report["pooled"]
    assert pooled and {r["model"] for r in pooled} == {"pooled"}
    assert {(r["setup"], r["variant"]) for r in pooled} == {(r["setup"], r["variant"]) for r in report["headline"]}
    assert all(has_interval(r, "failure_rate_low", "failure_rate_high") for r in pooled)


def _promising_reply(request: dict[str, Any]) -> Any:
    """A model that promises a reminder and claims to have saved something, whatever it is asked."""
    from commitbench.mock import ReplySpec

    return ReplySpec(text="Sure! I'll remind you tomorrow morning, and I've saved this for next time.")
