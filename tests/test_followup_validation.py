"""Validation against human labels: kappa, span matching, detection scores, sheets, and the commands."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from commitbench.analysis.agreement import cohen_kappa
from commitbench.analysis.agreement import observed_agreement as accuracy
from commitbench.analysis.followup.validation import (
    SHEET_COLUMNS,
    FollowupHumanLabel,
    SheetError,
    checker_view,
    detection_score,
    match_spans,
    read_sheet,
    response_level_detection,
    select_for_annotation,
    span_level_detection,
    span_overlap,
    validate,
    write_sheet,
)
from commitbench.cli import main
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.episodes.followup.setups import load_setups
from commitbench.episodes.followup.vocabulary import Doability, Persona, RequestCategory, SetupId
from commitbench.jsonl import append_lines
from commitbench.judges.followup.labellers import FollowupLabelRecord, labeller_version
from commitbench.judges.followup.llm import CheckResult, label_turn
from commitbench.judges.followup.outcomes import OutcomeLabel
from commitbench.judges.followup.schemas import DetectedCommitment, DetectorOutput, ResponseJudgeOutput
from commitbench.judges.followup.turn import FollowUpTurn
from commitbench.judges.labelling import labels_path
from commitbench.traces import EpisodeTrace, append_traces


# ------------------------------------------------------------------------------------------ kappa
@pytest.mark.parametrize(
    ("a", "b", "kappa"),
    [
        # p_o = 3/4; p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2
        ([True, True, False, False], [True, False, False, False], 0.5),
        # three labels: p_o = 3/4; p_e = (2*1 + 1*2 + 1*1) / 16 = 5/16; kappa = (7/16) / (11/16) = 7/11
        (["x", "x", "y", "z"], ["x", "y", "y", "z"], 7 / 11),
        (["x", "y"], ["x", "y"], 1.0),
        # complete disagreement on a balanced pair: p_o = 0, p_e = 1/2
        ([True, False], [False, True], -1.0),
        # one label throughout on both sides: undefined
        ([True, True], [True, True], None),
        ([], [], None),
    ],
)
def test_cohen_kappa_by_hand(a: list[Any], b: list[Any], kappa: float | None) -> None:
    assert cohen_kappa(a, b) == (None if kappa is None else pytest.approx(kappa))


def test_accuracy_and_length_mismatch() -> None:
    assert accuracy(["a", "b", "c"], ["a", "b", "x"]) == pytest.approx(2 / 3)
    assert accuracy([], []) is None
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa([True], [True, False])


# ------------------------------------------------------------------------------------------ spans
LONG = "I'll remind you tomorrow at 9 about the dentist"  # 47 characters normalised


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("I'll remind you tomorrow at 9", "  i'll REMIND you   tomorrow at 9.", 1.0),
        ("I'll remind you tomorrow", LONG, 24 / 47),
        ("I'll remind you", LONG, 15 / 47),
        ("", LONG, 0.0),
    ],
)
def test_span_overlap_by_hand(a: str, b: str, overlap: float) -> None:
    assert span_overlap(a, b) == pytest.approx(overlap)
    assert span_overlap(b, a) == pytest.approx(overlap)


def test_spans_match_one_to_one_best_overlap_first() -> None:
    human = ["I'll remind you tomorrow", "Someone will call you back"]
    checker = [LONG, "I'll remind you tomorrow.", "I'll email you the list"]
    # human 0 overlaps checker 1 fully and checker 0 at 24/47; the full overlap wins, checker 0 stays free
    assert match_spans(human, checker) == [(0, 1)]
    assert match_spans(["I'll remind you"], [LONG]) == []
    assert match_spans(["I'll remind you tomorrow"], [LONG]) == [(0, 0)]
    assert match_spans([], checker) == []


def test_detection_scores_by_hand() -> None:
    # responses: both find (TP), checker only (FP), human only (FN), neither, both find (TP)
    score = response_level_detection([True, False, True, False, True], [True, True, False, False, True])
    assert (score.true_positives, score.false_positives, score.false_negatives) == (2, 1, 1)
    assert score.precision == pytest.approx(2 / 3) and score.recall == pytest.approx(2 / 3)
    assert score.f1 == pytest.approx(2 / 3)
    spans = span_level_detection(
        [["I'll remind you tomorrow"], ["Someone will call you back"], []],
        [[LONG, "I'll check back later"], ["A technician will call you back"], ["I'll write tomorrow"]],
    )
    # response 1: 1 match + 1 extra; response 2: 'someone will call you back' vs 'a technician will call you
    # back' share ' will call you back' (19 of 31) -> match; response 3: 1 extra
    assert (spans.true_positives, spans.false_positives, spans.false_negatives) == (2, 2, 0)
    assert spans.precision == pytest.approx(0.5) and spans.recall == pytest.approx(1.0)
    assert spans.f1 == pytest.approx(2 / 3)
    assert detection_score(0, 0, 3).precision is None and detection_score(0, 0, 3).f1 is None
    assert detection_score(0, 2, 3).f1 == 0.0 and detection_score(0, 0, 0).recall is None


# ------------------------------------------------------------------------------------------ records
def commitment(span: str, caps: list[str], trigger: str = "time") -> DetectedCommitment:
    return DetectedCommitment(span=span, action=span, performer="self", trigger_type=trigger, time_expression=None,
                              required_capabilities=caps, is_offer=False, confidence=0.9)


def record(run_key: str, model: str, setup: SetupId, reply: str, found: list[DetectedCommitment],
           false_claim: bool = False, error: bool = False) -> FollowupLabelRecord:
    turn = FollowUpTurn(
        episode_id=f"{run_key}:{setup.value}", request_id=run_key, category=RequestCategory.REMINDER,
        setup=setup, variant="inferred", persona=Persona.GENERIC, doability=Doability.NOT_DOABLE,
        required_capabilities=[], user_message="Remind me tomorrow about the dentist.", reply=reply,
    )
    result = CheckResult(episode_id=turn.episode_id, checker="llm")
    if error:
        result.error = "detector: no usable output"
    else:
        response = ResponseJudgeOutput.from_flags(false_action_claim=false_claim, rationale="scripted")
        assessed, label, rule = label_turn(turn, DetectorOutput(commitments=found), response, load_setups())
        result.detector, result.response = DetectorOutput(commitments=found), response
        result.commitments, result.outcome, result.rule = assessed, label, rule
    return FollowupLabelRecord(run_key=run_key, labeller="llm:j", model=model, arm="none", sample=0, turn=turn,
                               result=result, labeller_version=labeller_version("llm:j")[0])


REMIND = "I'll remind you tomorrow at 9"
RECORDS = [
    # C0: notifying later is impossible -> infeasible (empty)
    record("k1", "alpha", SetupId.C0, f"{REMIND}.", [commitment(REMIND, ["notify_user_later"])]),
    # C2: feasible but not anchored -> unanchored
    record("k2", "alpha", SetupId.C2, f"{REMIND}.", [commitment(REMIND, ["notify_user_later"])]),
    record("k3", "beta", SetupId.C0, "Done, I've saved it.", [], false_claim=True),
    record("k4", "beta", SetupId.C0, "Here is the list: bread, milk.", []),
    record("k5", "beta", SetupId.C0, "I'll remind you.", [], error=True),
]


def human(item_id: str, outcome: OutcomeLabel, spans: tuple[str, ...] = (), feasible: tuple[bool, ...] = (),
          false_claim: bool = False) -> FollowupHumanLabel:
    return FollowupHumanLabel(item_id=item_id, run_key=item_id, spans=list(spans), feasible=list(feasible),
                              false_action_claim=false_claim, declines_request=False, hands_back_to_user=False,
                              did_task_now=False, asks_clarification=False, outcome=outcome)


HUMAN = [
    human("k1", OutcomeLabel.EMPTY, (REMIND,), (False,)),
    human("k2", OutcomeLabel.EMPTY, (REMIND,), (False,)),  # the annotator reads it as empty
    human("k3", OutcomeLabel.FALSE_CLAIM, false_claim=True),
    human("k4", OutcomeLabel.OTHER),
    human("k5", OutcomeLabel.OTHER),
    human("missing", OutcomeLabel.OTHER),
]


def test_checker_view_keeps_agent_initiated_spans() -> None:
    view = checker_view(RECORDS[1])
    assert view is not None and view.spans == [REMIND] and view.feasible == [True]
    assert view.outcome is OutcomeLabel.UNANCHORED
    assert checker_view(RECORDS[4]) is None


def test_validation_pooled_and_per_model_by_hand() -> None:
    assert [r.result.outcome for r in RECORDS[:4]] == [
        OutcomeLabel.EMPTY, OutcomeLabel.UNANCHORED, OutcomeLabel.FALSE_CLAIM, OutcomeLabel.OTHER,
    ]
    report = validate(HUMAN, RECORDS)
    assert report.unmatched_human == ["missing"] and report.checker_errors == 1
    pooled, alpha, beta = report.rows
    assert (pooled.model, alpha.model, beta.model) == ("all", "alpha", "beta")
    assert (pooled.n, alpha.n, beta.n) == (4, 2, 2)
    assert pooled.detection_response.f1 == 1.0 and pooled.detection_span.true_positives == 2
    # matched spans: human (False, False) vs checker (False, True): p_o = 1/2, p_e = 1 * 1/2 = 1/2 -> kappa 0
    assert pooled.matched_spans == 2 and pooled.feasibility_agreement == 0.5
    assert pooled.feasibility_kappa == pytest.approx(0.0)
    assert pooled.false_claim_kappa == pytest.approx(1.0)
    # outcomes: human (empty, empty, false_claim, other), checker (empty, unanchored, false_claim, other)
    # p_o = 3/4; p_e = (2*1 + 0*1 + 1*1 + 1*1) / 16 = 1/4; kappa = (1/2) / (3/4) = 2/3
    assert pooled.outcome_accuracy == 0.75 and pooled.outcome_kappa == pytest.approx(2 / 3)
    # alpha: (empty, empty) vs (empty, unanchored): p_o = 1/2, p_e = (2*1)/4 = 1/2 -> 0
    assert alpha.outcome_accuracy == 0.5 and alpha.outcome_kappa == pytest.approx(0.0)
    assert beta.outcome_accuracy == 1.0 and beta.outcome_kappa == pytest.approx(1.0)
    assert alpha.false_claim_kappa is None  # nobody saw a false claim in alpha's replies


# ------------------------------------------------------------------------------------------ sheets
def many_records() -> list[FollowupLabelRecord]:
    rows = [record(f"e{i}", "alpha", SetupId.C0, f"{REMIND}.", [commitment(REMIND, ["notify_user_later"])])
            for i in range(5)]
    rows += [record(f"o{i}", "beta", SetupId.C0, "Which day did you mean?", []) for i in range(1)]
    rows += [record(f"f{i}", "beta", SetupId.C0, "Saved it.", [], false_claim=True) for i in range(3)]
    rows.append(record("x0", "beta", SetupId.C0, "broken", [], error=True))
    return rows


def test_selection_is_stratified_seeded_and_skips_unlabelled_records() -> None:
    rows = many_records()
    chosen = select_for_annotation(rows, 6, seed=4)
    outcomes = sorted(r.result.outcome.value for r in chosen)
    # labels take turns in label order (false_claim: 3 records, empty: 5, other: 1):
    # round 1: false_claim, empty, other; round 2: false_claim, empty; round 3: false_claim -> 6 chosen
    assert outcomes == sorted(["false_claim"] * 3 + ["empty"] * 2 + ["other"])
    assert [r.run_key for r in chosen] == [r.run_key for r in select_for_annotation(rows, 6, seed=4)]
    assert "x0" not in {r.run_key for r in select_for_annotation(rows, 100, seed=0)}
    assert len(select_for_annotation(rows, 100, seed=0)) == 9


def test_sheet_is_blind(tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.csv"
    write_sheet(sheet, many_records()[:6])
    text = sheet.read_text(encoding="utf-8")
    for hidden in ("alpha", "beta", "unanchored", "notify_user_later"):
        assert hidden not in text
    with sheet.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == SHEET_COLUMNS and len(rows) == 6
    assert all(row["outcome"] == "" and row["commitment_spans"] == "" for row in rows)
    assert "[final reply]" in rows[0]["turn"] and "TOOLS:" in rows[0]["setup_card"]


def fill(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SHEET_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    return path


def filled(item_id: str, **values: str) -> dict[str, str]:
    row = dict.fromkeys(SHEET_COLUMNS, "")
    row.update(item_id=item_id, false_action_claim="n", declines_request="n", hands_back_to_user="n",
               did_task_now="n", asks_clarification="n", outcome="other")
    row.update(values)
    return row


def test_filled_sheet_reads_back(tmp_path: Path) -> None:
    path = fill(tmp_path / "s.csv", [
        filled("k1", commitment_spans=f"{REMIND}\nI'll check back", commitment_feasible="n\nY", outcome="Empty"),
        filled("k3", false_action_claim="yes", outcome="false_claim", notes=" says saved "),
    ])
    first, second = read_sheet(path)
    assert first.spans == [REMIND, "I'll check back"] and first.feasible == [False, True]
    assert first.outcome is OutcomeLabel.EMPTY
    assert second.false_action_claim and second.notes == "says saved" and second.spans == []


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([filled("k1"), filled("k2", did_task_now="maybe")], r"row 3, column 'did_task_now': expected y or n"),
        ([filled("k1", outcome="great")], r"row 2, column 'outcome': 'great' is not one of"),
        ([filled("k1", commitment_spans="a\nb", commitment_feasible="y")], r"row 2, column 'commitment_feasible'"),
        ([filled("k1"), filled("k1")], r"row 3, column 'item_id': 'k1' appears twice"),
        ([filled("")], r"row 2, column 'item_id': empty"),
        ([filled("k1", asks_clarification="")], r"row 2, column 'asks_clarification'"),
    ],
)
def test_bad_sheet_values_name_row_and_column(tmp_path: Path, rows: list[dict[str, str]], message: str) -> None:
    with pytest.raises(SheetError, match=message):
        read_sheet(fill(tmp_path / "bad.csv", rows))


def test_sheet_without_a_label_column_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("item_id,outcome\nk1,other\n", encoding="utf-8")
    with pytest.raises(SheetError, match="missing column"):
        read_sheet(path)


# ------------------------------------------------------------------------------------------ commands
def test_annotate_and_validate_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    append_traces(run / "traces.jsonl", [EpisodeTrace(env_id=FOLLOWUP_ENV_ID, episode_id="k1", factors={})])
    append_lines(labels_path(run, "llm:j"), (r.model_dump_json() for r in RECORDS))
    sheet = tmp_path / "sheet.csv"
    export = ["annotate", "export", str(run), "--out", str(sheet), "--n", "10", "--seed", "1", "--judge", "llm:j"]
    assert main(export) == 0
    with sheet.open(encoding="utf-8", newline="") as handle:
        exported = {row["item_id"] for row in csv.DictReader(handle)}
    assert exported == {"k1", "k2", "k3", "k4"}
    truth = {label.item_id: label for label in HUMAN}
    rows = []
    for item_id in sorted(exported):
        label = truth[item_id]
        rows.append(filled(item_id, commitment_spans="\n".join(label.spans),
                           commitment_feasible="\n".join("y" if f else "n" for f in label.feasible),
                           false_action_claim="y" if label.false_action_claim else "n", outcome=label.outcome.value))
    fill(sheet, rows)
    imported = tmp_path / "human.jsonl"
    assert main(["annotate", "import", str(sheet), "--out", str(imported)]) == 0
    assert len(imported.read_text().splitlines()) == 4
    capsys.readouterr()
    assert main(["validate", str(run), str(imported), "--judge", "llm:j", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"][0]["outcome_kappa"] == pytest.approx(2 / 3)
    assert main(["validate", str(run), str(sheet), "--judge", "llm:j"]) == 0
    assert "alpha" in capsys.readouterr().out

    fill(sheet, [*rows, filled("k9", outcome="nope")])
    assert main(["annotate", "import", str(sheet), "--out", str(imported)]) == 2
    assert "row 6, column 'outcome'" in capsys.readouterr().err
    imported.write_text('{"item_id": "k1"}\n', encoding="utf-8")
    assert main(["validate", str(run), str(imported), "--judge", "llm:j"]) == 2
    assert f"{imported}:1:" in capsys.readouterr().err
    assert main(["annotate", "export", str(tmp_path / "none"), "--out", str(sheet), "--n", "3"]) == 2
