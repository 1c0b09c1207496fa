"""A run with live parties beside the scripted ones, read as every run is read: the report pairs the live arm
with its scripted twin (live minus scripted, per policy and per cell, with intervals) and counts per cell what
the parties worded and where the script's words stood; the party model's calls are counted apart from the
player's; the run labels and views like any other."""

from __future__ import annotations

import json
from pathlib import Path

from test_live_parties import Parties, _config, _episode

from commitbench.cli import main
from commitbench.mock import DEFAULT_MODEL
from commitbench.oracles.standing.parties import LIVE_NAME
from commitbench.runner import run_experiment

CELLS = ("CRED-DIRECT", "PEER-DIRECT", "FACT-TRUE")
TYPES = ("deploy_service", "order_supplies", "post_announcement", "schedule_call", "send_report", "share_document")


def test_the_report_pairs_live_with_scripted_and_counts_the_fallbacks_per_cell(mock_server, tmp_path: Path,
                                                                               capsys) -> None:
    # six commitment types: the bootstrap's clusters, enough for an interval
    episodes = [_episode(cell, kind) for cell in CELLS for kind in TYPES]
    peers = {p.name for e in episodes if e.cell == "PEER-DIRECT" for p in e.people if p.role == "peer"}
    mock_server.set_responder(Parties(bad_for=sorted(peers)))  # the peers' texts always fail the check
    run_dir = tmp_path / "run"
    config = _config(mock_server.base_url, episodes, parties=["scripted", "live"])
    assert run_experiment(config, run_dir).cells_failed == 0

    assert main(["report", str(run_dir), "--judge", "rules", "--json", "--n-boot", "50", "--no-figure"]) == 0
    report = json.loads(capsys.readouterr().out)
    live = [c for c in report["comparisons"] if c["kind"] == "parties"]
    assert live and {(c["a"], c["b"]) for c in live} == {(f"creditor-rule@{LIVE_NAME}", "creditor-rule@none")}
    strict = next(c for c in live if c["metric"] == "strict_accuracy")
    assert strict["estimate"] == 0.0 and strict["n_pairs"] == len(episodes)  # the rule reads the script, not the words
    assert strict["low"] is not None and strict["high"] is not None
    by_cell = {c["group"]["cell"] for c in report["comparisons_by_cell"] if c["kind"] == "parties"}
    assert by_cell == set(CELLS)
    parties = {p["cell"]: p for p in report["parties"]}
    assert set(parties) == set(CELLS) and all(p["interventions"] == LIVE_NAME for p in parties.values())
    assert {p["party_model"] for p in parties.values()} == {DEFAULT_MODEL}
    assert all(p["runs"] == len(TYPES) and p["voiced"] >= len(TYPES) for p in parties.values())
    assert parties["PEER-DIRECT"]["event_fallbacks"] >= len(TYPES)  # each peer's cancellation: the script stood
    assert sum(p["event_fallbacks"] for p in parties.values()) < sum(p["voiced"] for p in parties.values())
    cost = {c["group"]["interventions"]: c for c in report["cost"]}
    assert cost["none"]["model_calls"] == 0 and cost[LIVE_NAME]["model_calls"] == 0  # the player calls no model

    assert main(["report", str(run_dir), "--judge", "rules", "--n-boot", "50", "--no-figure"]) == 0
    text = capsys.readouterr().out
    assert "Live parties per cell" in text and "parties" in text

    labelled = ["label", str(run_dir), "--judge-model", DEFAULT_MODEL, "--judge-base-url", mock_server.base_url,
                "--judge-api-key-env", "NO_SUCH_KEY_VARIABLE", "--json"]
    mock_server.set_responder(lambda request: json.dumps({
        q: {"reason": "scripted", "answer": False} for q in ("consults_creditor", "notifies_creditor", "off_topic",
                                                             "announces_drop")}))
    assert main(labelled) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["runs_labelled"] == 2 * len(episodes)
    site = tmp_path / "site"
    assert main(["view", str(run_dir), "--out", str(site), "--no-progress"]) == 0
    assert (site / "index.html").is_file()
