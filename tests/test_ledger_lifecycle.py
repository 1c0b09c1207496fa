"""The lifecycle rules of the ledger, as tables of (state, operation) -> outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from commitbench.ledger import (
    AllowParties,
    AuditEventKind,
    CommitmentKind,
    CommitmentStatus,
    FixedClock,
    IllegalTransition,
    InvalidCommitment,
    Ledger,
    ManualClock,
    NewCommitment,
    OccurrenceOutcome,
    Outcome,
    RecurringCloseRefused,
    StaleOccurrence,
    StandingRefused,
    replay,
)

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
DUE = datetime(2025, 3, 7, 17, 0, tzinfo=UTC)
WEEKLY_MONDAY_9 = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0"
FIRST_MONDAY = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)

# Operations applied by the table tests. Cancel is done by the creditor, so standing never interferes.
OPERATIONS = ("acknowledge", "schedule", "complete", "fail", "cancel", "satisfy", "waive", "retire")

# One-shot: (start state, operation) -> resulting status; pairs not listed must raise IllegalTransition.
ONE_SHOT_ALLOWED = {
    ("unscheduled", "schedule"): "pending",
    ("unscheduled", "cancel"): "cancelled",
    ("pending", "acknowledge"): "acknowledged",
    ("pending", "schedule"): "pending",
    ("pending", "complete"): "completed",
    ("pending", "fail"): "failed",
    ("pending", "cancel"): "cancelled",
    ("acknowledged", "schedule"): "acknowledged",
    ("acknowledged", "complete"): "completed",
    ("acknowledged", "fail"): "failed",
    ("acknowledged", "cancel"): "cancelled",
}
ONE_SHOT_STATES = ("unscheduled", "pending", "acknowledged", "completed", "failed", "cancelled")

# Recurring: the same, for duties. satisfy/waive re-arm to pending.
RECURRING_ALLOWED = {
    ("pending", "acknowledge"): "acknowledged",
    ("pending", "satisfy"): "pending",
    ("pending", "waive"): "pending",
    ("pending", "retire"): "retired",
    ("acknowledged", "satisfy"): "pending",
    ("acknowledged", "waive"): "pending",
    ("acknowledged", "retire"): "retired",
}
RECURRING_STATES = ("pending", "acknowledged", "retired", "completed")
# The normal close of a duty is refused with its own error type.
RECURRING_CLOSE_REFUSED = ("complete", "fail", "cancel")


@pytest.fixture
def ledger():
    with Ledger(":memory:", clock=ManualClock(T0)) as opened:
        yield opened


def one_shot_in(ledger: Ledger, state: str) -> int:
    due = None if state == "unscheduled" else DUE
    c = ledger.add(NewCommitment(debtor="bot", creditor="sarah", action="send the plan", due_at=due), "bot")
    if state == "acknowledged":
        ledger.acknowledge(c.id, "bot")
    elif state == "completed":
        ledger.complete(c.id, "bot")
    elif state == "failed":
        ledger.fail(c.id, "bot")
    elif state == "cancelled":
        ledger.release(c.id, "sarah")
    assert ledger.get(c.id).status.value == state
    return c.id


def recurring_in(ledger: Ledger, state: str) -> int:
    rule = WEEKLY_MONDAY_9 + (";COUNT=1" if state == "completed" else "")
    c = ledger.add(
        NewCommitment(debtor="bot", creditor="clinton", action="check the order", rrule=rule, starts_at=T0), "bot"
    )
    if state == "acknowledged":
        ledger.acknowledge(c.id, "bot")
    elif state == "retired":
        ledger.retire(c.id, "clinton")
    elif state == "completed":
        ledger.satisfy(c.id, FIRST_MONDAY, "bot")
    assert ledger.get(c.id).status.value == state
    return c.id


def apply(ledger: Ledger, commitment_id: int, operation: str) -> None:
    c = ledger.get(commitment_id)
    if operation == "acknowledge":
        ledger.acknowledge(commitment_id, "bot")
    elif operation == "schedule":
        ledger.schedule(commitment_id, DUE + timedelta(days=1), "bot")
    elif operation == "complete":
        ledger.close_commitment(commitment_id, Outcome.COMPLETED, "bot")
    elif operation == "fail":
        ledger.close_commitment(commitment_id, Outcome.FAILED, "bot")
    elif operation == "cancel":
        ledger.close_commitment(commitment_id, Outcome.CANCELLED, c.creditor)
    elif operation in ("satisfy", "waive"):
        target = c.bookmark or DUE
        (ledger.satisfy if operation == "satisfy" else ledger.waive)(commitment_id, target, "bot")
    elif operation == "retire":
        ledger.retire(commitment_id, c.creditor)
    else:  # pragma: no cover - table typo guard
        raise AssertionError(operation)


@pytest.mark.parametrize("state", ONE_SHOT_STATES)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_one_shot_transition_table(ledger: Ledger, state: str, operation: str) -> None:
    cid = one_shot_in(ledger, state)
    expected = ONE_SHOT_ALLOWED.get((state, operation))
    events_before = len(ledger.history(cid))
    if expected is None:
        with pytest.raises(IllegalTransition) as info:
            apply(ledger, cid, operation)
        assert info.value.current.value == state
        assert info.value.attempted == operation
        assert state in str(info.value) and operation in str(info.value)
        assert ledger.get(cid).status.value == state
        assert len(ledger.history(cid)) == events_before  # a refused transition writes nothing
    else:
        apply(ledger, cid, operation)
        assert ledger.get(cid).status.value == expected
        assert replay(ledger.history(cid)) == ledger.get(cid)


@pytest.mark.parametrize("state", RECURRING_STATES)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_recurring_transition_table(ledger: Ledger, state: str, operation: str) -> None:
    cid = recurring_in(ledger, state)
    expected = RECURRING_ALLOWED.get((state, operation))
    if expected is None:
        error = RecurringCloseRefused if operation in RECURRING_CLOSE_REFUSED else IllegalTransition
        if state in ("retired", "completed") and operation in ("satisfy", "waive"):
            # closing an occurrence other than the last one closed, on a finished duty
            with pytest.raises(IllegalTransition):
                (ledger.satisfy if operation == "satisfy" else ledger.waive)(cid, DUE, "bot")
            return
        with pytest.raises(error) as info:
            apply(ledger, cid, operation)
        assert info.value.current.value == state
        assert ledger.get(cid).status.value == state
    else:
        apply(ledger, cid, operation)
        assert ledger.get(cid).status.value == expected


def test_unscheduled_enters_the_flow_when_a_due_time_is_set(ledger: Ledger) -> None:
    c = ledger.add(NewCommitment(debtor="bot", creditor="ali", action="share the slides"), "bot")
    assert c.status is CommitmentStatus.UNSCHEDULED
    scheduled = ledger.schedule(c.id, DUE, "bot", "ali said Friday")
    assert scheduled.status is CommitmentStatus.PENDING and scheduled.due_at == DUE
    moved = ledger.schedule(c.id, DUE + timedelta(hours=2), "bot")
    kinds = [e.kind for e in ledger.history(c.id)]
    assert kinds == [AuditEventKind.CREATED, AuditEventKind.SCHEDULED, AuditEventKind.RESCHEDULED]
    assert ledger.history(c.id)[-1].details["previous_due_at"] == DUE.isoformat()
    same = ledger.schedule(c.id, DUE + timedelta(hours=2), "bot")
    assert same == moved and len(ledger.history(c.id)) == 3  # no change, no event


def test_a_condition_counts_as_a_schedule(ledger: Ledger) -> None:
    c = ledger.add(
        NewCommitment(debtor="bot", creditor="sarah", action="book a room", condition="the agenda is final"), "bot"
    )
    assert c.status is CommitmentStatus.PENDING and c.next_due is None


def test_every_transition_records_time_actor_reason() -> None:
    clock = ManualClock(T0)
    with Ledger(":memory:", clock=clock) as ledger:
        c = ledger.add(NewCommitment(debtor="bot", creditor="sarah", action="send", due_at=DUE), "bot", "asked")
        clock.advance(timedelta(hours=1))
        ledger.acknowledge(c.id, "bot", "picked up")
        clock.advance(timedelta(hours=1))
        ledger.complete(c.id, "bot", "sent it")
        history = ledger.history(c.id)
    assert [(e.kind.value, e.actor, e.reason, e.at) for e in history] == [
        ("created", "bot", "asked", T0),
        ("acknowledged", "bot", "picked up", T0 + timedelta(hours=1)),
        ("completed", "bot", "sent it", T0 + timedelta(hours=2)),
    ]
    assert [(e.from_status, e.to_status) for e in history] == [
        (None, CommitmentStatus.PENDING),
        (CommitmentStatus.PENDING, CommitmentStatus.ACKNOWLEDGED),
        (CommitmentStatus.ACKNOWLEDGED, CommitmentStatus.COMPLETED),
    ]


# ------------------------------------------------------------------ standing

# (actor, policy parties) -> basis recorded, or None for a refusal
STANDING_CASES = [
    ("sarah", (), "creditor"),
    ("tom", (), "delegate"),
    ("dave", ("dave",), "policy"),
    ("dave", (), None),  # a manager the creditor never named
    ("bot", (), None),  # the debtor cannot let itself off
    ("mallory", ("dave",), None),
]


@pytest.mark.parametrize(("actor", "policy_parties", "basis"), STANDING_CASES)
def test_release_needs_standing(actor: str, policy_parties: tuple, basis: str | None) -> None:
    with Ledger(":memory:", clock=FixedClock(T0), policy=AllowParties(policy_parties)) as ledger:
        c = ledger.add(
            NewCommitment(debtor="bot", creditor="sarah", action="send", due_at=DUE, delegates=("tom",)), "bot"
        )
        if basis is None:
            with pytest.raises(StandingRefused) as info:
                ledger.release(c.id, actor, "drop it")
            assert info.value.actor == actor and info.value.creditor == "sarah"
            assert ledger.get(c.id).status is CommitmentStatus.PENDING
            refusal = ledger.history(c.id)[-1]
            assert refusal.kind is AuditEventKind.STANDING_REFUSED
            assert (refusal.actor, refusal.reason, refusal.changes) == (actor, "drop it", {})
            assert refusal.details["attempted"] == "cancel"
            assert ledger.get(c.id).version == 1  # a refusal is recorded but changes nothing
        else:
            released = ledger.release(c.id, actor, "no longer needed")
            assert released.status is CommitmentStatus.CANCELLED
            assert ledger.history(c.id)[-1].details["standing"] == basis


def test_close_cancelled_goes_through_the_standing_check(ledger: Ledger) -> None:
    c = ledger.add(NewCommitment(debtor="bot", creditor="sarah", action="send", due_at=DUE), "bot")
    with pytest.raises(StandingRefused):
        ledger.close_commitment(c.id, Outcome.CANCELLED, "bot")
    assert ledger.close_commitment(c.id, "cancelled", "sarah").status is CommitmentStatus.CANCELLED


def test_only_the_creditor_names_delegates(ledger: Ledger) -> None:
    c = ledger.add(NewCommitment(debtor="bot", creditor="sarah", action="send", due_at=DUE), "bot")
    with pytest.raises(StandingRefused):
        ledger.name_delegate(c.id, "dave", "dave", "I'm her manager")
    assert ledger.history(c.id)[-1].kind is AuditEventKind.STANDING_REFUSED
    ledger.name_delegate(c.id, "tom", "sarah", "Tom covers for me")
    assert ledger.get(c.id).delegates == ("tom",)
    assert ledger.release(c.id, "tom").status is CommitmentStatus.CANCELLED


def test_retiring_a_duty_needs_standing(ledger: Ledger) -> None:
    cid = recurring_in(ledger, "pending")
    with pytest.raises(StandingRefused):
        ledger.retire(cid, "bot")
    retired = ledger.retire(cid, "clinton", "robot is online")
    assert retired.status is CommitmentStatus.RETIRED and retired.bookmark == FIRST_MONDAY


# ------------------------------------------------------------------ recurring bookmark


def add_weekly(ledger: Ledger, rule: str = WEEKLY_MONDAY_9) -> int:
    return ledger.add(
        NewCommitment(debtor="bot", creditor="clinton", action="check the order", rrule=rule, starts_at=T0), "bot"
    ).id


def test_satisfy_advances_and_retry_is_a_noop() -> None:
    clock = ManualClock(FIRST_MONDAY + timedelta(minutes=5))
    with Ledger(":memory:", clock=clock) as ledger:
        cid = add_weekly(ledger)
        assert ledger.get(cid).bookmark == FIRST_MONDAY
        result = ledger.satisfy(cid, FIRST_MONDAY, "bot", "checked")
        assert result.outcome is OccurrenceOutcome.ADVANCED and result.skipped_count == 0
        assert result.commitment.bookmark == FIRST_MONDAY + timedelta(weeks=1)
        assert result.commitment.last_closed == FIRST_MONDAY
        retry = ledger.satisfy(cid, FIRST_MONDAY, "bot")
        assert retry.outcome is OccurrenceOutcome.RETRY_NOOP
        assert retry.commitment == result.commitment
        with pytest.raises(StaleOccurrence) as info:
            ledger.waive(cid, FIRST_MONDAY + timedelta(weeks=2), "bot")
        assert info.value.live == FIRST_MONDAY + timedelta(weeks=1)
        waived = ledger.waive(cid, FIRST_MONDAY + timedelta(weeks=1), "bot", "nothing new")
        assert waived.commitment.bookmark == FIRST_MONDAY + timedelta(weeks=2)
        kinds = [e.kind for e in ledger.history(cid)]
    assert kinds == [AuditEventKind.CREATED, AuditEventKind.SATISFIED, AuditEventKind.WAIVED]


def test_acknowledge_then_satisfy_rearms_to_pending(ledger: Ledger) -> None:
    cid = add_weekly(ledger)
    ledger.acknowledge(cid, "bot")
    result = ledger.satisfy(cid, FIRST_MONDAY, "bot")
    assert result.commitment.status is CommitmentStatus.PENDING


def test_catch_up_jumps_to_the_upcoming_occurrence_with_one_skip_event() -> None:
    clock = ManualClock(T0)
    with Ledger(":memory:", clock=clock) as ledger:
        cid = add_weekly(ledger)
        clock.set(datetime(2025, 3, 26, 12, 0, tzinfo=UTC))  # three more Mondays went by untouched
        result = ledger.satisfy(cid, FIRST_MONDAY, "bot", "late")
        history = ledger.history(cid)
        assert ledger.due()[0].group.value == "scheduled"
    missed = [datetime(2025, 3, d, 9, 0, tzinfo=UTC) for d in (10, 17, 24)]
    assert result.skipped == tuple(missed) and result.skipped_count == 3
    assert result.commitment.bookmark == datetime(2025, 3, 31, 9, 0, tzinfo=UTC)
    kinds = [AuditEventKind.CREATED, AuditEventKind.SATISFIED, AuditEventKind.OCCURRENCES_SKIPPED]
    assert [e.kind for e in history] == kinds
    skip = history[-1]
    assert skip.details["count"] == 3
    assert skip.details["skipped"] == [m.isoformat() for m in missed]
    assert replay(history) == result.commitment


def test_an_occurrence_due_exactly_now_is_not_skipped() -> None:
    with Ledger(":memory:", clock=ManualClock(datetime(2025, 3, 17, 9, 0, tzinfo=UTC))) as ledger:
        cid = add_weekly(ledger)
        result = ledger.satisfy(cid, FIRST_MONDAY, "bot")
    assert result.skipped == (datetime(2025, 3, 10, 9, 0, tzinfo=UTC),)
    assert result.commitment.bookmark == datetime(2025, 3, 17, 9, 0, tzinfo=UTC)


def test_an_untouched_duty_stays_overdue() -> None:
    clock = ManualClock(T0)
    with Ledger(":memory:", clock=clock) as ledger:
        cid = add_weekly(ledger)
        for weeks in (1, 2, 3):
            clock.set(FIRST_MONDAY + timedelta(weeks=weeks, hours=1))
            items = ledger.due()
            assert [(i.group.value, i.commitment.id) for i in items] == [("overdue", cid)]
            assert items[0].due_at == FIRST_MONDAY  # the bookmark never moved by itself


def test_a_finite_rule_completes_when_exhausted() -> None:
    clock = ManualClock(T0)
    with Ledger(":memory:", clock=clock) as ledger:
        cid = add_weekly(ledger, WEEKLY_MONDAY_9 + ";COUNT=3")
        clock.set(datetime(2025, 4, 1, tzinfo=UTC))  # all three went by
        result = ledger.satisfy(cid, FIRST_MONDAY, "bot")
        assert result.commitment.status is CommitmentStatus.COMPLETED
        assert result.commitment.bookmark is None and result.skipped_count == 2
        assert ledger.history(cid)[-1].details["exhausted"] is True
        assert ledger.satisfy(cid, FIRST_MONDAY, "bot").outcome is OccurrenceOutcome.RETRY_NOOP
        assert ledger.due() == []


def test_recurrence_keeps_wall_clock_time_across_daylight_saving() -> None:
    start = datetime(2025, 3, 1, tzinfo=UTC)
    clock = ManualClock(start)
    with Ledger(":memory:", clock=clock) as ledger:
        c = ledger.add(
            NewCommitment(
                debtor="bot",
                creditor="ana",
                action="standup notes",
                rrule="FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
                starts_at=start,
                timezone="America/New_York",
            ),
            "bot",
        )
        assert c.bookmark == datetime(2025, 3, 3, 14, 0, tzinfo=UTC)  # 09:00 EST
        after = ledger.satisfy(c.id, c.bookmark, "bot").commitment
    assert after.bookmark == datetime(2025, 3, 10, 13, 0, tzinfo=UTC)  # 09:00 EDT


# ------------------------------------------------------------------ bad input

BAD_COMMITMENTS = [
    ({"debtor": " ", "creditor": "a", "action": "x"}, "debtor"),
    ({"debtor": "a", "creditor": "b", "action": "x", "due_at": datetime(2025, 3, 1)}, "timezone"),
    ({"debtor": "a", "creditor": "b", "action": "x", "rrule": "FREQ=DAILY"}, "starts_at"),
    ({"debtor": "a", "creditor": "b", "action": "x", "starts_at": T0}, "only meaningful with rrule"),
    ({"debtor": "a", "creditor": "b", "action": "x", "rrule": "FREQ=DAILY", "starts_at": T0, "due_at": DUE}, "due_at"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_COMMITMENTS)
def test_bad_commitments_are_rejected_with_a_reason(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NewCommitment(**fields)


BAD_RULES = [
    ("FREQ=SOMETIMES", "invalid recurrence rule"),
    ("BYDAY=MO", "no FREQ"),
    ("DTSTART:20250301T000000Z\nRRULE:FREQ=DAILY", "one RRULE line"),
    ("FREQ=DAILY;DTSTART=20250301T000000Z", "DTSTART"),
    ("FREQ=DAILY;UNTIL=20250101T000000Z", "no occurrence"),
]


@pytest.mark.parametrize(("rule", "message"), BAD_RULES)
def test_bad_rules_are_rejected(ledger: Ledger, rule: str, message: str) -> None:
    with pytest.raises(InvalidCommitment, match=message):
        ledger.add(NewCommitment(debtor="a", creditor="b", action="x", rrule=rule, starts_at=T0), "a")
    assert ledger.list() == []


def test_unknown_timezone_is_rejected(ledger: Ledger) -> None:
    new = NewCommitment(debtor="a", creditor="b", action="x", rrule="FREQ=DAILY", starts_at=T0, timezone="Mars/Base")
    with pytest.raises(InvalidCommitment, match="Mars/Base"):
        ledger.add(new, "a")


def test_naive_times_and_empty_actors_are_rejected(ledger: Ledger) -> None:
    cid = add_weekly(ledger)
    with pytest.raises(ValueError, match="timezone-aware"):
        ledger.satisfy(cid, datetime(2025, 3, 3, 9, 0), "bot")
    with pytest.raises(InvalidCommitment, match="actor"):
        ledger.acknowledge(cid, "  ")
    assert ledger.get(cid).kind is CommitmentKind.RECURRING


def test_clock_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        FixedClock(datetime(2025, 1, 1))


def test_the_engine_never_reads_the_wall_clock() -> None:
    import commitbench.ledger as package

    root = Path(package.__file__).parent
    offenders = [
        path.name
        for path in root.glob("*.py")
        if path.name != "clock.py" and ("datetime.now(" in path.read_text() or "utcnow(" in path.read_text())
    ]
    assert offenders == []


def test_an_add_with_a_key_records_the_promise_once(tmp_path: Path) -> None:
    new = NewCommitment(debtor="bot", creditor="sarah", action="send the plan", due_at=DUE)
    with Ledger(tmp_path / "keys.db", clock=FixedClock(T0)) as ledger:
        first = ledger.add(new, actor="bot", key="turn-1:0:0")
        again = ledger.add(new, actor="bot", key="turn-1:0:0")
        other = ledger.add(new, actor="bot", key="turn-2:0:0")
        assert again == first and other.id != first.id
        assert len(ledger.list()) == 2 and len(ledger.history(first.id)) == 1
        ledger.acknowledge(first.id, actor="bot")
        assert ledger.add(new, actor="bot", key="turn-1:0:0").status is CommitmentStatus.ACKNOWLEDGED
        with pytest.raises(InvalidCommitment, match="idempotency key"):
            ledger.add(new, actor="bot", key=" ")
    with Ledger(tmp_path / "keys.db", clock=FixedClock(T0)) as reopened:  # keys outlive the process
        assert reopened.add(new, actor="bot", key="turn-2:0:0").id == other.id
