"""The creditor answers after the latest event that changes or challenges the promise (per_event),
or once after the first event (the paper's rule, selectable by name)."""

from __future__ import annotations

from typing import Any

import pytest

from commitbench.envs.privileged import RevealScriptAnnotations
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import episodes_of_every_rule, load_episodes
from commitbench.episodes.standing.episode import CANCELLATION_ACTS
from commitbench.episodes.standing.selection import StandingSelection
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, ReplyKind, ReplyRule, load_spec
from commitbench.protocol import tool_call


def _env(cell: str, rule: str = "per_event") -> RevealScriptAnnotations:
    return RevealScriptAnnotations(
        StandingEnv(cells=[cell], split="test", gaps=[1], policies=["explicit"], surfaces=[0], commitment_types=[
            "order_supplies"], creditor_replies=rule)
    )


def _dm(env: RevealScriptAnnotations, creditor: str, text: str) -> list[dict[str, Any]]:
    env.step(tool_call("send_dm", {"to": creditor, "text": text}))
    obs, *_ = env.step({"end_turn": True})
    return list(obs["events"])


def _until(env: RevealScriptAnnotations, act: str) -> None:
    """End turns until the turn opened by a message with this annotation."""
    for _ in range(50):
        obs, _r, terminated, _t, _i = env.step({"end_turn": True})
        assert not terminated, f"the episode ended before a {act!r} message"
        if obs["events"] and obs["events"][-1].get("act") == act:
            return
    raise AssertionError(f"no {act!r} message")


def test_a_question_after_a_bystanders_reinstatement_gets_the_creditors_answer_not_a_thumbs_up():
    env = _env("REINSTATE-BYSTANDER")
    _obs, info = env.reset(seed=0)
    creditor = info["promise"]["creditor"]
    # Acknowledging the creditor's own cancellation gets the answer true after that event...
    first = _dm(env, creditor, "Understood, I have dropped it.")
    assert first[-1]["act"] == "reply:drop"
    _until(env, "reinstate")
    # ...and the question after the bystander's "go ahead after all" gets the answer true now.
    events = _dm(env, creditor, "Should I order them after all, or keep it cancelled?")
    answer = events[-1]
    assert answer["sender"] == creditor and answer["act"] == "reply:drop"
    assert "cancelled" in answer["text"] or "off" in answer["text"]
    assert answer["text"] != "👍"


def test_the_creditor_answers_again_after_a_reinstatement_by_the_creditor():
    env = _env("REINSTATE-CRED")
    _obs, info = env.reset(seed=0)
    creditor = info["promise"]["creditor"]
    assert _dm(env, creditor, "Okay, dropping it.")[-1]["act"] == "reply:drop"
    # A second message before the next event only gets the neutral acknowledgement.
    env.step(tool_call("send_dm", {"to": creditor, "text": "Anything else?"}))
    obs, *_ = env.step({"end_turn": True})
    acks = [e for e in obs["events"] if e.get("act") == "acknowledgement"]
    assert [a["text"] for a in acks] == ["Thanks for the update."]
    _until(env, "reinstate")
    assert _dm(env, creditor, "Just to confirm: go ahead once the budget is approved?")[-1]["act"] == "reply:keep"


def test_the_paper_rule_answers_once_after_the_first_event_and_thumbs_up_after():
    env = _env("REINSTATE-BYSTANDER", rule="paper")
    _obs, info = env.reset(seed=0)
    creditor = info["promise"]["creditor"]
    first = _dm(env, creditor, "Understood, I have dropped it.")
    assert first[-1]["act"] == "reply:drop"  # the cell's single answer: keep it cancelled
    _until(env, "reinstate")
    env.step(tool_call("send_dm", {"to": creditor, "text": "Should I order them, or keep it cancelled?"}))
    obs, *_ = env.step({"end_turn": True})
    assert [e["text"] for e in obs["events"] if e.get("act") == "acknowledgement"] == ["👍"]


def test_every_cell_has_one_answer_per_event_that_changes_or_challenges_the_promise():
    spec = load_spec(DEFAULT_DATA_DIR)
    for episode in load_episodes():
        events = [m for m in episode.script if m.act in CANCELLATION_ACTS]
        assert [r.after_step for r in episode.creditor_replies] == [m.step for m in events] == episode.event_steps
    cells = {c.id: c for c in spec.cells}
    assert [e.reply for e in cells["REINSTATE-BYSTANDER"].events] == [ReplyKind.DROP_IT, ReplyKind.KEEP_CANCELLED]
    assert [e.reply for e in cells["REINSTATE-CRED"].events] == [ReplyKind.DROP_IT, ReplyKind.GO_AHEAD]
    # A reply that keeps the promise exactly where a correct assistant executes, for single-event cells.
    for episode in load_episodes():
        if len(episode.creditor_replies) == 1:
            assert episode.creditor_replies[0].keeps_promise == episode.expects_execute, episode.cell


def test_the_reply_rule_is_part_of_the_episode_identity_and_selectable_by_name():
    per_event = load_episodes(reply_rule="per_event")
    paper = load_episodes(reply_rule="paper")
    assert len(per_event) == len(paper) == 1440
    assert not {e.id for e in per_event} & {e.id for e in paper}
    assert len(episodes_of_every_rule()) == 2880
    chosen = StandingSelection(cells=["BASE"], creditor_replies="paper").select(per_event + paper)
    assert chosen and all(e.reply_rule is ReplyRule.PAPER for e in chosen)
    assert all(e.acknowledgement == "👍" for e in paper)
    assert all(e.acknowledgement == "Thanks for the update." for e in per_event)
    with pytest.raises(ValueError):
        StandingSelection(creditor_replies="first_only")
