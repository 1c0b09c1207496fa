"""Which checker a follow-up report's labels come from: always said, never mixed."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from commitbench.cli import main
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.episodes.followup.setups import load_setups
from commitbench.episodes.followup.vocabulary import Doability, Persona, RequestCategory, SetupId
from commitbench.jsonl import append_lines
from commitbench.judges.followup.labellers import FollowupLabelRecord, labeller_version
from commitbench.judges.followup.llm import CheckResult, label_turn
from commitbench.judges.followup.schemas import DetectedCommitment, DetectorOutput, ResponseJudgeOutput
from commitbench.judges.followup.turn import FollowUpTurn
from commitbench.judges.labelling import MixedLabellersError, labels_path, one_labeller_labels
from commitbench.traces import EpisodeTrace, append_traces

OFFLINE = "offline baseline checker"
REMIND = "I'll remind you tomorrow at 9"


def record(run_key: str, setup: SetupId, reply: str, promised: bool, labeller: str) -> FollowupLabelRecord:
    turn = FollowUpTurn(
        episode_id=f"{run_key}:{setup.value}:inferred:generic", request_id=run_key, category=RequestCategory.REMINDER,
        setup=setup, variant="inferred", persona=Persona.GENERIC,
        doability=Doability.DOABLE if setup is SetupId.C2 else Doability.NOT_DOABLE,
        required_capabilities=[], user_message="Remind me tomorrow about the dentist.", reply=reply,
    )
    found = [DetectedCommitment(span=REMIND, action=REMIND, performer="self", trigger_type="time",
                                time_expression="tomorrow at 9", required_capabilities=["notify_user_later"],
                                is_offer=False, confidence=0.5)] if promised else []
    response = ResponseJudgeOutput.from_flags(rationale="scripted")
    assessed, label, rule = label_turn(turn, DetectorOutput(commitments=found), response, load_setups())
    result = CheckResult(episode_id=turn.episode_id, checker="rules" if labeller == "rules" else "llm",
                         detector=DetectorOutput(commitments=found), response=response, commitments=assessed,
                         outcome=label, rule=rule)
    return FollowupLabelRecord(run_key=run_key, labeller=labeller, model="m", arm="none", sample=0, turn=turn,
                               result=result, labeller_version=labeller_version(labeller)[0])


def records(labeller: str) -> list[FollowupLabelRecord]:
    return [
        record(f"r{i}-{setup.value}", setup, f"{REMIND}." if i % 2 else "Here is a tip.", bool(i % 2), labeller)
        for i in range(6) for setup in (SetupId.C0, SetupId.C2)
    ]


def run_dir(tmp_path: Path, labellers: dict[str, list[FollowupLabelRecord]]) -> Path:
    run = tmp_path / "run"
    # A trace for each labelled run key: the offline checker's report reads each trace's stored record.
    keys = dict.fromkeys(r.run_key for rows in labellers.values() for r in rows)
    append_traces(run / "traces.jsonl", [EpisodeTrace(env_id=FOLLOWUP_ENV_ID, episode_id=f"{key}:C0", run_key=key,
                                                      factors={}) for key in keys])
    for name, rows in labellers.items():
        append_lines(labels_path(run, name), (r.model_dump_json() for r in rows))
    return run


def test_offline_labels_say_offline_baseline_checker_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_dir(tmp_path, {"rules": records("rules")})
    assert main(["report", str(run), "--judge", "rules", "--n-boot", "20", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["checker_kind"] == OFFLINE and OFFLINE in document["title"]
    assert json.loads((run / "results.json").read_text())["checker_kind"] == OFFLINE
    written = [Path(p) for paths in document["files"].values() for p in paths]
    assert {p.name for p in written} >= {"outcomes.csv", "outcomes.md", "headline.csv", "headline.md", "outcomes.png"}
    for path in written:
        if path.suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as handle:
                rows = list(csv.DictReader(handle))
            assert rows and all(row["checker"] == OFFLINE and row["judge"] == "rules" for row in rows), path.name
        elif path.suffix == ".md":
            heading = path.read_text(encoding="utf-8").splitlines()[0]
            assert heading.startswith("# ") and OFFLINE in heading, path.name
        else:
            assert OFFLINE in Image.open(path).text["Title"]
    assert main(["report", str(run), "--judge", "rules", "--n-boot", "20"]) == 0
    printed = capsys.readouterr().out
    titles = [line for line in printed.splitlines() if line.startswith(("Outcomes", "Headline"))]
    assert len(titles) == 2 and all(OFFLINE in t for t in titles)


def test_llm_labels_say_llm_checker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_dir(tmp_path, {"llm:judge": records("llm:judge")})
    assert main(["report", str(run), "--judge", "llm:judge", "--n-boot", "20", "--json", "--no-figure"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["checker_kind"] == "LLM checker" and "offline" not in json.dumps(document["outcomes"])


def test_a_labels_file_with_two_labellers_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = records("rules")[:8] + records("llm:judge")[8:]
    run = run_dir(tmp_path, {"rules": mixed})
    with pytest.raises(MixedLabellersError, match=r"labels-rules\.jsonl holds labels of more than one labeller"):
        one_labeller_labels(labels_path(run, "rules"), FollowupLabelRecord, "rules")
    assert main(["report", str(run), "--judge", "rules", "--n-boot", "20"]) == 2
    error = capsys.readouterr().err
    assert "more than one labeller" in error and "'llm:judge': 4 records, the first is record 9" in error
    assert not (run / "report").exists()
    # Labelling into that file is refused too, so the two never merge later.
    assert main(["label", str(run), "--judge", "rules"]) == 2
    assert "more than one labeller" in capsys.readouterr().err
