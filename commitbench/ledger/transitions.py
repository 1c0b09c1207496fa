"""Pure lifecycle operations: (commitment, request, now) -> plan of the new state and its events.

Nothing here touches storage or a clock. The engine runs a plan inside one transaction: it
writes ``after`` and appends ``events``, then raises ``error`` if the plan carries one (a
standing refusal is recorded first and raised second).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from commitbench.ledger.clock import require_aware
from commitbench.ledger.errors import InvalidCommitment, LedgerError, StaleOccurrence, StandingRefused
from commitbench.ledger.models import (
    AuditEventKind,
    CloseResult,
    Commitment,
    CommitmentKind,
    CommitmentStatus,
    NewCommitment,
    OccurrenceOutcome,
    Outcome,
    check_time_range,
)
from commitbench.ledger.recurrence import FIRST_WITHIN_YEARS, SKIPPED_LIST_CAP, recurrence_for
from commitbench.ledger.standing import StandingPolicy, standing_of
from commitbench.ledger.states import Operation, target_status


@dataclass(frozen=True)
class EventDraft:
    """An audit event before the store numbers it."""

    at: datetime
    actor: str
    kind: AuditEventKind
    reason: str
    from_status: CommitmentStatus | None
    to_status: CommitmentStatus
    changes: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """What an operation does: the state after it, the events that explain it, and its answer."""

    after: Commitment
    events: tuple[EventDraft, ...] = ()
    result: CloseResult | None = None
    error: LedgerError | None = None


def _actor(actor: str) -> str:
    if not isinstance(actor, str) or not actor.strip():
        raise InvalidCommitment("actor must be a non-empty name")
    return actor.strip()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def changed_fields(before: Commitment, after: Commitment) -> dict[str, Any]:
    """The fields of ``after`` that differ from ``before``, as JSON values."""
    old = before.model_dump(mode="json")
    new = after.model_dump(mode="json")
    return {key: value for key, value in new.items() if old.get(key) != value}


def _step(
    before: Commitment,
    *,
    kind: AuditEventKind,
    actor: str,
    reason: str,
    now: datetime,
    details: dict[str, Any] | None = None,
    **updates: Any,
) -> tuple[Commitment, EventDraft]:
    after = before.model_copy(update={**updates, "updated_at": now, "version": before.version + 1})
    draft = EventDraft(
        at=now,
        actor=actor,
        kind=kind,
        reason=reason,
        from_status=before.status,
        to_status=after.status,
        changes=changed_fields(before, after),
        details=details or {},
    )
    return after, draft


def _refusal(
    before: Commitment, operation: Operation, actor: str, reason: str, now: datetime, policy_name: str
) -> Plan:
    draft = EventDraft(
        at=now,
        actor=actor,
        kind=AuditEventKind.STANDING_REFUSED,
        reason=reason,
        from_status=before.status,
        to_status=before.status,
        changes={},
        details={
            "attempted": operation.value,
            "creditor": before.creditor,
            "delegates": list(before.delegates),
            "policy": policy_name,
        },
    )
    error = StandingRefused(before.id, actor, operation.value, before.creditor)
    return Plan(after=before, events=(draft,), error=error)


def first_occurrence(new: NewCommitment) -> datetime | None:
    """The first occurrence of a new recurring duty (None for a one-shot commitment).

    Finding it may walk a rule for years of its periods, so the engine asks before it takes the write lock
    (the answer is kept with the parsed rule, so ``create`` gets it again for free).
    """
    if new.rrule is None or new.starts_at is None:
        return None
    first = recurrence_for(new.rrule, new.starts_at, new.timezone).first()
    if first is None:
        raise InvalidCommitment(
            f"recurrence rule {new.rrule!r} has no occurrence within {FIRST_WITHIN_YEARS} years of starts_at"
        )
    return first


def create(
    new: NewCommitment, commitment_id: int, actor: str, reason: str, now: datetime,
    details: dict[str, Any] | None = None,
) -> Plan:
    """A new commitment and its 'created' event (which carries the full record, and ``details`` if given)."""
    actor = _actor(actor)
    now = require_aware(now, "now")
    bookmark = None
    timezone = None
    if new.kind is CommitmentKind.RECURRING:
        assert new.rrule is not None and new.starts_at is not None  # guaranteed by NewCommitment
        recurrence = recurrence_for(new.rrule, new.starts_at, new.timezone)
        bookmark = first_occurrence(new)
        status = CommitmentStatus.PENDING
        timezone = new.timezone
        rule_text = recurrence.text
    else:
        rule_text = None
        scheduled = new.due_at is not None or new.condition is not None
        status = CommitmentStatus.PENDING if scheduled else CommitmentStatus.UNSCHEDULED
    commitment = Commitment(
        id=commitment_id,
        kind=new.kind,
        status=status,
        debtor=new.debtor,
        creditor=new.creditor,
        delegates=new.delegates,
        action=new.action,
        condition=new.condition,
        due_at=new.due_at,
        rrule=rule_text,
        starts_at=new.starts_at,
        timezone=timezone,
        bookmark=bookmark,
        last_closed=None,
        scope=new.scope,
        created_at=now,
        updated_at=now,
        version=1,
    )
    draft = EventDraft(
        at=now,
        actor=actor,
        kind=AuditEventKind.CREATED,
        reason=reason,
        from_status=None,
        to_status=status,
        changes=commitment.model_dump(mode="json"),
        details=dict(details or {}),
    )
    return Plan(after=commitment, events=(draft,))


def acknowledge(before: Commitment, actor: str, reason: str, now: datetime) -> Plan:
    target = target_status(before, Operation.ACKNOWLEDGE)
    after, draft = _step(
        before, kind=AuditEventKind.ACKNOWLEDGED, actor=_actor(actor), reason=reason, now=now, status=target
    )
    return Plan(after=after, events=(draft,))


def schedule(before: Commitment, due_at: datetime, actor: str, reason: str, now: datetime) -> Plan:
    """Give an unscheduled promise its due time, or move a scheduled one. Same time: no change."""
    due = require_aware(due_at, "due_at")
    try:
        check_time_range(due, "due_at")
    except ValueError as exc:
        raise InvalidCommitment(str(exc)) from None
    target = target_status(before, Operation.SCHEDULE)
    if before.due_at == due and target is before.status:
        return Plan(after=before)
    kind = AuditEventKind.SCHEDULED if before.status is CommitmentStatus.UNSCHEDULED else AuditEventKind.RESCHEDULED
    after, draft = _step(
        before,
        kind=kind,
        actor=_actor(actor),
        reason=reason,
        now=now,
        details={"previous_due_at": _iso(before.due_at)},
        status=target,
        due_at=due,
    )
    return Plan(after=after, events=(draft,))


def close(
    before: Commitment, outcome: Outcome, actor: str, reason: str, now: datetime, policy: StandingPolicy
) -> Plan:
    """The normal close of a one-shot commitment. Cancelling goes through the standing check."""
    if outcome is Outcome.CANCELLED:
        return release(before, actor, reason, now, policy)
    operation = Operation.COMPLETE if outcome is Outcome.COMPLETED else Operation.FAIL
    target = target_status(before, operation)
    kind = AuditEventKind.COMPLETED if outcome is Outcome.COMPLETED else AuditEventKind.FAILED
    after, draft = _step(before, kind=kind, actor=_actor(actor), reason=reason, now=now, status=target)
    return Plan(after=after, events=(draft,))


def _standing_end(
    before: Commitment,
    operation: Operation,
    kind: AuditEventKind,
    actor: str,
    reason: str,
    now: datetime,
    policy: StandingPolicy,
) -> Plan:
    actor = _actor(actor)
    target = target_status(before, operation)
    basis = standing_of(before, actor, policy)
    if basis is None:
        return _refusal(before, operation, actor, reason, now, policy.name)
    details = {"standing": basis.value, "policy": policy.name}
    after, draft = _step(before, kind=kind, actor=actor, reason=reason, now=now, details=details, status=target)
    return Plan(after=after, events=(draft,))


def release(before: Commitment, actor: str, reason: str, now: datetime, policy: StandingPolicy) -> Plan:
    """Cancel a one-shot commitment on behalf of a party with standing; anyone else is refused."""
    return _standing_end(before, Operation.CANCEL, AuditEventKind.CANCELLED, actor, reason, now, policy)


def retire(before: Commitment, actor: str, reason: str, now: datetime, policy: StandingPolicy) -> Plan:
    """End a recurring duty for good (a party with standing only). The bookmark stays where it was."""
    return _standing_end(before, Operation.RETIRE, AuditEventKind.RETIRED, actor, reason, now, policy)


def name_delegate(before: Commitment, delegate: str, actor: str, reason: str, now: datetime) -> Plan:
    """The creditor names someone who may release on their behalf. Others are refused (and recorded)."""
    actor = _actor(actor)
    name = delegate.strip() if isinstance(delegate, str) else ""
    if not name:
        raise InvalidCommitment("delegate must be a non-empty name")
    target_status(before, Operation.NAME_DELEGATE)
    if actor != before.creditor:
        return _refusal(before, Operation.NAME_DELEGATE, actor, reason, now, "creditor-names-delegates")
    if name in before.delegates:
        return Plan(after=before)
    after, draft = _step(
        before,
        kind=AuditEventKind.DELEGATE_NAMED,
        actor=actor,
        reason=reason,
        now=now,
        details={"delegate": name},
        delegates=(*before.delegates, name),
    )
    return Plan(after=after, events=(draft,))


def fire(before: Commitment, actor: str, reason: str, now: datetime, details: dict[str, Any] | None = None) -> Plan:
    """The runtime set the commitment off: its due time came or its event happened. The state stays; the
    event records when it fired and when it was due (``details`` adds what set it off)."""
    target = target_status(before, Operation.FIRE)
    record = {"due_at": _iso(before.next_due), **(details or {})}
    after, draft = _step(
        before, kind=AuditEventKind.FIRED, actor=_actor(actor), reason=reason, now=now, details=record, status=target
    )
    return Plan(after=after, events=(draft,))


def deliver(
    before: Commitment, actor: str, reason: str, now: datetime, details: dict[str, Any] | None = None
) -> Plan:
    """The debtor carried out a one-shot commitment (``details``: what was delivered, and how): completed."""
    target = target_status(before, Operation.DELIVER)
    after, draft = _step(
        before, kind=AuditEventKind.DELIVERED, actor=_actor(actor), reason=reason, now=now,
        details=dict(details or {}), status=target,
    )
    return Plan(after=after, events=(draft,))


def close_occurrence(
    before: Commitment, expected: datetime, waive: bool, actor: str, reason: str, now: datetime
) -> Plan:
    """Satisfy (or waive) the live occurrence of a recurring duty, compare-and-set on ``expected``.

    ``expected`` equal to the live bookmark advances it; equal to the occurrence closed last is a
    retry and changes nothing; anything else raises :class:`StaleOccurrence`. When occurrences
    went by unclosed, the bookmark jumps to the first occurrence at or after ``now`` and one
    ``occurrences_skipped`` event lists what was passed over.
    """
    actor = _actor(actor)
    expected = require_aware(expected, "expected occurrence")
    now = require_aware(now, "now")
    if before.kind is CommitmentKind.RECURRING and before.last_closed == expected:
        result = CloseResult(outcome=OccurrenceOutcome.RETRY_NOOP, closed_occurrence=expected, commitment=before)
        return Plan(after=before, result=result)
    operation = Operation.WAIVE if waive else Operation.SATISFY
    target_status(before, operation)
    if before.bookmark != expected:
        raise StaleOccurrence(before.id, expected, before.bookmark)
    assert before.rrule is not None and before.starts_at is not None and before.timezone is not None
    recurrence = recurrence_for(before.rrule, before.starts_at, before.timezone)
    catch_up = recurrence.catch_up(expected, now)
    following = catch_up.next_after_live
    kind = AuditEventKind.WAIVED if waive else AuditEventKind.SATISFIED
    status = CommitmentStatus.PENDING if following is not None else CommitmentStatus.COMPLETED
    details: dict[str, Any] = {"occurrence": _iso(expected)}
    if following is None:
        details["exhausted"] = True
    after, closed_event = _step(
        before,
        kind=kind,
        actor=actor,
        reason=reason,
        now=now,
        details=details,
        status=status,
        bookmark=following,
        last_closed=expected,
    )
    events = [closed_event]
    if catch_up.skipped_count:
        upcoming = catch_up.upcoming
        listed_all = catch_up.skipped_count_exact and catch_up.skipped_count <= SKIPPED_LIST_CAP
        skip_details: dict[str, Any] = {
            "count": catch_up.skipped_count,
            "count_exact": catch_up.skipped_count_exact,
            "first": _iso(catch_up.skipped[0]),
            "last": _iso(catch_up.skipped[-1]) if listed_all else None,
            "skipped": [_iso(moment) for moment in catch_up.skipped],
            "listed_all": listed_all,
        }
        if not catch_up.skipped_count_exact:
            skip_details["count_text"] = f"at least {catch_up.skipped_count:,}"
        if upcoming is None:
            skip_details["exhausted"] = True
        after, skip_event = _step(
            after,
            kind=AuditEventKind.OCCURRENCES_SKIPPED,
            actor=actor,
            reason=reason,
            now=now,
            details=skip_details,
            status=CommitmentStatus.PENDING if upcoming is not None else CommitmentStatus.COMPLETED,
            bookmark=upcoming,
        )
        events.append(skip_event)
    result = CloseResult(
        outcome=OccurrenceOutcome.ADVANCED,
        closed_occurrence=expected,
        skipped=catch_up.skipped,
        skipped_count=catch_up.skipped_count,
        skipped_count_exact=catch_up.skipped_count_exact,
        commitment=after,
    )
    return Plan(after=after, events=tuple(events), result=result)
