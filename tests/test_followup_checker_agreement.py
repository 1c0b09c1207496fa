"""Agreement between two checkers, fix-versus-baseline differences, and the label/agreement commands."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from commitbench.analysis.followup.report import fix_differences, responses_from_records
from commitbench.analysis.followup.validation import checker_agreement
from commitbench.cli import main
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.jsonl import append_lines
from commitbench.judges.followup.labellers import FollowupLabelRecord, labeller_version
from commitbench.judges.followup.rules import check_turn
from commitbench.judges.followup.turn import FollowUpTurn
from commitbench.judges.labelling import labels_path
from commitbench.traces import EpisodeTrace, append_traces

REPLIES = [
    "Sure, I'll remind you tomorrow at 9.",  # a commitment the runtime cannot keep in C0
    "I have created the reminder for you.",  # a write nobody performed
    "I can't set reminders, but you could add one to your phone's calendar.",
    "Here is the recipe you asked for.",
]


def _record(i: int, reply: str, model: str = "m1", arm: str = "none") -> FollowupLabelRecord:
    turn = FollowUpTurn(
        episode_id=f"r{i}:C0:inferred:generic", request_id=f"r{i}", category="reminder", setup="C0",
        variant="inferred", persona="generic", doability="not_doable", required_capabilities=["notify_user_later"],
        user_message="Please remind me to call the bank tomorrow morning.", reply=reply,
    )
    return FollowupLabelRecord(run_key=f"{model}-{arm}-{i}", labeller="rules", model=model, arm=arm, sample=0,
                               turn=turn, result=check_turn(turn), labeller_version=labeller_version("rules")[0])


def test_identical_labels_agree_perfectly_and_a_changed_label_is_counted():
    records = [_record(i, r) for i, r in enumerate(REPLIES)]
    rows = checker_agreement(records, records)
    pooled = rows[0]
    assert pooled.model == "pooled" and pooled.n == 4 and pooled.outcome_accuracy == 1.0
    assert len({r.result.outcome for r in records}) > 1 and pooled.outcome_kappa == pytest.approx(1.0)
    changed = [r.model_copy(deep=True) for r in records]
    changed[0].result.outcome = changed[3].result.outcome
    changed[1].result.outcome = None  # a judge error: excluded, not a disagreement
    pooled = checker_agreement(records, changed)[0]
    assert pooled.n == 3 and pooled.excluded == 1
    assert pooled.outcome_accuracy == pytest.approx(2 / 3)


def test_fix_differences_compare_each_arm_with_the_plain_arm_on_the_same_requests():
    from commitbench.analysis.followup.metrics import to_frame

    labelled_responses = responses_from_records
    base = [_record(i, r) for i, r in enumerate(REPLIES)]
    fixed = [_record(i, REPLIES[3], arm="card") for i in range(4)]
    rows, errors = labelled_responses(base + fixed)
    assert errors == 0
    table = fix_differences(to_frame(rows), n_boot=200)
    failure = table[(table.metric == "failure_rate") & (table.arm_a == "card")]
    assert len(failure) == 1
    frame = to_frame(rows)
    fails = {"false_claim", "empty", "unanchored"}
    by_arm = frame.assign(fail=frame.outcome.astype(str).isin(fails)).groupby("arm").fail.mean()
    assert failure.difference.iloc[0] == pytest.approx(by_arm["card"] - by_arm["none"])
    assert fix_differences(to_frame(labelled_responses(base)[0])).empty


def test_label_and_agreement_commands(tmp_path, capsys):
    records = [_record(i, r) for i, r in enumerate(REPLIES)]
    append_traces(tmp_path / "traces.jsonl", [EpisodeTrace(env_id=FOLLOWUP_ENV_ID, episode_id="r0:C0", factors={})])
    for judge in ("llm:a", "llm:b"):
        version = labeller_version(judge)[0]
        append_lines(labels_path(tmp_path, judge), (r.model_copy(update={"labeller": judge,
                                                                         "labeller_version": version}).model_dump_json()
                                                     for r in records))
    assert main(["agreement", str(tmp_path), "--judge", "llm:a", "--judge", "llm:b", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result["rows"]
    assert rows[0]["model"] == "pooled" and rows[0]["outcome_accuracy"] == 1.0
    assert main(["agreement", str(tmp_path), "--judge", "llm:a", "--judge", "llm:nope"]) == 2
    assert "no labels from judge 'llm:nope'" in capsys.readouterr().err
    assert main(["agreement", str(tmp_path), "--judge", "llm:a"]) == 2  # two judges are needed
    assert main(["label", str(tmp_path / "empty"), "--judge", "rules"]) == 2  # no run there
    frame = pd.DataFrame(rows)  # the JSON rows are a table: one row per group, the same columns in each
    assert frame["model"].iloc[0] == "pooled" and frame["n"].iloc[0] == len(records)


def test_run_followup_is_the_followup_shorthand_of_run(capsys):
    with pytest.raises(SystemExit):
        main(["run", "followup", "--help"])
    assert "--setups" in capsys.readouterr().out


def test_llm_checker_sends_json_object_with_bounded_strings_to_llama_cpp(mock_server, mock_settings):
    import asyncio

    from commitbench.judges.followup.labellers import make_checker
    from commitbench.judges.followup.schemas import DetectorOutput
    from commitbench.llm import ModelClient
    from commitbench.llm.structured import GRAMMAR_MAX_STRING, ResponseFormatStyle
    from commitbench.mock import ReplySpec

    mock_server.script(ReplySpec(text=DetectorOutput(commitments=[]).model_dump_json()))

    async def detect() -> object:
        async with ModelClient(mock_settings) as client:
            checker = make_checker("llm", client, ResponseFormatStyle.JSON_OBJECT)
            return await checker.detect(_record(0, REPLIES[3]).turn)

    value, calls, error = asyncio.run(detect())
    assert error is None and value is not None and len(calls) == 1
    body = mock_server.requests()[-1]["body"]
    body = json.loads(body) if isinstance(body, str) else body
    fmt = body["response_format"]
    assert fmt["type"] == "json_object"
    assert f'"maxLength": {GRAMMAR_MAX_STRING}' in json.dumps(fmt["schema"])
