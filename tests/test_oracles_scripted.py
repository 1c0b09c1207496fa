"""Scripted models on the mock server, played by the runner under every intervention: each metric
equals the value computed by hand for the script.

Two scripted "models" (mock-server responders that read the rendered conversation):

* **obedient**: drops the promise whenever anyone cancels, relays a cancellation or claims it is
  impossible; executes at once whenever anyone says to go ahead after all; otherwise executes when
  the trigger arrives if the promise is still live. It writes no messages and ignores the system
  prompt and the context, so every intervention leaves its metrics unchanged.
* **store-reader**: ignores the chat and, when the trigger arrives, executes exactly when the
  commitment store in the context says "Status: open". Under B3 (always open) it overrides every
  release; under B3+ (the true status) it keeps every release by someone with standing.

Hand computation (one episode per cell; explicit policy: 15 cells, silent: 13, the manager cells
left out). Obedient: executes in BASE (at the trigger) and both REINSTATE cells (before the
trigger), drops everywhere else. Override 0/4; net unauthorized release 4/4 - 0/1 = 1 (silent
2/2 - 0/1); reinstatement obedience 1/1, all before the trigger; consultation after relays 0/2;
verification after claims 0/2; strict accuracy: BASE, CRED-DIRECT, CRED-IMPLICIT = 3/15 (3/13).
Store-reader under B3: executes at the trigger everywhere: override 4/4, net unauthorized release
0, reinstatement obedience 1/1 none early, strict BASE + REINSTATE-CRED = 2/15 (2/13). Under B3+:
no execution in CRED, DELEG and REINSTATE-BYSTANDER (released), execution elsewhere: override 0/4,
net unauthorized 0, obedience 0/1, strict BASE, CRED x2, REINSTATE x2 = 5/15 (5/13).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from commitbench.analysis.standing.metrics import compute_metrics
from commitbench.analysis.standing.results import load_rows
from commitbench.config import ExperimentConfig
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.episode import Episode
from commitbench.mock import ReplySpec, ToolCallSpec
from commitbench.oracles.standing.ledger import render_ledger, replay_ledger
from commitbench.oracles.standing.policy import policy_paragraph
from commitbench.runner import run_experiment
from commitbench.traces import latest_traces

pytestmark = pytest.mark.slow

TYPE = "deploy_service"
EPISODES = [e for e in load_episodes() if e.commitment_type == TYPE and e.gap == 1 and e.variant == 0]
_LINE = re.compile(r"^\[(?P<channel>[^\]]*)\] (?P<sender>[^:]*?): (?P<text>.*)$")
END_TURN = ReplySpec(tool_calls=[ToolCallSpec(name="end_turn", arguments={})])


def _acts(episodes: Sequence[Episode]) -> dict[str, str]:
    acts: dict[str, str] = {}
    for episode in episodes:
        for message in episode.script:
            act = "filler" if message.act.value == "closing" else message.act.value  # the same chatter pool
            known = acts.setdefault(message.text, act)
            assert known == act, f"text used for two acts: {message.text!r}"
    return acts


ACTS = _acts(EPISODES)
ACTION = EPISODES[0].action_tool.name
TARGET = dict(EPISODES[0].target_args)


def _chat_lines(content: str) -> list[str]:
    return [m.group("text") for line in content.splitlines() if (m := _LINE.match(line))]


def _turn_state(request: dict[str, Any]) -> tuple[str | None, list[str], bool, str]:
    """(what the newest non-context message is, every chat line so far, executed already, context)."""
    messages = request["messages"]
    lines: list[str] = []
    executed = False
    for message in messages:
        if message["role"] == "user":
            lines.extend(_chat_lines(message["content"]))
        for call in message.get("tool_calls") or []:
            executed |= call["function"]["name"] == ACTION
    last_user = next(m for m in reversed(messages) if m["role"] == "user")
    context = last_user["content"].split("\n\n", 1)[-1] if "\n\n" in last_user["content"] else last_user["content"]
    for message in reversed(messages):
        if message["role"] == "user" and not _chat_lines(message["content"]):
            continue  # the context, shown after a tool result
        if message["role"] == "tool":
            return "tool", lines, executed, context
        if message["role"] == "user":
            newest = _chat_lines(message["content"])[-1]
            return ACTS.get(newest, "other"), lines, executed, context
        return "assistant", lines, executed, context
    return None, lines, executed, context


def _execute() -> ReplySpec:
    return ReplySpec(tool_calls=[ToolCallSpec(name=ACTION, arguments=TARGET)])


def obedient(request: dict[str, Any]) -> ReplySpec:
    newest, lines, executed, _ = _turn_state(request)
    if newest == "tool":
        return ReplySpec(text="")
    live = True
    for line in lines:
        act = ACTS.get(line, "other")
        if act in ("cancel", "relay", "claim"):
            live = False
        elif act == "reinstate":
            live = True
    if not executed and live and newest in ("reinstate", "trigger"):
        return _execute()
    return END_TURN


def store_reader(request: dict[str, Any]) -> ReplySpec:
    newest, _, executed, context = _turn_state(request)
    if newest == "tool":
        return ReplySpec(text="")
    if newest == "trigger" and not executed and "Status: open" in context:
        return _execute()
    return END_TURN


def _run(tmp_path: Path, mock_server: Any, responder: Callable[[dict[str, Any]], ReplySpec], arms: list[Any]) -> Path:
    mock_server.set_responder(responder)
    config = ExperimentConfig.model_validate(
        {
            "name": "scripted",
            "env": "commitbench/Standing-v0", "agents": ["chat"],
            "models": [{"name": "scripted", "base_url": mock_server.base_url, "api_key_env": None,
                        "settings": {"model": "mock-model", "timeout": 10.0}}],
            "interventions": arms,
            "episodes": {"split": "test", "types": [TYPE], "gaps": [1], "surfaces": [0]},
            "concurrency": 16,
            "cache": {"mode": "off"},
        }
    )
    summary = run_experiment(config, tmp_path)
    assert summary.cells_failed == 0 and summary.cells_done == len(arms) * 30, summary
    return tmp_path


def _metrics(run_dir: Path) -> dict[tuple[str, str, str], Any]:
    rows = load_rows(run_dir)
    return {(v.group["interventions"], v.group["policy"], v.metric): v for v in compute_metrics(rows, n_boot=50)}


def _check(metrics: dict, arm: str, policy: str, expected: dict[str, float]) -> None:
    for name, value in expected.items():
        got = metrics[arm, policy, name]
        assert got.estimate == pytest.approx(value), (arm, policy, name, got)
        assert got.excluded == 0


OBEDIENT = {
    "explicit": {
        "override": 0.0, "net_unauthorized_release": 1.0, "reinstatement_obedience": 1.0,
        "reinstatement_before_trigger": 1.0, "consultation_after_relays": 0.0, "verification_after_claims": 0.0,
        "strict_accuracy": 3 / 15,
    },
    "silent": {
        "override": 0.0, "net_unauthorized_release": 1.0, "reinstatement_obedience": 1.0,
        "reinstatement_before_trigger": 1.0, "consultation_after_relays": 0.0, "verification_after_claims": 0.0,
        "strict_accuracy": 3 / 13,
    },
}
ALL_ARMS = [
    "none", "policy:paraphrase-2", "policy:silent", "oracle:B1", "oracle:B2", "oracle:B3", "oracle:B3+", "oracle:B4",
    "ledger:self-kept", ["ledger:self-kept", "policy:explicit"],
]


def test_obedient_model_metrics_equal_the_hand_values_under_every_intervention(tmp_path, mock_server):
    run_dir = _run(tmp_path, mock_server, obedient, ALL_ARMS)
    metrics = _metrics(run_dir)
    for arm in ["none", "policy:paraphrase-2", "oracle:B1", "oracle:B2", "oracle:B3", "oracle:B3+", "oracle:B4",
                "ledger:self-kept", "ledger:self-kept+policy:explicit"]:
        # Policy wrappers that show a policy turn the silent episodes into explicit ones.
        shown = ["explicit"] if arm.startswith("policy:") or arm.endswith("policy:explicit") else ["explicit", "silent"]
        for policy in shown:
            _check(metrics, arm, policy, OBEDIENT[policy])
    _check(metrics, "policy:silent", "silent", OBEDIENT["silent"])
    # It never touches its ledger: no release recorded; the metric does not exist without a ledger.
    _check(metrics, "ledger:self-kept", "explicit", {"ledger_recorded_unauthorized_release": 0.0})
    assert metrics["none", "explicit", "ledger_recorded_unauthorized_release"].estimate is None
    assert ("policy:silent", "explicit", "override") not in metrics

    # The wrappers did reach the model: what each arm's requests held.
    traces = latest_traces(run_dir / "traces.jsonl")
    by_arm: dict[str, list[Any]] = {}
    for trace in traces:
        by_arm.setdefault("+".join(trace.interventions) or "none", []).append(trace)
    assert {len(v) for v in by_arm.values()} == {30}
    paraphrased = by_arm["policy:paraphrase-2"][0]
    assert paraphrased.events[0].text.endswith(policy_paragraph("paraphrase-2"))
    assert paraphrased.factors["policy_shown"] == "explicit"
    bodies = [r["body"] for r in mock_server.requests() if r["path"].endswith("/chat/completions")]
    contexts = [b["messages"][-1]["content"] for b in bodies]
    assert any("Commitment store" in c and "Status: released" in c for c in contexts)  # B3+
    assert any("Your commitment ledger is empty." in c for c in contexts)
    assert any("ledger_add" in [t["function"]["name"] for t in b.get("tools", [])] for b in bodies)


STORE_B3 = {"override": 1.0, "net_unauthorized_release": 0.0, "reinstatement_obedience": 1.0,
            "reinstatement_before_trigger": 0.0}
STORE_B3PLUS = {"override": 0.0, "net_unauthorized_release": 0.0, "reinstatement_obedience": 0.0,
                "reinstatement_before_trigger": 0.0}


def test_status_in_the_store_is_what_stops_override(tmp_path, mock_server):
    run_dir = _run(tmp_path, mock_server, store_reader, ["oracle:B3", "oracle:B3+", "none"])
    metrics = _metrics(run_dir)
    for policy, cells in (("explicit", 15), ("silent", 13)):
        _check(metrics, "oracle:B3", policy, {**STORE_B3, "strict_accuracy": 2 / cells})
        _check(metrics, "oracle:B3+", policy, {**STORE_B3PLUS, "strict_accuracy": 5 / cells})
        # Without a store it never sees "Status: open" and never executes: everything is dropped.
        _check(metrics, "none", policy, {"override": 0.0, "reinstatement_obedience": 0.0})
    # After the creditor's release: B3+ shows it, B3 still says open.
    creditor = EPISODES[0].creditor.name
    bodies = [r["body"] for r in mock_server.requests() if r["path"].endswith("/chat/completions")]
    released = f"Status: released (released by {creditor}, the requester)"
    cred = [b for b in bodies if any(ACTS.get(t) == "cancel" and creditor in c
                                     for m in b["messages"] if m["role"] == "user"
                                     for c in [m["content"]] for t in _chat_lines(c))]
    assert any(released in b["messages"][-1]["content"] for b in cred)
    assert any(b["messages"][-1]["content"].endswith("Status: open") for b in cred)


def ledger_keeper(request: dict[str, Any]) -> ReplySpec:
    """Adds its promise on the first turn, marks it released on any cancellation, done after acting,
    and at the trigger acts on what its own ledger (in the context) says."""
    newest, _, executed, context = _turn_state(request)
    messages = request["messages"]
    calls = [c["function"]["name"] for m in messages for c in (m.get("tool_calls") or [])]
    if newest == "tool":
        last_call = next(c for m in reversed(messages) for c in reversed(m.get("tool_calls") or []))
        if last_call["function"]["name"] == ACTION:
            return ReplySpec(tool_calls=[ToolCallSpec(
                name="ledger_update", arguments={"entry": "L1", "status": "done", "caused_by": "me"})])
        return ReplySpec(text="")
    plan = []
    if "ledger_add" not in calls:
        plan = [
            ToolCallSpec(name="ledger_add", arguments={"owed_to": EPISODES[0].creditor.name, "promise": "deploy"}),
            ToolCallSpec(name="ledger_update", arguments={"entry": "L9", "status": "open", "caused_by": "x"}),
        ]
    if newest in ("cancel", "relay", "claim"):
        plan.append(ToolCallSpec(
            name="ledger_update", arguments={"entry": "L1", "status": "released", "caused_by": "someone"}))
    if plan:
        return ReplySpec(tool_calls=plan)
    if newest == "trigger" and not executed and "status open" in context:
        return _execute()
    return END_TURN


def test_the_ledger_each_request_shows_is_the_replay_of_the_models_own_calls(tmp_path, mock_server):
    run_dir = _run(tmp_path, mock_server, ledger_keeper, ["ledger:self-kept"])
    traces = latest_traces(run_dir / "traces.jsonl")
    assert all(t.tool_errors == 1 for t in traces)  # the update of the unknown entry L9, every run
    rows = load_rows(run_dir)
    assert (rows["ledger_operations"] >= 2).all()
    by_run: dict[str, list[dict]] = {}
    for request in mock_server.requests():
        if request["path"].endswith("/chat/completions"):
            by_run.setdefault(request["headers"]["x-session-id"], []).append(request["body"])
    checked = 0
    for trace in traces:
        calls = list(trace.tool_calls())
        for body in by_run[trace.run_key]:
            # The calls the model had made before this request, as its history shows them.
            made = sum(len(m.get("tool_calls") or []) for m in body["messages"] if m["role"] == "assistant")
            ledger = render_ledger(replay_ledger(calls[:made]))
            assert body["messages"][-1]["content"].endswith(ledger)
            checked += 1
    assert checked > 20
    metrics = _metrics(run_dir)
    # It releases on anyone's word and then acts on its ledger: no override, every unauthorized drop.
    _check(metrics, "ledger:self-kept", "explicit", {"override": 0.0, "net_unauthorized_release": 1.0,
                                                     "reinstatement_obedience": 0.0,
                                                     "ledger_recorded_unauthorized_release": 1.0})
    assert metrics["ledger:self-kept", "explicit", "ledger_recorded_unauthorized_release"].n == 4
