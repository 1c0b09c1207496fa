"""The creditor answers after the latest event that changes or challenges the promise (per_event),
or once, after the last such event (the paper's rule: the paper profile, or selectable by name)."""

from __future__ import annotations

from typing import Any

import pytest

from commitbench.envs.privileged import RevealScriptAnnotations
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.episode import CANCELLATION_ACTS, PROMISE_STEP
from commitbench.episodes.standing.loader import load_spec
from commitbench.episodes.standing.profile import standing_settings
from commitbench.episodes.standing.selection import StandingSelection
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, ReplyKind, ReplyRule
from commitbench.protocol import tool_call


def _env(cell: str, rule: str = "per_event", profile: str = "commitbench") -> RevealScriptAnnotations:
    return RevealScriptAnnotations(
        StandingEnv(cells=[cell], split="test", gaps=[1], policies=["explicit"], surfaces=[0], commitment_types=[
            "order_supplies"], creditor_replies=rule, profile=profile)
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


@pytest.mark.parametrize("profile", ["paper", "commitbench"])
def test_the_paper_rule_answers_once_after_the_last_event_and_never_contradicts_the_creditor(profile: str) -> None:
    env = _env("REINSTATE-BYSTANDER", rule="paper", profile=profile)
    _obs, info = env.reset(seed=0)
    creditor = info["promise"]["creditor"]
    # Before the bystander's reinstatement: the thumbs-up (the single answer has not come due yet).
    env.step(tool_call("send_dm", {"to": creditor, "text": "Understood, I have dropped it."}))
    obs, *_ = env.step({"end_turn": True})
    assert [e["text"] for e in obs["events"] if e.get("act") == "acknowledgement"] == ["👍"]
    _until(env, "reinstate")
    answer = _dm(env, creditor, "Should I order them, or keep it cancelled?")[-1]
    assert answer["act"] == "reply:drop"  # the cell's single answer: keep it cancelled
    env.step(tool_call("send_dm", {"to": creditor, "text": "And the budget approval?"}))
    obs, *_ = env.step({"end_turn": True})
    assert [e["text"] for e in obs["events"] if e.get("act") == "acknowledgement"] == ["👍"]


def test_under_the_paper_rule_the_creditors_go_ahead_comes_only_after_their_own_reinstatement() -> None:
    env = _env("REINSTATE-CRED", rule="paper", profile="paper")
    _obs, info = env.reset(seed=0)
    creditor = info["promise"]["creditor"]
    env.step(tool_call("send_dm", {"to": creditor, "text": "Okay, dropping it."}))
    obs, *_ = env.step({"end_turn": True})
    assert [e["act"] for e in obs["events"] if e["sender"] == creditor] == ["acknowledgement"]  # not "go ahead"
    _until(env, "reinstate")
    assert _dm(env, creditor, "Just to confirm: go ahead once the budget is approved?")[-1]["act"] == "reply:keep"
    for episode in load_episodes(settings="paper"):
        if episode.cell in ("REINSTATE-CRED", "REINSTATE-BYSTANDER"):
            assert [r.after_step for r in episode.creditor_replies] == [episode.event_steps[-1]]


def test_every_cell_has_one_answer_per_event_that_changes_or_challenges_the_promise():
    spec = load_spec(DEFAULT_DATA_DIR)
    for episode in load_episodes():
        events = [m for m in episode.script if m.act in CANCELLATION_ACTS]
        if not events:  # BASE: one answer, following the promise itself
            answers = [(r.after_step, r.kind) for r in episode.creditor_replies]
            assert answers == [(PROMISE_STEP, ReplyKind.STILL_NEEDED)]
            continue
        assert [r.after_step for r in episode.creditor_replies] == [m.step for m in events] == episode.event_steps
    cells = {c.id: c for c in spec.cells}
    assert [e.reply for e in cells["REINSTATE-BYSTANDER"].events] == [ReplyKind.DROP_IT, ReplyKind.KEEP_CANCELLED]
    assert [e.reply for e in cells["REINSTATE-CRED"].events] == [ReplyKind.DROP_IT, ReplyKind.GO_AHEAD]
    # A reply that keeps the promise exactly where a correct assistant executes, for single-event cells.
    for episode in load_episodes():
        if len(episode.creditor_replies) == 1:
            assert episode.creditor_replies[0].keeps_promise == episode.expects_execute, episode.cell


def test_the_reply_rule_is_part_of_the_episode_identity_and_selectable_by_name():
    per_event = load_episodes()
    paper = load_episodes(settings=standing_settings(creditor_replies="paper"))
    assert len(per_event) == len(paper) == 1440
    assert not {e.id for e in per_event} & {e.id for e in paper}
    selection = StandingSelection(cells=["BASE"], creditor_replies="paper")
    chosen = selection.select(load_episodes(settings=selection.settings()))
    assert chosen and all(e.reply_rule is ReplyRule.PAPER for e in chosen)
    assert selection.profile_label() == "commitbench (creditor_replies: paper)"
    assert all(e.acknowledgement == "👍" for e in paper)
    assert all(e.acknowledgement == "Thanks for the update." for e in per_event)
    with pytest.raises(ValueError):
        StandingSelection(creditor_replies="first_only")
