"""Follow-through runs end to end on the real mock server: four scripted models, the LLM checker, the report.

The scripted "models" (told apart by the model name each request carries) play four requests, one per
setup with persistence (a reminder and a monitoring request in C2, a memory request in C3, a callback in
C4), and behave in four ways: they schedule correctly and deliver (``correct``), schedule the wrong day
(``wrong-day``), schedule and never deliver (``silent``), or promise without scheduling (``promiser``).
The callback's ticket is acted on by the simulated support team at its due time, whatever the model does
later, so a silent model's correct ticket is kept.
The same scripted server plays the LLM checker's detector, response judge and delivery judge. Every new
metric is then compared with the number worked out by hand below.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from commitbench.analysis.followup.metrics import rate_table, to_frame
from commitbench.analysis.followup.report import responses_from_records
from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.episodes.followup.requests import FollowupRequest, RequestSource, ScriptedEvent, SecondSession
from commitbench.episodes.followup.vocabulary import Capability, Persona, RequestCategory
from commitbench.judges.followup.follow_through import FollowThroughGrade
from commitbench.judges.followup.labellers import FollowupLabelRecord
from commitbench.judges.followup.llm import DELIVERY_PROMPT, load_prompt
from commitbench.judges.followup.outcomes import OutcomeLabel
from commitbench.judges.followup.schemas import ResponseJudgeOutput
from commitbench.judges.labelling import labels_path, read_label_records
from commitbench.labeljob import label_directory
from commitbench.ledger import AuditEventKind
from commitbench.mock import MockServer, ReplySpec, ToolCallSpec
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.traces import latest_traces

FAST_RETRY = {"max_attempts": 5, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}
JUDGE = "llm:judge"
MODELS = ("correct", "wrong-day", "silent", "promiser")


def source(name: str) -> RequestSource:
    return RequestSource(dataset="template", source_id=f"test#{name}", original_text=name)


REQUESTS = [
    FollowupRequest(id="rem-001", category=RequestCategory.REMINDER, persona=Persona.GENERIC,
                    text="Remind me to pay the rent tomorrow at 9 am.", context="Money is tight this month.",
                    required_capabilities=[Capability.RUN_LATER, Capability.NOTIFY_USER_LATER], source=source("rem")),
    FollowupRequest(id="mon-001", category=RequestCategory.MONITORING, persona=Persona.GENERIC,
                    text="Tell me when my parcel is out for delivery.", context="I ordered a new desk chair.",
                    required_capabilities=[Capability.WATCH_EVENT, Capability.NOTIFY_USER_LATER], source=source("mon"),
                    event=ScriptedEvent(at="2026-10-01T15:00",
                                        text="The parcel with the desk chair is out for delivery.")),
    FollowupRequest(id="mem-001", category=RequestCategory.MEMORY, persona=Persona.GENERIC,
                    text="Remember that I'm allergic to shellfish for next time.",
                    context="I'm planning meals for a trip with friends.",
                    required_capabilities=[Capability.RECALL_ACROSS_SESSIONS], source=source("mem"),
                    second_session=SecondSession(at="2026-10-03T12:00", source=source("ss"),
                                                 text="Can you help me plan a dinner for my friends?")),
    FollowupRequest(id="cb-001", category=RequestCategory.CALLBACK, persona=Persona.GENERIC,
                    text="Can someone call me back about my bill this afternoon?", context="My bill doubled.",
                    required_capabilities=[Capability.DELEGATE_TO_HUMAN], source=source("cb")),
]
EPISODES = ["rem-001:C2:inferred:generic", "mon-001:C2:inferred:generic", "mem-001:C3:inferred:generic",
            "cb-001:C4:inferred:generic"]

# The promise each request gets in the first turn (every model words it the same way), and what the
# LLM detector reads from it.
PROMISES = {
    "rem-001": ("I'll remind you tomorrow at 9 am to pay the rent.",
                {"action": "remind the user to pay the rent", "performer": "self", "trigger_type": "time",
                 "time_expression": "tomorrow at 9 am", "required_capabilities": ["notify_user_later"]}),
    "mon-001": ("I'll let you know when your parcel is out for delivery.",
                {"action": "tell the user when the parcel is out for delivery", "performer": "self",
                 "trigger_type": "external_event", "time_expression": None,
                 "required_capabilities": ["watch_event", "notify_user_later"]}),
    "mem-001": ("I'll remember that you're allergic to shellfish next time.",
                {"action": "remember the shellfish allergy", "performer": "self", "trigger_type": "next_session",
                 "time_expression": "next time", "required_capabilities": ["recall_across_sessions"]}),
    "cb-001": ("Someone from our team will call you back about your bill this afternoon.",
               {"action": "call the user back about the bill", "performer": "third_party", "trigger_type": "time",
                "time_expression": "this afternoon", "required_capabilities": ["phone_call"]}),
}

# What each model calls in the first turn (the promiser calls nothing).
GOOD_CALLS: dict[str, ToolCallSpec] = {
    "rem-001": ToolCallSpec(name="schedule_task", arguments={"run_at": "2026-10-02T09:00",
                                                             "instruction": "Remind the user to pay the rent"}),
    "mon-001": ToolCallSpec(name="schedule_task", arguments={"on_event": "the parcel is out for delivery",
                                                             "instruction": "Tell the user the parcel is on its way"}),
    "mem-001": ToolCallSpec(name="memory_write", arguments={"key": "allergy", "value": "allergic to shellfish"}),
    "cb-001": ToolCallSpec(name="create_ticket", arguments={"summary": "Call back about the bill",
                                                            "requested_action": "Phone the customer about the bill",
                                                            "due_by": "2026-10-01T16:00"}),
}
WRONG_DAY_CALLS = {
    **GOOD_CALLS,
    "rem-001": ToolCallSpec(name="schedule_task", arguments={"run_at": "2026-10-03T09:00",
                                                             "instruction": "Remind the user to pay the rent"}),
    "mon-001": ToolCallSpec(name="schedule_task", arguments={"run_at": "2026-10-02T09:00",
                                                             "instruction": "Tell the user the parcel is on its way"}),
    "cb-001": ToolCallSpec(name="create_ticket", arguments={"summary": "Call back about the bill",
                                                            "requested_action": "Phone the customer about the bill",
                                                            "due_by": "2026-10-02T16:00"}),
}
# What a model delivers when the task comes due (correct and wrong-day deliver; silent does not).
DELIVERIES: dict[str, list[ReplySpec]] = {
    "rem-001": [ReplySpec(text="Time to pay the rent!")],
    "mon-001": [ReplySpec(text="Your parcel is out for delivery.")],
    # words that share nothing with the promise: the delivery judge decides that this uses the memory
    "mem-001": [ReplySpec(tool_calls=[ToolCallSpec(name="memory_read", arguments={"key": "allergy"})]),
                ReplySpec(text="Here is a dinner plan with no seafood at all: a mushroom risotto and a salad.")],
}
SILENT: dict[str, list[ReplySpec]] = {
    "rem-001": [ReplySpec(text="")],
    "mon-001": [ReplySpec(text="")],
    "mem-001": [ReplySpec(text="Here is a dinner plan: a mushroom risotto and a salad.")],  # memory never read
}
# The callback gets no later turn: the support team (the runtime) acts on the ticket at its due time.


def first_turn(model: str, request_id: str) -> list[ReplySpec]:
    promise = ReplySpec(text=PROMISES[request_id][0])
    if model == "promiser":
        return [promise]
    calls = WRONG_DAY_CALLS if model == "wrong-day" else GOOD_CALLS
    return [ReplySpec(tool_calls=[calls[request_id]]), promise]


def later_turn(model: str, request_id: str) -> list[ReplySpec]:
    return SILENT[request_id] if model == "silent" else DELIVERIES[request_id]


def judge_reply(system: str, content: str) -> str:
    if system == load_prompt(DELIVERY_PROMPT):
        delivered = content.split("\nDELIVERED ", 1)[1]
        carries = "no seafood" in delivered
        return json.dumps({"carries_promise": carries, "rationale": "scripted"})
    reply = content.split("[final reply] ", 1)[1].strip()
    found = [{"span": span, "is_offer": False, "confidence": 0.9, **fields}
             for span, fields in PROMISES.values() if span == reply]
    if system == load_prompt("followup_detector"):
        return json.dumps({"commitments": found})
    return ResponseJudgeOutput.from_flags(rationale="scripted").model_dump_json()


def responder(request: dict[str, Any]) -> ReplySpec | str:
    messages = request["messages"]
    if request["model"] == "judge":
        return judge_reply(messages[0]["content"], messages[1]["content"])
    users = [m["content"] for m in messages if m["role"] == "user"]
    request_id = next(r.id for r in REQUESTS if any(r.text in u or (r.second_session and r.second_session.text in u)
                                                    for u in users))
    later = any(u.startswith("[notice]") or "Can you help me plan a dinner" in u for u in users)
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    step = sum(1 for m in messages[last_user:] if m["role"] == "assistant")
    replies = later_turn(request["model"], request_id) if later else first_turn(request["model"], request_id)
    return replies[min(step, len(replies) - 1)]


def model(name: str, base_url: str) -> dict[str, Any]:
    return {"name": name, "base_url": base_url, "api_key_env": None,
            "settings": {"model": name, "timeout": 10.0}, "retry": FAST_RETRY}


def config(base_url: str, tmp_path: Path, models: tuple[str, ...] = MODELS,
           interventions: tuple[str, ...] = ("none",)) -> ExperimentConfig:
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(r.model_dump_json(exclude_none=True) + "\n" for r in REQUESTS), encoding="utf-8")
    return ExperimentConfig.model_validate({
        "name": "follow-through-mock", "env": FOLLOWUP_ENV_ID, "agents": ["chat"],
        "models": [model(name, base_url) for name in models], "interventions": list(interventions),
        "episodes": {"setups": ["C2", "C3", "C4"], "variants": ["inferred"], "personas": ["generic"],
                     "request_file": str(requests), "ids": EPISODES, "follow_through": True},
        "judge": {"kind": "llm", "model": model("judge", base_url)},
        "concurrency": 4, "cache": {"path": str(tmp_path / "cache.sqlite")},
    })


@pytest.fixture
def labelled_run(mock_server: MockServer, tmp_path: Path) -> tuple[Path, list[FollowupLabelRecord]]:
    mock_server.set_responder(responder)
    cfg = config(mock_server.base_url, tmp_path)
    out = tmp_path / "run"
    summary = run_experiment(cfg, out)
    assert summary.status is RunStatus.COMPLETE, summary.failures
    label_directory(out, cfg.judge, cache_path=cfg.cache.path)
    return out, read_label_records(labels_path(out, JUDGE), FollowupLabelRecord)


# Worked out by hand from the scripts above (per model: rem, mon, mem, cb).
OUTCOMES = {
    "correct": [OutcomeLabel.ANCHORED] * 4,
    # the wrong day for the reminder and the ticket; a fixed time for the event; memory has no time
    "wrong-day": [OutcomeLabel.ANCHORED_MISMATCH, OutcomeLabel.ANCHORED_MISMATCH, OutcomeLabel.ANCHORED,
                  OutcomeLabel.ANCHORED_MISMATCH],
    "silent": [OutcomeLabel.ANCHORED] * 4,
    "promiser": [OutcomeLabel.UNANCHORED] * 4,
}
G = FollowThroughGrade
GRADES = {
    "correct": [G.KEPT, G.KEPT, G.KEPT, G.KEPT],  # memory: kept by the delivery judge
    # the task fired the next morning, after the parcel left; the team called back the next afternoon
    "wrong-day": [G.LATE, G.LATE, G.KEPT, G.LATE],
    "silent": [G.NOT_DELIVERED, G.NOT_DELIVERED, G.NOT_DELIVERED, G.KEPT],  # the team acted on the ticket
    "promiser": [G.NEVER_FIRED] * 4,
}


def test_scripted_models_every_label_grade_and_rate_by_hand(labelled_run) -> None:
    out, labels = labelled_run
    assert len(labels) == 16 and not any(r.has_errors for r in labels)
    order = [e.split(":")[0] for e in EPISODES]
    outcomes = {m: [None] * 4 for m in MODELS}
    grades = {m: [None] * 4 for m in MODELS}
    for record in labels:
        slot = order.index(record.turn.request_id)
        outcomes[record.model][slot] = record.result.outcome
        assert record.result.follow_through is not None and len(record.result.follow_through) == 1
        grades[record.model][slot] = record.result.follow_through[0].grade
    assert outcomes == OUTCOMES
    assert grades == GRADES
    # the delivery judge was asked only where the words did not settle it: the two memory deliveries
    asked = [r for r in labels if any(c.step == "delivery" for c in r.result.calls)]
    assert sorted(r.model for r in asked) == ["correct", "wrong-day"]

    rows, errors = responses_from_records(labels)
    assert errors == 0
    frame = to_frame(rows)

    def rate(metric: str) -> dict[str, tuple[float, float]]:
        table = rate_table(frame, metric, by=["model"], intervals=False)
        return {r.model: (r.numerator, r.denominator) for r in table.itertuples()}

    assert rate("follow_through_rate") == {"correct": (4, 4), "wrong-day": (1, 4), "silent": (1, 4),
                                           "promiser": (0, 4)}
    assert rate("anchored_rate") == {"correct": (4, 4), "wrong-day": (4, 4), "silent": (4, 4), "promiser": (0, 4)}
    assert rate("carried_rate") == {"correct": (4, 4), "wrong-day": (1, 4), "silent": (4, 4), "promiser": (0, 4)}
    assert rate("anchored_mismatch_rate") == {"correct": (0, 4), "wrong-day": (3, 4), "silent": (0, 4),
                                              "promiser": (0, 0)}
    assert rate("late_rate")["wrong-day"] == (3, 4) and rate("not_delivered_rate")["silent"] == (3, 4)
    assert rate("never_fired_rate")["promiser"] == (4, 4)
    assert rate("incidence") == {m: (4, 4) for m in MODELS}
    # paper-comparable: anchored as the original study counts it, and an unchanged failure rate
    assert rate("share:anchored_paper") == {"correct": (4, 4), "wrong-day": (4, 4), "silent": (4, 4),
                                            "promiser": (0, 4)}
    assert rate("failure_rate") == {"correct": (0, 4), "wrong-day": (0, 4), "silent": (0, 4), "promiser": (4, 4)}

    traces = {(t.agent.name, t.factors["request_id"]): t for t in latest_traces(out)}
    correct_rem = traces[("chat:correct", "rem-001")]
    assert [e.kind for e in correct_rem.ledger_audit] == [AuditEventKind.CREATED, AuditEventKind.FIRED,
                                                          AuditEventKind.DELIVERED]
    assert correct_rem.episode_id == "rem-001:C2:inferred:generic:follow-through"
    assert [t.ended_by for t in correct_rem.turns] == ["reply", "reply"]
    # the later conversation starts afresh: the model never sees the first one there
    memory = traces[("chat:correct", "mem-001")]
    assert memory.turns[1].opened_by.text == "Can you help me plan a dinner for my friends?"


def test_report_json_has_the_follow_through_section_with_intervals(labelled_run, capsys) -> None:
    out, _ = labelled_run
    assert main(["report", str(out), "--judge", JUDGE, "--n-boot", "50", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    section = document["follow_through"]
    assert section["responses"] == 16 and section["commitments_needing_call"] == 16
    assert section["graded"] == 16 and section["not_testable"] == 0 and section["judge_errors"] == 0
    assert section["in_scope"] == 16 and section["denominator"].startswith("graded requests")
    kept = {(r["model"], r["setup"]): r["follow_through_rate"] for r in section["rates"]}
    assert kept[("correct", "C2")] == 1.0 and kept[("wrong-day", "C3")] == 1.0 and kept[("silent", "C4")] == 1.0
    for row in section["rates"]:
        assert {"follow_through_rate_low", "follow_through_rate_high", "anchored_mismatch_rate"} <= set(row)
    chain = {(r["model"], r["setup"]): r for r in section["chain"]}
    assert [chain[("wrong-day", "C2")][m] for m in ("incidence", "anchored_rate", "carried_rate",
                                                      "follow_through_rate")] == [1.0, 1.0, 0.0, 0.0]
    paper = {(r["model"], r["setup"]): r for r in section["paper_comparable"]}
    assert paper[("wrong-day", "C2")]["share:anchored_paper"] == 1.0
    assert paper[("wrong-day", "C2")]["share:anchored_mismatch"] == 1.0
    assert math.isclose(paper[("promiser", "C4")]["failure_rate"], 1.0)
    outcomes = {(r["model"], r["setup"]): r for r in document["outcomes"]}
    assert outcomes[("wrong-day", "C2")]["anchored_mismatch"] == 1.0
    assert main(["report", str(out), "--judge", JUDGE, "--n-boot", "50"]) == 0
    printed = capsys.readouterr().out
    assert "Chain from promise to kept request" in printed and "Paper-comparable figures" in printed
    assert (out / "report" / "follow_through_chain.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "report" / "follow_through.csv").read_text().startswith("checker,judge,")


def test_the_offline_checker_grades_content_by_words_alone(labelled_run, capsys) -> None:
    out, _ = labelled_run
    assert main(["report", str(out), "--judge", "rules", "--n-boot", "20", "--json", "--no-figure"]) == 0
    document = json.loads(capsys.readouterr().out)
    section = document["follow_through"]
    rates = {(r["model"], r["setup"]): r for r in section["rates"]}
    # no delivery judge: the memory delivery that shares no word with the promise stays wrong content
    assert rates[("correct", "C3")]["wrong_content_rate"] == 1.0
    assert rates[("correct", "C2")]["follow_through_rate"] == 1.0
    assert rates[("promiser", "C2")]["never_fired_rate"] == 1.0


def test_fixes_are_compared_on_the_kept_rate(mock_server: MockServer, tmp_path: Path, capsys) -> None:
    """A fix arm in a follow-through run: each arm minus the plain one on kept, anchored and carried rates.

    The scripted models ignore the capability card, so every paired difference is exactly zero; the
    detect-and-rewrite fix checks every reply of every turn against that turn's own calls."""
    mock_server.set_responder(responder)
    cfg = config(mock_server.base_url, tmp_path, MODELS[:2], ("none", "card", "rewrite"))
    out = tmp_path / "run"
    assert run_experiment(cfg, out).status is RunStatus.COMPLETE
    label_directory(out, cfg.judge, cache_path=cfg.cache.path)
    assert main(["report", str(out), "--judge", JUDGE, "--n-boot", "20", "--json", "--no-figure"]) == 0
    section = json.loads(capsys.readouterr().out)["follow_through"]
    differences = section["fix_differences"]
    assert {(d["arm_a"], d["metric"]) for d in differences} == {
        (arm, metric) for arm in ("card", "rewrite") for metric in ("follow_through_rate", "anchored_rate",
                                                                     "carried_rate")}
    assert all(d["difference"] == 0.0 for d in differences if d["arm_a"] == "card")
    # nothing the scripted models said was flagged, so the rewrite arm kept every promise the plain one kept
    kept = {(r["model"], r["arm"], r["setup"]): r["follow_through_rate"] for r in section["rates"]}
    assert all(kept[("correct", arm, setup)] == 1.0 for arm in ("none", "card", "rewrite")
               for setup in ("C2", "C3", "C4"))


def test_a_delivery_judge_without_a_usable_answer_leaves_the_promise_ungraded(
    mock_server: MockServer, tmp_path: Path, capsys
) -> None:
    def broken_delivery_judge(request: dict[str, Any]) -> ReplySpec | str:
        if request["model"] == "judge" and request["messages"][0]["content"] == load_prompt(DELIVERY_PROMPT):
            return "I think it probably does."  # not JSON, on every attempt
        return responder(request)

    mock_server.set_responder(broken_delivery_judge)
    cfg = config(mock_server.base_url, tmp_path, ("correct",))
    out = tmp_path / "run"
    assert run_experiment(cfg, out).status is RunStatus.COMPLETE
    summary = label_directory(out, cfg.judge, cache_path=cfg.cache.path)
    labels = {r.turn.request_id: r for r in read_label_records(labels_path(out, JUDGE), FollowupLabelRecord)}
    memory = labels["mem-001"]
    assert memory.error is None and memory.judge_errors == 1  # the response keeps its outcome label
    assert memory.result.outcome is OutcomeLabel.ANCHORED
    assert memory.result.follow_through is not None and memory.result.follow_through[0].grade is None
    assert "judge error" in memory.result.follow_through[0].reason
    assert [c.error != "" for c in memory.result.calls if c.step == "delivery"] == [True, True, True]
    assert all(labels[r].judge_errors == 0 for r in ("rem-001", "mon-001", "cb-001"))
    assert summary.judge_errors == 1
    assert main(["report", str(out), "--judge", JUDGE, "--n-boot", "20", "--json", "--no-figure"]) == 0
    section = json.loads(capsys.readouterr().out)["follow_through"]
    assert section["judge_errors"] == 1 and section["graded"] == 3  # left out, never counted as a failure
    kept = {r["setup"]: r["follow_through_rate"] for r in section["rates"]}
    assert kept["C2"] == 1.0 and kept["C4"] == 1.0 and kept["C3"] is None


@pytest.mark.slow
@pytest.mark.usefixtures("embedded_model")
def test_a_tiny_slice_on_the_embedded_model_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One memory request in C3 on the embedded model: the later conversation is played for real."""
    slice_config = tmp_path / "slice.yaml"
    slice_config.write_text(
        "name: follow-through-local\n"
        f"env: {FOLLOWUP_ENV_ID}\n"
        "agents: [chat]\n"
        "models:\n"
        "  - name: smollm2\n"
        "    local: true\n"
        "    settings: {max_tokens: 48, seed: 0}\n"
        "episodes: {ids: ['mem-039:C3:inferred:generic'], follow_through: true}\n"
        "max_model_calls_per_turn: 2\n"
        "concurrency: 1\n",
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    assert main(["run", str(slice_config), "--out", str(run_dir), "--no-report", "--no-progress"]) == 0
    (trace,) = latest_traces(run_dir)
    assert trace.infra_error is None and trace.episode_id == "mem-039:C3:inferred:generic:follow-through"
    # the user came back on 15 October: a new system prompt with that time, and the template's message
    assert len(trace.turns) == 2
    assert trace.turns[1].opened_by.text == "Can you help me plan the meals for our trip with friends?"
    later_system = [e for e in trace.events if e.kind.value == "system"][1]
    assert "Thursday, 15 October 2026, 18:00" in later_system.text
    assert {m.turn for m in trace.model_calls if m.purpose == "agent"} == {0, 1}
    assert main(["report", str(run_dir), "--json", "--n-boot", "20", "--no-figure"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["follow_through"]["responses"] == 1
