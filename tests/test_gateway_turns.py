"""The table of field-shaped turns (tests/_gateway_turns.py) through the gateway's checks on its defaults.

Every turn gets the verdict derived by hand; a flagged reply names exactly the claims no successful call
backs, and enforce's corrected reply keeps every other sentence and passes the checks itself.
"""

from __future__ import annotations

import pytest
from _gateway_turns import CASES, Case

from commitbench.gateway.catalog import load_catalog
from commitbench.gateway.checks import check_choice
from commitbench.gateway.turn import extract_turn, reply_choices
from commitbench.gateway.verdicts import CountMode, Label
from commitbench.judges.followup.schemas import DetectorOutput

CATALOG = load_catalog()
NOTHING_DETECTED = DetectorOutput(commitments=[])


def _check(case: Case, text: str | None = None, count: CountMode = CountMode.MATCHING):  # type: ignore[no-untyped-def]
    turn = extract_turn(case.request())
    deployment = CATALOG.deployment(turn.offered)
    choice = reply_choices(case.completion())[0]
    if text is not None:
        choice = choice.model_copy(update={"text": text})
    return check_choice(turn, choice, deployment, NOTHING_DETECTED, count)


def test_the_table_is_field_shaped_and_big_enough() -> None:
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
    assert {c.lang for c in CASES} == {"en", "tr"}
    shapes = {c.shape for c in CASES}
    assert {"failed tool", "partial work", "read only", "indirect request", "earlier turn", "honest failure",
            "offer", "greeting", "backed"} <= shapes
    assert sum(c.flag for c in CASES) >= 15 and sum(not c.flag for c in CASES) >= 15
    # what the defaults said before claims were checked against what happened (measured once, recorded)
    assert sum(c.before for c in CASES) == 31


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_turn_gets_its_verdict(case: Case) -> None:
    check = _check(case)
    claims = [v for v in check.verdicts if v.label is Label.FALSE_CLAIM]
    assert bool(claims) == case.flag, [v.reason for v in claims]
    named = [v.text or "" for v in claims]
    assert len(named) == len(case.flagged), named
    for words in case.flagged:
        assert any(words in text for text in named), (words, named)
    if claims:
        assert all(v.span is not None and case.reply[v.span[0]:v.span[1]] == v.text for v in claims)


@pytest.mark.parametrize("case", [c for c in CASES if c.flag], ids=[c.id for c in CASES if c.flag])
def test_the_corrected_reply_keeps_true_sentences_and_passes(case: Case) -> None:
    check = _check(case)
    assert check.replacement is not None and check.nudge
    again = _check(case, text=check.replacement)
    assert not [v for v in again.verdicts if v.label is Label.FALSE_CLAIM], (check.replacement, again.verdicts)
    if case.id == "en-true-sentence-kept":
        assert check.replacement == "No action ran for this, so it has not happened yet. Your 4pm with Tom is still on."


def test_what_the_correction_says_happened() -> None:
    by_id = {c.id: c for c in CASES}
    assert _check(by_id["en-failed-send"]).replacement == (
        "The send_email call failed (SMTP 550), so this has not happened.")
    assert _check(by_id["en-partial-book"]).replacement == (
        "Only send_email went through; the rest of this has not happened yet.")
    assert _check(by_id["en-read-weather"]).replacement == (
        "Only get_weather ran, which changes nothing, so this has not happened yet.")
    assert _check(by_id["tr-failed-send"]).replacement == "send_email çağrısı başarısız oldu (SMTP 550); bu yapılmadı."
    reason = next(v.reason for v in _check(by_id["en-failed-send"]).verdicts)
    assert "send_email call failed (SMTP 550)" in reason


def test_the_published_rule_stays_a_named_option() -> None:
    by_id = {c.id: c for c in CASES}
    # --count any: any call that ran puts the reply out of scope, and only a write turn is checked
    assert not _check(by_id["en-failed-send"], count=CountMode.ANY).verdicts
    assert not _check(by_id["en-handle-that"], count=CountMode.ANY).verdicts
    assert _check(by_id["en-true-sentence-kept"], count=CountMode.ANY).verdicts
    assert not _check(by_id["en-starred"], count=CountMode.ANY).verdicts  # a verb the guard does not read
    # --count writes: any successful write backs every claim, a failed one still backs nothing
    assert not _check(by_id["en-partial-book"], count=CountMode.WRITES).verdicts
    assert _check(by_id["en-failed-send"], count=CountMode.WRITES).verdicts
    assert _check(by_id["en-read-weather"], count=CountMode.WRITES).verdicts


def test_the_rewrite_card_names_the_offered_tools() -> None:
    from commitbench.gateway.actions import gateway_card, rewrite_request

    case = next(c for c in CASES if c.id == "en-failed-send")
    turn = extract_turn(case.request())
    deployment = CATALOG.deployment(turn.offered)
    card = gateway_card(turn, deployment)
    assert "- send_email" in card and "Send an email to a recipient." in card
    assert "cannot send" not in card.lower()
    choice = reply_choices(case.completion())[0]
    prompt = rewrite_request("m", turn, choice, deployment)["messages"][0]["content"]
    assert card in prompt and '"SMTP 550"' in prompt  # the failed call's result is shown to the rewriter


def test_the_verdict_header_carries_the_labels_of_a_rewrite_too() -> None:
    from commitbench.gateway.outcome import RequestOutcome
    from commitbench.gateway.verdicts import ChoiceCheck, Verdict

    original = ChoiceCheck(index=0, verdicts=[Verdict(label=Label.FALSE_CLAIM, reason="r")])
    rewrite = ChoiceCheck(index=0, verdicts=[Verdict(label=Label.FALSE_CLAIM, reason="r"),
                                             Verdict(label=Label.EMPTY, reason="e")])
    outcome = RequestOutcome(checks=[original], actions={0: "rewritten_then_replaced"}, originals={0: "x"},
                             rewrites={0: rewrite}, recorded=[], error=None, checks_ms=0.0, rewrite_ms=0.0,
                             changed=True)
    assert outcome.verdict() == "false_claim,empty"
