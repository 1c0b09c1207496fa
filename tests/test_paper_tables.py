"""``report --paper-tables``: every table and figure of the suite's paper by name, with an index of what a run gives.

On the reference agents (standing), on a mock-model run of each suite, and on an inspect log directory: the index
names every table and figure of the paper; each one marked written or partly has its files, with the rows the
paper shows; each one marked not reproducible says why.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.mock import MockServer
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment

STANDING_ITEMS = {f"standing-table{n}" for n in range(1, 14)} | {f"standing-figure{n}" for n in range(1, 8)} | {
    "standing-section4"}
FOLLOWUP_ITEMS = {f"followup-table{n}" for n in range(1, 14)} | {f"followup-figure{n}" for n in range(1, 11)}


def index_of(directory: Path) -> dict[str, dict[str, str]]:
    with (directory / "index.csv").open(encoding="utf-8") as handle:
        return {row["id"]: row for row in csv.DictReader(handle)}


def check_index(directory: Path, expected: set[str]) -> dict[str, dict[str, str]]:
    """Every item listed once; the files of each written or partly item exist; the others say why."""
    index = index_of(directory)
    assert set(index) == expected
    for item, row in index.items():
        if row["status"] in ("written", "partly"):
            names = row["files"].split(";")
            assert f"{item}.csv" in names and f"{item}.md" in names, item
            assert all((directory / name).stat().st_size > 0 for name in names), item
            if row["kind"] == "figure" and item != "standing-section4":
                assert f"{item}.png" in names, item
            if row["status"] == "partly":
                assert row["note"], item
        else:
            assert row["status"] == "not reproducible" and row["note"] and not row["files"], item
    assert "not reproducible" in (directory / "index.md").read_text(encoding="utf-8")
    return index


def report(run_dir: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", str(run_dir), "--paper-tables", *extra, "--n-boot", "50", "--json"]) == 0
    captured = capsys.readouterr()
    assert "paper tables of" in captured.err
    return dict(json.loads(captured.out))


@pytest.mark.slow
def test_standing_paper_tables_from_the_reference_agents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule", "last-speaker-wins", "rank-wins"],
                              interventions=["none", "oracle:B1", "oracle:B3+", "ledger:self-kept"],
                              episodes={"split": "test", "surfaces": [0]})
    assert run_experiment(config, tmp_path / "run").status is RunStatus.COMPLETE
    document = report(tmp_path / "run", capsys)
    directory = tmp_path / "run" / "report" / "paper"
    assert document["paper_tables"]["out_dir"] == str(directory)
    index = check_index(directory, STANDING_ITEMS)
    assert {i for i, row in index.items() if row["status"] == "written"} >= {
        "standing-table1", "standing-table8", "standing-table12", "standing-figure5", "standing-figure6",
        "standing-figure7", "standing-section4"}
    assert index["standing-figure3"]["status"] == "partly" and "oracle:B2" in index["standing-figure3"]["note"]
    assert index["standing-table10"]["status"] == "not reproducible" and "thinking" in index["standing-table10"]["note"]
    assert index["standing-table13"]["status"] == "not reproducible" and "human labels" in index[
        "standing-table13"]["note"]
    # Table 1 as the paper shows it: one row per cell, the correct behaviour, each rule's strict accuracy.
    table1 = pd.read_csv(directory / "standing-table1.csv")
    assert len(table1) == 15
    by_cell = table1.set_index("cell")
    assert by_cell.loc["PEER-DIRECT", "correct"] == "execute + consult"
    assert by_cell["creditor-rule"].eq(1.0).all()
    assert by_cell.loc["PEER-DIRECT", "last-speaker-wins"] == 0.0 and by_cell.loc["DELEG-DIRECT", "rank-wins"] == 0.0
    # Table 5: policy alone, the best oracle store without policy, the ledger without and with the policy.
    table5 = pd.read_csv(directory / "standing-table5.csv").set_index("agent")
    assert table5.loc["creditor-rule", "policy alone"] == 1.0
    assert table5.loc["creditor-rule", "best oracle store"] in ("oracle:B1", "oracle:B3+")
    assert "ledger:self-kept + policy" in table5.columns


@pytest.mark.slow
def test_followup_paper_tables_from_a_mock_model_run(tmp_path: Path, mock_server: MockServer,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from _inspect_fixtures import followup_responder

    mock_server.set_responder(followup_responder)
    config = ExperimentConfig.model_validate({
        "name": "paper", "env": FOLLOWUP_ENV_ID, "agents": ["chat"], "interventions": ["none", "card"],
        "models": [{"name": name, "base_url": mock_server.base_url, "api_key_env": None,
                    "settings": {"model": name}} for name in ("m1", "m2")],
        "episodes": {"setups": ["C0", "C2", "C3", "C4"], "variants": ["inferred", "stated"], "limit": 60},
    })
    assert run_experiment(config, tmp_path / "run").status is RunStatus.COMPLETE
    out = tmp_path / "tables"
    report(tmp_path / "run", capsys, str(out))  # into a directory of the user's
    index = check_index(out, FOLLOWUP_ITEMS)
    assert {i for i, row in index.items() if row["status"] == "written"} >= {
        "followup-table2", "followup-table3", "followup-table5", "followup-table7", "followup-table8",
        "followup-table13", "followup-figure2", "followup-figure6", "followup-figure8", "followup-figure10"}
    assert "rewrite" in index["followup-table12"]["note"] and index["followup-table12"]["status"] == "partly"
    for item in ("followup-figure5", "followup-table6", "followup-figure1", "followup-figure4"):
        assert index[item]["status"] == "not reproducible", item
    # Table 5 as the paper shows it: one row per model and a pooled row, the six rates of its columns.
    table5 = pd.read_csv(out / "followup-table5.csv")
    assert list(table5["model"]) == ["m1", "m2", "pooled"]
    assert {"C0 inferred failure", "C0 stated failure", "C2 inferred unanchored",
            "C2 inferred over-refusal"} <= set(table5.columns)
    pooled = table5.set_index("model").loc["pooled", "C0 inferred failure"]
    assert 0.0 <= pooled <= 1.0


@pytest.mark.slow
def test_paper_tables_of_an_inspect_log_directory(tmp_path: Path, mock_server: MockServer,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from _inspect_fixtures import inspect_run
    from _runner_fixtures import standing_responder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-the-mock")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    from commitbench.episodes.standing.compiler import load_episodes

    mock_server.set_responder(standing_responder(load_episodes()))
    log = inspect_run(mock_server, "commitbench/standing", {"cells": ["BASE", "PEER-DIRECT"]}, tmp_path / "logs",
                      limit=6)
    assert log.status == "success"
    report(tmp_path / "logs", capsys)
    directory = tmp_path / "logs-commitbench" / "report" / "paper"
    index = check_index(directory, STANDING_ITEMS)
    assert index["standing-table8"]["status"] in ("written", "partly")


@pytest.mark.slow
def test_followup_paper_tables_of_an_inspect_log_directory(tmp_path: Path, mock_server: MockServer,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from _inspect_fixtures import followup_responder, inspect_run

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-the-mock")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    mock_server.set_responder(followup_responder)
    log = inspect_run(mock_server, "commitbench/followup", {"setups": ["C0", "C2"]}, tmp_path / "logs", limit=8)
    assert log.status == "success"
    report(tmp_path / "logs", capsys)
    index = check_index(tmp_path / "logs-commitbench" / "report" / "paper", FOLLOWUP_ITEMS)
    assert index["followup-table13"]["status"] == "written"
    assert index["followup-figure5"]["status"] == "not reproducible"
