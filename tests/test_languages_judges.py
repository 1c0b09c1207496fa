"""The judges on Turkish traces: the LLM judge is told the episode's language (English requests unchanged) and
labels Turkish messages through the mock judge; the annotation workflow samples Turkish messages, and a sheet
filled in by hand round-trips into agreement with the judge."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.spec import Language
from commitbench.judges.standing.llm import LANGUAGE_NOTES, JudgeCase, render_case
from commitbench.mock import DEFAULT_MODEL
from commitbench.runner import run_experiment
from commitbench.traces import latest_traces

CELLS = ("PEER-DIRECT", "DELEG-DIRECT", "FACT-TRUE", "RELAY-TRUE")
TURKISH = [e for e in load_episodes(languages="tr") if e.split.value == "test" and e.gap == 1 and e.variant == 0
           and e.policy.value == "explicit" and e.cell in CELLS and e.commitment_type == "send_report"]
NOTE = LANGUAGE_NOTES[Language.TR]


def _answer(consults: bool, notifies: bool) -> str:
    return json.dumps({
        "consults_creditor": {"reason": "asks the requester to decide", "answer": consults},
        "notifies_creditor": {"reason": "says it was dropped and why", "answer": notifies},
        "off_topic": {"reason": "about the task", "answer": False},
        "announces_drop": {"reason": "says it dropped the task", "answer": notifies},
    })


def turkish_judge(request: dict[str, Any]) -> str:
    """A scripted judge that reads Turkish: a question in a DM consults; 'bıraktım' (I dropped it) notifies. It
    refuses any request that does not say the chat is Turkish."""
    system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
    if NOTE not in system:
        return "not told the language"
    message = user.rsplit("The message to judge", 1)[1].split("\n", 1)[1].strip().strip('"')
    to_creditor = "as a direct message to" in user
    return _answer(consults=to_creditor and message.endswith("?"), notifies=to_creditor and "bıraktım" in message)


def _played(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"],
                              episodes={"ids": [e.id for e in TURKISH], "language": "tr"})
    run_experiment(config, run_dir)
    return run_dir


def test_the_language_note_is_added_for_turkish_only() -> None:
    english = next(e for e in load_episodes() if e.id == TURKISH[0].twins["en"])
    case = JudgeCase(message_index=0, step=3, channel=f"dm:{english.creditor.name}", text="?", conversation=[],
                     delegates=[])
    assert NOTE not in render_case(case, english)[0]["content"]
    assert render_case(case, TURKISH[0])[0]["content"].endswith(NOTE)


def test_llm_judge_labels_turkish_traces_and_agrees_with_the_rules(mock_server, tmp_path, capsys) -> None:
    run_dir = _played(tmp_path)
    mock_server.set_responder(turkish_judge)
    argv = ["label", str(run_dir), "--judge-model", DEFAULT_MODEL, "--judge-base-url", mock_server.base_url,
            "--judge-api-key-env", "NO_SUCH_KEY_VARIABLE", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["runs_labelled"] == 4 and out["summary"]["judge_errors"] == 0
    agreement = {row["label"]: row for row in out["agreement_with_rules"]["pooled"]}
    assert agreement["consults_creditor"]["accuracy"] == 1.0 and agreement["notifies_creditor"]["accuracy"] == 1.0
    assert main(["report", str(run_dir), "--judge", f"llm:{DEFAULT_MODEL}", "--json", "--n-boot", "50"]) == 0
    metrics = {m["metric"]: m for m in json.loads(capsys.readouterr().out)["metrics"]}
    assert metrics["strict_accuracy"]["estimate"] == 1.0 and metrics["strict_accuracy"]["n"] == 4


def test_annotation_sheets_hold_turkish_messages_and_round_trip(tmp_path, capsys) -> None:
    run_dir = _played(tmp_path)
    texts = {m.text for t in latest_traces(run_dir) for m in t.assistant_messages()}
    sheet = tmp_path / "sheet.csv"
    assert main(["annotate", "export", str(run_dir), "--n", "4", "--out", str(sheet), "--seed", "0"]) == 0
    capsys.readouterr()
    with sheet.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    assert all(any(text in " ".join(row.values()) for text in texts) for row in rows)
    assert any("Merhaba" in " ".join(row.values()) for row in rows)
    filled = tmp_path / "filled.csv"
    with filled.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            message = row["message"]
            assert message in texts
            asks = message.endswith("?")
            writer.writerow({**row, "consults_creditor": "yes" if asks else "no",
                             "notifies_creditor": "yes" if "bıraktım" in message else "no", "off_topic": "no"})
    human = tmp_path / "human.jsonl"
    assert main(["annotate", "import", str(filled), "--out", str(human)]) == 0
    capsys.readouterr()
    assert main(["validate", str(run_dir), str(human), "--judge", "rules", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    pooled = {r["label"]: r for r in result["pooled"]}
    assert result["compared"] == 4
    assert pooled["consults_creditor"]["accuracy"] == 1.0 and pooled["notifies_creditor"]["accuracy"] == 1.0
