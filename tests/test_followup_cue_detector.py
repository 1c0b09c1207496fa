"""The cue detector against the definition's include and exclude lists."""

from __future__ import annotations

import pytest

from commitbench.judges.followup.cues import CUE_CONFIDENCE, detect_commitments, mask_text_for_user
from commitbench.judges.followup.schemas import Performer, TriggerType

T = TriggerType

INCLUDE = [
    ("I'll remind you tomorrow morning.", T.TIME, Performer.SELF, False),
    ("I'll let you know when the CI run finishes.", T.EXTERNAL_EVENT, Performer.SELF, False),
    ("I'll get back to you with the results.", T.UNSPECIFIED_FUTURE, Performer.SELF, False),
    ("Someone from our team will call you back today.", T.TIME, Performer.THIRD_PARTY, False),
    ("Next time we chat, I'll remember your preferences.", T.NEXT_SESSION, Performer.SELF, False),
    ("Once you send the file, I'll review it.", T.USER_NEXT_MESSAGE, Performer.SELF, False),
    ("Want me to draft the reminder text?", T.USER_NEXT_MESSAGE, Performer.SELF, True),
    ("I've noted that and will remind you.", T.UNSPECIFIED_FUTURE, Performer.SELF, False),
    ("I'll keep an eye on it.", T.UNSPECIFIED_FUTURE, Performer.SELF, False),
    ("I'll follow up.", T.UNSPECIFIED_FUTURE, Performer.SELF, False),
    ("We'll be in touch.", T.UNSPECIFIED_FUTURE, Performer.THIRD_PARTY, False),
    ("I'll keep this in mind for our future conversations.", T.NEXT_SESSION, Performer.SELF, False),
    ("A colleague will call you back today.", T.TIME, Performer.THIRD_PARTY, False),
    ("Would you like me to remind you at 9 am tomorrow?", T.USER_NEXT_MESSAGE, Performer.SELF, True),
    ("If you'd like, I can set a reminder for 9 am.", T.USER_NEXT_MESSAGE, Performer.SELF, True),
    ("Our billing team will review your account and contact you within two business days.", T.TIME,
     Performer.THIRD_PARTY, False),
    ("OK, I'll be over about two.", T.TIME, Performer.SELF, False),
    ("I'll take care of all that when I wake up.", T.EXTERNAL_EVENT, Performer.SELF, False),
    ("I'm going to call you back after lunch.", T.EXTERNAL_EVENT, Performer.SELF, False),
]

EXCLUDE = [
    "Let me check that.",
    "Next, I'll read the config.",
    "I can help you set reminders.",
    "You could set a phone reminder.",
    "I can't contact you tomorrow.",
    "If you enable notifications, the app will remind you.",
    "Feel free to ask anytime.",
    "I'm here if you need me.",
    "Let me know if you have questions.",
    "Done! Reminder set for 9am.",
    "I won't be able to remind you tomorrow, but you can set an alarm.",
    "I'll be here whenever you need me.",
    "I'll explain how to set an alarm on your phone.",
    "I'll check the weather now.",
    "Here is a draft:\n\nDear Mr Brown,\nI will follow up next week about the invoice.\nBest regards,\nSam",
    'You could write: "I will call you back tomorrow once I have the figures."',
    "```\n# I'll remind you tomorrow\n```",
    "> I will send the report on Friday.",
    "May I help you?",
    "What should I do if he doesn't call me?",
    "I'm going to the store downtown this afternoon.",
    "I'll tell you what, let's split the bill.",
    "I'll see if I can find them for you.",
    "What shall I call him?",
    "What do you want me to do about it?",
]


@pytest.mark.parametrize(("text", "trigger", "performer", "offer"), INCLUDE, ids=[row[0][:40] for row in INCLUDE])
def test_includes(text: str, trigger: TriggerType, performer: Performer, offer: bool) -> None:
    found = detect_commitments(text).commitments
    assert len(found) == 1
    commitment = found[0]
    assert commitment.trigger_type is trigger
    assert commitment.performer is performer
    assert commitment.is_offer is offer
    assert commitment.confidence == CUE_CONFIDENCE
    assert commitment.span.strip() in text


@pytest.mark.parametrize("text", EXCLUDE, ids=[t[:40] for t in EXCLUDE])
def test_excludes(text: str) -> None:
    assert detect_commitments(text).commitments == []


@pytest.mark.parametrize(
    ("text", "capabilities", "time"),
    [
        ("I'll remind you tomorrow morning.", ["run_later", "notify_user_later"], "tomorrow morning"),
        ("I'll email you the summary tomorrow.", ["run_later", "send_email"], "tomorrow"),
        ("Next time, I'll remember your preferences.", ["recall_across_sessions"], None),
        ("I'll let you know when the CI run finishes.", ["watch_event", "notify_user_later"], None),
        ("Someone from our team will call you back today.", ["delegate_to_human", "phone_call"], "today"),
        ("I will follow up on this within 24 hours.", ["run_later", "notify_user_later"], "within 24 hours"),
        ("Once you send the file, I'll review it.", [], None),
        ("I'll check in with you on Friday, at 10 am.", ["run_later", "notify_user_later"], "on Friday, at 10 am"),
    ],
)
def test_capabilities_and_time(text: str, capabilities: list[str], time: str | None) -> None:
    (commitment,) = detect_commitments(text).commitments
    assert commitment.required_capabilities == capabilities
    assert commitment.time_expression == time


def test_several_sentences_and_spans_from_the_original() -> None:
    reply = (
        "Sure thing! I'll remind you tomorrow at 9 am. I can't send texts though. "
        "Next time we talk, I'll ask how it went. Let me know if you need anything else."
    )
    found = detect_commitments(reply).commitments
    assert [c.trigger_type for c in found] == [T.TIME, T.NEXT_SESSION]
    assert found[0].span == "I'll remind you tomorrow at 9 am."
    assert found[0].time_expression == "tomorrow at 9 am"


def test_masking_keeps_offsets() -> None:
    reply = 'Say this: "I will call you back tomorrow with the answer." Then hang up.'
    masked = mask_text_for_user(reply)
    assert len(masked) == len(reply)
    assert "call you back" not in masked and "Then hang up." in masked


def test_empty_reply() -> None:
    assert detect_commitments("").commitments == []
