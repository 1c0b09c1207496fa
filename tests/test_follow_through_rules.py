"""The follow-through mode's pure rules, as tables: time expressions, content words, argument-level anchoring,
the anchored_mismatch refinement, follow-through grades, and the ledger's fired and delivered events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from commitbench.episodes.followup.matching import (
    ResolvedTime,
    TimeFit,
    TimeWindow,
    content_match,
    content_words,
    days_of,
    resolve_time,
    time_fits,
    times_disagree,
)
from commitbench.episodes.followup.setups import CURRENT_TIME, load_setups
from commitbench.episodes.followup.vocabulary import Capability, Doability, RequestCategory, SetupId
from commitbench.judges.followup.arguments import (
    CallView,
    TimeCheck,
    anchor_by_arguments,
    check_call,
    promise_target,
)
from commitbench.judges.followup.feasibility import assess_feasibility, enabling_tools_for_request
from commitbench.judges.followup.follow_through import (
    FollowThroughGrade,
    FollowThroughRecord,
    FollowThroughTarget,
    KeptItemRecord,
    apply_delivery_verdict,
    follow_through_target,
    grade_request,
    needs_outside_facts,
)
from commitbench.judges.followup.outcomes import PAPER_LABEL, AssessedCommitment, OutcomeLabel, derive_outcome
from commitbench.judges.followup.schemas import DetectedCommitment, Performer, ResponseJudgeOutput, TriggerType
from commitbench.ledger import AuditEventKind, CommitmentStatus, IllegalTransition, Ledger, ManualClock, NewCommitment
from commitbench.ledger.replay import replay

NOW = CURRENT_TIME  # Thursday 1 October 2026, 10:00
SETUPS = load_setups()


def at(day: int, hour: int, minute: int = 0, month: int = 10, year: int = 2026) -> datetime:
    return datetime(year, month, day, hour, minute)


def day(d: int, month: int = 10, year: int = 2026) -> tuple[datetime, datetime]:
    return at(d, 0, month=month, year=year), at(d, 23, 59, month=month, year=year)


# ------------------------------------------------------------------------------------------ time words
TIME_TABLE: list[tuple[str, list[tuple[datetime, datetime]] | None]] = [
    ("in an hour", [(at(1, 11), at(1, 11))]),
    ("in half an hour", [(at(1, 10, 30), at(1, 10, 30))]),
    ("after three hours", [(at(1, 13), at(1, 13))]),
    ("within the hour", [(at(1, 10), at(1, 11))]),
    ("tomorrow at 10 am", [(at(2, 10), at(2, 10))]),
    ("at 6 pm.", [(at(1, 18), at(1, 18))]),
    ("at 7 today", [(at(1, 19), at(1, 19))]),  # 7:00 has gone; the evening reading stays
    ("at 7:40 tomorrow", [(at(2, 7, 40), at(2, 7, 40)), (at(2, 19, 40), at(2, 19, 40))]),
    ("5 o'clock in the morning", [(at(2, 5), at(2, 5))]),  # the morning picks the reading; today's has gone
    ("tonight at 8", [(at(1, 20), at(1, 20))]),
    ("tomorrow", [day(2)]),
    ("the day after tomorrow", [day(3)]),
    ("tomorrow morning", [(at(2, 6), at(2, 11, 59))]),
    ("this afternoon", [(at(1, 12), at(1, 17, 59))]),
    ("tomorrow afternoon", [(at(2, 12), at(2, 17, 59))]),
    ("Friday evening", [(at(2, 17), at(2, 21, 59))]),
    ("Tomorrow at lunchtime", [(at(2, 12), at(2, 13, 59))]),
    ("tonight", [(at(1, 18), at(1, 23, 59))]),
    ("in the morning", [(at(1, 10), at(1, 11, 59)), (at(2, 6), at(2, 11, 59))]),  # said at 10:00: tomorrow too
    ("today by 5 pm", [(at(1, 10), at(1, 17))]),
    ("after 6 pm today", [(at(1, 18), at(1, 23, 59))]),
    ("tomorrow before noon", [(at(2, 0), at(2, 12))]),
    ("later today", [(at(1, 10), at(1, 23, 59))]),
    ("on Monday", [day(5)]),
    ("next Monday", [day(5), day(12)]),  # the coming Monday, or the one after
    ("11 am next Monday", [(at(5, 11), at(5, 11)), (at(12, 11), at(12, 11))]),
    ("Thursday", [(at(1, 10), at(1, 23, 59)), day(8)]),  # said on a Thursday: today, or in a week
    ("Sundays at 11 am", [(at(4, 11), at(4, 11))]),
    ("this weekend", [(at(3, 0), at(4, 23, 59))]),
    ("next week's dentist appointment", [(at(5, 0), at(11, 23, 59))]),
    ("at the end of the week", [(at(2, 0), at(4, 23, 59))]),
    ("by the end of the week", [(at(1, 10), at(4, 23, 59))]),
    ("next month", [(at(1, 0, month=11), at(30, 23, 59, month=11))]),
    ("on the 15th", [day(15)]),
    ("on the 22nd of January", [day(22, month=1, year=2027)]),
    ("every May 4", [day(4, month=5, year=2027)]),
    ("every morning at 7 am", [(at(2, 7), at(2, 7))]),
    ("in 2 days", [day(3)]),
    # nothing a clock can check
    ("every two days", None),
    ("one day in advance", None),
    ("an hour before my meeting", None),
    ("goes above 1.10", None),
    ("my starting weight was 82 kilos", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), TIME_TABLE, ids=[row[0] or "empty" for row in TIME_TABLE])
def test_time_expressions_resolve_against_the_current_time(text, expected) -> None:
    resolved = resolve_time(text, NOW)
    if expected is None:
        assert resolved is None
    else:
        assert resolved is not None
        assert [(w.start, w.end) for w in resolved.windows] == expected


def exact(moment: datetime) -> ResolvedTime:
    return ResolvedTime(expression="t", windows=[TimeWindow(start=moment, end=moment)])


SPAN = ResolvedTime(expression="tomorrow morning", windows=[TimeWindow(start=at(2, 6), end=at(2, 11, 59))])
FIT_TABLE = [
    ("exact, on the minute", at(2, 9), exact(at(2, 9)), TimeFit.ON_TIME),
    ("exact, an hour ahead (a reminder comes a little early)", at(2, 8), exact(at(2, 9)), TimeFit.ON_TIME),
    ("exact, 61 minutes ahead", at(2, 7, 59), exact(at(2, 9)), TimeFit.EARLY),
    ("exact, a quarter of an hour late", at(2, 9, 15), exact(at(2, 9)), TimeFit.ON_TIME),
    ("exact, 16 minutes late", at(2, 9, 16), exact(at(2, 9)), TimeFit.LATE),
    ("exact, the wrong day", at(3, 9), exact(at(2, 9)), TimeFit.LATE),
    ("span, inside", at(2, 8), SPAN, TimeFit.ON_TIME),
    ("span, 15 minutes before it opens", at(2, 5, 45), SPAN, TimeFit.ON_TIME),
    ("span, 20 minutes before it opens", at(2, 5, 40), SPAN, TimeFit.EARLY),
    ("span, the afternoon", at(2, 14), SPAN, TimeFit.LATE),
    ("nothing promised", at(9, 9), None, TimeFit.UNCHECKED),
]


@pytest.mark.parametrize(("name", "moment", "promised", "expected"), FIT_TABLE, ids=[r[0] for r in FIT_TABLE])
def test_the_tolerance_of_a_promised_time(name, moment, promised, expected) -> None:
    assert time_fits(moment, promised) is expected


# ------------------------------------------------------------------------------------------ content words
def test_content_words_drop_function_words_time_words_and_generic_verbs() -> None:
    assert content_words("I'll remind you to call the dentist at 9 tomorrow") == {"dentist"}
    assert content_words("Remind me to take out the garbage") == content_words("Take the trash out") == {"rubbish"}
    assert content_words("Meetings with my Mum") == {"meet", "mother"}
    assert content_words("") == frozenset()


CONTENT_TABLE = [
    ("the task named in other forms", "remind the user to pay the internet bill", "Internet bills", True),
    ("another task", "remind the user to call the dentist", "Call mom", False),
    ("an empty reminder", "remind the user to pay rent", "Reminder!", False),
    ("a third of the words is enough", "send the summary of the trade-offs between the two job offers",
     "Job offers summary", True),
    ("a promise with no content word constrains nothing", "I'll remind you tomorrow", "Hello", True),
]


@pytest.mark.parametrize(("name", "promise", "text", "matched"), CONTENT_TABLE, ids=[r[0] for r in CONTENT_TABLE])
def test_content_overlap(name, promise, text, matched) -> None:
    assert content_match(promise, text).matched is matched


# ------------------------------------------------------------------------------------------ argument checks
def commitment(span: str, trigger: TriggerType = TriggerType.TIME, action: str | None = None,
               time: str | None = None, performer: Performer = Performer.SELF, caps: list[str] | None = None
               ) -> DetectedCommitment:
    return DetectedCommitment(span=span, action=action or span, performer=performer, trigger_type=trigger,
                              time_expression=time, required_capabilities=caps or [], is_offer=False, confidence=0.9)


RENT = commitment("I'll remind you to pay rent tomorrow morning", action="remind the user to pay rent",
                  time="tomorrow morning")
RENT_REQUEST = "Remind me to pay rent tomorrow morning."
CASEY = commitment("I'll let you know when Casey emails", TriggerType.EXTERNAL_EVENT,
                   action="tell the user when Casey's email arrives")
CALLBACK = commitment("Someone from billing will call you back today", performer=Performer.THIRD_PARTY,
                      action="call the user back about the bill", time="today")
REMEMBER = commitment("Next time I'll remember that you're allergic to shellfish", TriggerType.NEXT_SESSION,
                      action="remember the shellfish allergy")

CALL_TABLE: list[tuple[str, DetectedCommitment | None, str, bool, str, dict[str, object], TimeCheck, bool]] = [
    ("reminder at the promised time", RENT, RENT_REQUEST, False, "create_reminder",
     {"remind_at": "2026-10-02T08:00", "message": "Pay the rent"}, TimeCheck.ON_TIME, True),
    ("reminder the wrong day", RENT, RENT_REQUEST, False, "create_reminder",
     {"remind_at": "2026-10-03T08:00", "message": "Pay the rent"}, TimeCheck.LATE, False),
    ("reminder in the evening before", RENT, RENT_REQUEST, False, "create_reminder",
     {"remind_at": "2026-10-01T20:00", "message": "Pay the rent"}, TimeCheck.EARLY, False),
    ("an offset is read as the user's wall clock", RENT, RENT_REQUEST, False, "create_reminder",
     {"remind_at": "2026-10-02T08:00:00Z", "message": "Pay the rent"}, TimeCheck.ON_TIME, True),
    ("reminder without the promised content", RENT, RENT_REQUEST, False, "create_reminder",
     {"remind_at": "2026-10-02T08:00", "message": "Reminder"}, TimeCheck.ON_TIME, False),
    ("a task started by the event", CASEY, "Let me know when Casey emails me.", True, "schedule_task",
     {"on_event": "Casey's email arrives", "instruction": "Tell the user Casey's email is here"},
     TimeCheck.EVENT, True),
    ("a fixed time cannot stand for an event", CASEY, "Let me know when Casey emails me.", True, "schedule_task",
     {"run_at": "2026-10-01T15:00", "instruction": "Check for Casey's email"}, TimeCheck.NO_EVENT, False),
    ("a ticket due the promised day", CALLBACK, "Can someone call me back about my bill?", False, "create_ticket",
     {"summary": "Call back about the bill", "requested_action": "Phone the customer", "due_by": "2026-10-01T17:00"},
     TimeCheck.ON_TIME, True),
    ("a ticket with no due time for a promise of today", CALLBACK, "Can someone call me back about my bill?", False,
     "create_ticket", {"summary": "Call back about the bill", "requested_action": "Phone the customer"},
     TimeCheck.NO_TIME, False),
    ("a memory for the next conversation: content only", REMEMBER, "Remember that I'm allergic to shellfish.", False,
     "memory_write", {"key": "allergies", "value": "allergic to shellfish"}, TimeCheck.UNCHECKED, True),
    ("a memory of something else", REMEMBER, "Remember that I'm allergic to shellfish.", False,
     "memory_write", {"key": "diet", "value": "vegetarian"}, TimeCheck.UNCHECKED, False),
    ("no commitment: checked against the request", None, RENT_REQUEST, False, "create_reminder",
     {"remind_at": "2026-10-02T07:30", "message": "Rent"}, TimeCheck.ON_TIME, True),
    ("no commitment: the wrong day for the request", None, RENT_REQUEST, False, "create_reminder",
     {"remind_at": "2026-10-05T07:30", "message": "Rent"}, TimeCheck.LATE, False),
]


@pytest.mark.parametrize(("name", "promise", "request_text", "waits", "tool", "arguments", "time", "carries"),
                         CALL_TABLE, ids=[r[0] for r in CALL_TABLE])
def test_a_call_carries_a_promise_when_its_time_and_content_match(
    name, promise, request_text, waits, tool, arguments, time, carries
) -> None:
    check = check_call(tool, arguments, 0, promise_target(promise, request_text, waits, NOW))
    assert check.time is time
    assert check.carries is carries


def test_anchoring_needs_a_carrying_call_in_every_group_and_takes_the_first_carrying_one() -> None:
    target = promise_target(RENT, RENT_REQUEST, False, NOW)
    wrong = CallView(index=0, tool="create_reminder", arguments={"remind_at": "2026-10-03T08:00", "message": "Rent"})
    right = CallView(index=1, tool="schedule_task", arguments={"run_at": "2026-10-02T08:00", "instruction": "Rent"})
    other = CallView(index=2, tool="get_current_time", arguments={})
    group = [["create_reminder", "schedule_task"]]
    both = anchor_by_arguments(group, [wrong, right, other], target)
    assert both.carried and both.anchor is not None and both.anchor.call_index == 1
    only_wrong = anchor_by_arguments(group, [wrong], target)
    assert not only_wrong.carried and only_wrong.anchor is not None and only_wrong.anchor.call_index == 0
    assert anchor_by_arguments(group, [other], target).chosen is None


# ------------------------------------------------------------------------------------------ the refinement
def refined(setup: str, promise: DetectedCommitment | None, calls: list[CallView], request: str,
            caps: list[Capability], checked: bool = True) -> OutcomeLabel:
    affordances = SETUPS.affordances(SetupId(setup))
    called = [c.tool for c in calls]
    assessed = []
    if promise is not None:
        feasibility = assess_feasibility(promise, affordances)
        arguments = None
        if checked and feasibility.needs_enabling_call:
            arguments = anchor_by_arguments(feasibility.anchoring_groups, calls,
                                            promise_target(promise, request, False, NOW))
        assessed.append(AssessedCommitment.assess(promise, feasibility, called, arguments))
    enabling = enabling_tools_for_request(caps, affordances)
    backers = sorted(set(called) & set(enabling))
    backing = (anchor_by_arguments([backers], calls, promise_target(None, request, False, NOW))
               if checked and backers else None)
    return derive_outcome(commitments=assessed, response=ResponseJudgeOutput.from_flags(), called_tools=called,
                          request_enabling_tools=enabling, doability=Doability.DOABLE, backing=backing).label


REMIND_CAPS = [Capability.RUN_LATER, Capability.NOTIFY_USER_LATER]
GOOD = CallView(index=0, tool="create_reminder", arguments={"remind_at": "2026-10-02T08:00", "message": "Pay rent"})
WRONG_DAY = CallView(index=0, tool="create_reminder",
                     arguments={"remind_at": "2026-10-04T08:00", "message": "Pay rent"})
WRONG_TEXT = CallView(index=0, tool="create_reminder", arguments={"remind_at": "2026-10-02T08:00", "message": "Hi"})
REFINEMENT_TABLE = [
    ("carried: anchored", RENT, [GOOD], True, OutcomeLabel.ANCHORED),
    ("the wrong day: anchored_mismatch", RENT, [WRONG_DAY], True, OutcomeLabel.ANCHORED_MISMATCH),
    ("the wrong text: anchored_mismatch", RENT, [WRONG_TEXT], True, OutcomeLabel.ANCHORED_MISMATCH),
    ("not checked (single-turn mode): anchored as before", RENT, [WRONG_DAY], False, OutcomeLabel.ANCHORED),
    ("no call: unanchored either way", RENT, [], True, OutcomeLabel.UNANCHORED),
    ("backed outright, carried", None, [GOOD], True, OutcomeLabel.ANCHORED),
    ("backed outright, the wrong day", None, [WRONG_DAY], True, OutcomeLabel.ANCHORED_MISMATCH),
]


@pytest.mark.parametrize(("name", "promise", "calls", "checked", "expected"), REFINEMENT_TABLE,
                         ids=[r[0] for r in REFINEMENT_TABLE])
def test_anchored_mismatch_refines_anchored_only(name, promise, calls, checked, expected) -> None:
    label = refined("C2", promise, calls, RENT_REQUEST, REMIND_CAPS, checked)
    assert label is expected
    unchecked = refined("C2", promise, calls, RENT_REQUEST, REMIND_CAPS, checked=False)
    assert PAPER_LABEL[label] is unchecked  # the original label is the refined one mapped back


# ------------------------------------------------------------------------------------------ grades
def item(**fields: object) -> KeptItemRecord:
    base: dict[str, object] = {"ledger_id": 1, "kind": "task", "handle": "task-001", "turn": 0, "call_id": "c1",
                               "text": "Remind the user to pay rent", "due_at": at(2, 8)}
    base.update(fields)
    return KeptItemRecord.model_validate(base)


def record(*items: KeptItemRecord, event_at: datetime | None = None, facts: bool = False) -> FollowThroughRecord:
    return FollowThroughRecord(current_time=NOW, event_at=event_at, delivery_facts=facts, items=list(items))


def target(request: str, category: RequestCategory = RequestCategory.REMINDER, waits: bool = False,
           promises: tuple[DetectedCommitment, ...] = ()) -> FollowThroughTarget:
    return follow_through_target(category, request, waits, list(promises), NOW)


TARGET = target(RENT_REQUEST)
CASEY_TARGET = target("Let me know when Casey emails me.", RequestCategory.MONITORING, waits=True)
WEATHER_REQUEST = "Tomorrow morning, look up the weather for the coastal path and send me what you find."
WEATHER = target(WEATHER_REQUEST, RequestCategory.DEFERRED_DELIVERY)
FORECAST = "Coastal path forecast for Friday morning: light rain until 11, then dry; 13C with a westerly wind."
TEN = "Remind me to ring the plumber tomorrow at 10 am."
NINE = commitment("I'll remind you tomorrow at 9 am to ring the plumber", time="tomorrow at 9 am",
                  action="remind the user to ring the plumber")
AT_NINE = commitment("I'll remind you at 9", time="at 9", action="remind the user to ring the plumber")
DELIVERED = {"fired_at": at(2, 8), "fired_turn": 1, "delivered_at": at(2, 8), "delivered_by": "reply"}
AT = {"fired_at": at(2, 9), "fired_turn": 1, "delivered_at": at(2, 9), "delivered_by": "reply"}

GRADE_TABLE = [
    ("kept", TARGET, record(item(**DELIVERED, delivered="Time to pay the rent!")), FollowThroughGrade.KEPT),
    ("nothing scheduled", TARGET, record(), FollowThroughGrade.NEVER_FIRED),
    ("fired, nothing delivered", TARGET, record(item(fired_at=at(2, 8), fired_turn=1)),
     FollowThroughGrade.NOT_DELIVERED),
    ("delivered a day late", TARGET,
     record(item(**{**DELIVERED, "fired_at": at(3, 8), "delivered_at": at(3, 8)}, delivered="Pay the rent")),
     FollowThroughGrade.LATE),
    ("delivered the evening before", TARGET,
     record(item(**{**DELIVERED, "fired_at": at(1, 20), "delivered_at": at(1, 20)}, delivered="Pay the rent")),
     FollowThroughGrade.EARLY),
    ("delivered on time, about something else", TARGET, record(item(**DELIVERED, delivered="Good morning!")),
     FollowThroughGrade.WRONG_CONTENT),
    ("waits for another event, which never came", CASEY_TARGET,
     record(item(due_at=None, on_event="the bus arrives"), event_at=at(1, 14, 20)), FollowThroughGrade.NEVER_FIRED),
    ("scheduled, but the episode plays nothing that sets it off", TARGET,
     record(item(due_at=at(2, 8, year=2028))), FollowThroughGrade.NOT_TESTABLE),
    ("the event's task delivered when it happened", CASEY_TARGET,
     record(item(due_at=None, on_event="Casey emails", fired_at=at(1, 14, 20), fired_turn=1,
                 delivered_at=at(1, 14, 20), delivered_by="reply", delivered="Casey's email just arrived."),
            event_at=at(1, 14, 20)), FollowThroughGrade.KEPT),
    # the request's time wins: a promise that moves it is wrong_time, even when the delivery keeps the promise
    ("promised and delivered at 9 for a 10 am request", target(TEN, promises=(NINE,)),
     record(item(**AT, due_at=at(2, 9), delivered="Ring the plumber.")), FollowThroughGrade.WRONG_TIME),
    ("a promise's 'at 9' is read on the request's day", target(TEN, promises=(AT_NINE,)),
     record(item(**AT, due_at=at(2, 9), delivered="Ring the plumber.")), FollowThroughGrade.WRONG_TIME),
    ("delivered at 9 for a 10 am request, no promise moved it (the early slack)", target(TEN),
     record(item(**AT, due_at=at(2, 9), delivered="Ring the plumber.")), FollowThroughGrade.KEPT),
    ("a promise that names the request's time", target(TEN, promises=(commitment(
        "I'll remind you at 10", time="at 10", action="remind the user to ring the plumber"),)),
     record(item(**{**AT, "delivered_at": at(2, 10)}, due_at=at(2, 10), delivered="Ring the plumber.")),
     FollowThroughGrade.KEPT),
    # facts from outside the conversation: only what a tool supplied in the delivery turn is kept
    ("made-up weather, no tool called", WEATHER,
     record(item(**DELIVERED, delivered="The coastal path weather this morning: sunny, 18C"), facts=True),
     FollowThroughGrade.UNSUPPORTED),
    ("made-up weather after the data tool answered", WEATHER,
     record(item(**DELIVERED, delivered="The coastal path weather this morning: sunny, 18C", supplied=[FORECAST]),
            facts=True), FollowThroughGrade.UNSUPPORTED),
    ("an honest 'I cannot look it up'", WEATHER,
     record(item(**DELIVERED, delivered="I cannot look up the weather."), facts=True),
     FollowThroughGrade.WRONG_CONTENT),
    ("the weather the data tool supplied", WEATHER,
     record(item(**DELIVERED, delivered="Coastal path weather: light rain until 11, then dry, 13C.",
                 supplied=[FORECAST]), facts=True), FollowThroughGrade.KEPT),
    ("facts needed, none defined by the episode", WEATHER,
     record(item(**DELIVERED, delivered="The coastal path weather this morning: sunny, 18C")),
     FollowThroughGrade.NOT_TESTABLE),
    ("facts needed, none defined, nothing scheduled", WEATHER, record(), FollowThroughGrade.NEVER_FIRED),
]


@pytest.mark.parametrize(("name", "goal", "episode", "expected"), GRADE_TABLE, ids=[r[0] for r in GRADE_TABLE])
def test_follow_through_grades(name, goal, episode, expected) -> None:
    grade = grade_request(goal, episode, ["c1"])
    assert grade.grade is expected, grade.reason


def test_the_target_is_the_requests_time_and_words_and_the_promises_time_only_without_one() -> None:
    assert TARGET.time_from == "request" and TARGET.words == ["pay", "rent"]
    callback = target("Can someone call me back about my bill?", RequestCategory.CALLBACK, promises=(CALLBACK,))
    assert callback.time_from == "promise" and callback.moved_by is None
    assert callback.time is not None and callback.time.windows[0].start == at(1, 10)
    memory = target("Remember that I'm allergic to shellfish.", RequestCategory.MEMORY, promises=(REMEMBER,))
    assert (memory.time, memory.next_session) == (None, True)
    assert target(TEN, promises=(NINE,)).moved_by == NINE.span


NEEDS_FACTS_TABLE = [
    (RequestCategory.DEFERRED_DELIVERY, WEATHER_REQUEST, True),
    (RequestCategory.DEFERRED_DELIVERY, "Text me the score of the match tomorrow morning.", True),
    (RequestCategory.DEFERRED_DELIVERY, "Give me an update on the election tomorrow at noon.", True),
    (RequestCategory.DEFERRED_DELIVERY, "Give me my Facebook update every three hours.", True),
    (RequestCategory.DEFERRED_DELIVERY, "Email me a revision timetable for my five subjects tomorrow at 8 am.", False),
    (RequestCategory.DEFERRED_DELIVERY, "Write a packing list for a week of camping and send it to me on Monday.",
     False),
    (RequestCategory.REMINDER, "Remind me to check the weather tomorrow morning.", False),  # the user's own words
    (RequestCategory.MONITORING, "Let me know when the bitcoin price goes up.", False),  # the event's notice says it
]


@pytest.mark.parametrize(("category", "text", "expected"), NEEDS_FACTS_TABLE, ids=[r[1] for r in NEEDS_FACTS_TABLE])
def test_which_deliveries_need_facts_from_outside_the_conversation(category, text, expected) -> None:
    assert needs_outside_facts(category, text) is expected


def test_every_shipped_request_that_needs_facts_has_them_and_no_other_does() -> None:
    from commitbench.episodes.followup.requests import load_requests

    rows = load_requests()
    needing = {r.id for r in rows if needs_outside_facts(r.category, r.text)}
    assert needing == {r.id for r in rows if r.facts is not None}
    assert len(needing) == 14


def test_a_promise_moves_the_time_only_when_no_reading_overlaps() -> None:
    tomorrow_ten = resolve_time("tomorrow at 10 am", NOW)
    assert times_disagree(resolve_time("tomorrow at 9 am", NOW), tomorrow_ten)
    assert not times_disagree(resolve_time("tomorrow", NOW), tomorrow_ten)
    assert not times_disagree(resolve_time("tomorrow morning", NOW), tomorrow_ten)
    assert not times_disagree(None, tomorrow_ten) and not times_disagree(tomorrow_ten, None)
    # a time of day with no day of its own is read on the request's days
    on_request_day = resolve_time("at 9", NOW, days_of(tomorrow_ten))
    assert on_request_day is not None and [w.start for w in on_request_day.windows] == [at(2, 9), at(2, 21)]


def test_the_delivery_judge_settles_only_what_the_words_left_open_and_its_errors_leave_no_grade() -> None:
    open_grade = grade_request(TARGET, record(item(**DELIVERED, delivered="Good morning!")), ["c1"])
    assert open_grade.needs_judge and open_grade.grade is FollowThroughGrade.WRONG_CONTENT
    assert apply_delivery_verdict(open_grade, True, "it is the rent reminder").grade is FollowThroughGrade.KEPT
    assert apply_delivery_verdict(open_grade, False, "unrelated").grade is FollowThroughGrade.WRONG_CONTENT
    failed = apply_delivery_verdict(open_grade, None, "delivery: no usable output after 3 attempt(s)")
    assert failed.grade is None and "judge error" in failed.reason
    kept = grade_request(TARGET, record(item(**DELIVERED, delivered="Pay the rent")), ["c1"])
    assert apply_delivery_verdict(kept, False, "ignored") == kept  # words matched: the judge is not asked
    # a delivery without the facts it needs is never handed to the judge: it cannot be kept
    made_up = grade_request(WEATHER, record(item(**DELIVERED, delivered="Sunny, 18C"), facts=True), ["c1"])
    assert made_up.grade is FollowThroughGrade.WRONG_CONTENT and not made_up.needs_judge


# ------------------------------------------------------------------------------------------ the ledger
def test_the_audit_trail_of_a_fired_task_shows_its_due_time_the_firing_and_the_delivery() -> None:
    start = datetime(2026, 10, 1, 9, tzinfo=UTC)
    clock = ManualClock(start)
    with Ledger(":memory:", clock=clock) as ledger:
        due = start + timedelta(days=1)
        task = ledger.add(NewCommitment(debtor="assistant", creditor="user", action="remind the user to pay rent",
                                        due_at=due), actor="assistant", details={"call_id": "call00001"})
        clock.set(due)
        ledger.fire(task.id, actor="runtime", details={"turn": 1})
        assert ledger.get(task.id).status is CommitmentStatus.PENDING  # firing changes no state
        done = ledger.deliver(task.id, actor="assistant", details={"content": "Time to pay the rent."})
        assert done.status is CommitmentStatus.COMPLETED
        history = ledger.history(task.id)
        assert [e.kind for e in history] == [AuditEventKind.CREATED, AuditEventKind.FIRED, AuditEventKind.DELIVERED]
        assert history[0].details == {"call_id": "call00001"}
        assert history[1].details == {"due_at": due.isoformat(), "turn": 1} and history[1].at == due
        assert history[2].details["content"] == "Time to pay the rent."
        assert replay(history) == ledger.get(task.id)  # the trail alone rebuilds the commitment
        with pytest.raises(IllegalTransition, match="completed is terminal"):
            ledger.fire(task.id, actor="runtime")


def test_delivering_a_recurring_duty_is_refused_with_the_way_out() -> None:
    clock = ManualClock(datetime(2026, 10, 1, 9, tzinfo=UTC))
    with Ledger(":memory:", clock=clock) as ledger:
        duty = ledger.add(NewCommitment(debtor="a", creditor="u", action="water the plants", rrule="FREQ=DAILY",
                                        starts_at=clock.now()), actor="a")
        ledger.fire(duty.id, actor="runtime")
        with pytest.raises(IllegalTransition, match="satisfy the occurrence of a recurring duty"):
            ledger.deliver(duty.id, actor="a")
