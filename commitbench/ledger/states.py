"""The lifecycle as a table: which operation may run from which state, and where it leads.

One-shot:  unscheduled -> pending (schedule) ; pending -> acknowledged ;
           pending | acknowledged -> completed | failed | cancelled ; unscheduled -> cancelled ;
           pending | acknowledged: fire (no change of state) ; deliver -> completed.
Recurring: pending -> acknowledged ; fire (the live occurrence; no change of state) ;
           pending | acknowledged -> pending (satisfy / waive re-arm the
           next occurrence; completed when the rule has no occurrences left) ;
           pending | acknowledged -> retired (the separate, explicit end of a duty).
Terminal states (completed, failed, cancelled, retired) accept nothing.
"""

from __future__ import annotations

from enum import Enum

from commitbench.ledger.errors import IllegalTransition, RecurringCloseRefused
from commitbench.ledger.models import TERMINAL_STATUSES, Commitment, CommitmentKind, CommitmentStatus

S = CommitmentStatus


class Operation(str, Enum):
    """Operations that move a commitment through its lifecycle."""

    ACKNOWLEDGE = "acknowledge"
    SCHEDULE = "schedule"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    SATISFY = "satisfy"
    WAIVE = "waive"
    RETIRE = "retire"
    NAME_DELEGATE = "name a delegate for"
    FIRE = "fire"
    DELIVER = "deliver"


# (kind, operation) -> {source status: target status}
TRANSITIONS: dict[tuple[CommitmentKind, Operation], dict[CommitmentStatus, CommitmentStatus]] = {
    (CommitmentKind.ONE_SHOT, Operation.ACKNOWLEDGE): {S.PENDING: S.ACKNOWLEDGED},
    (CommitmentKind.ONE_SHOT, Operation.SCHEDULE): {
        S.UNSCHEDULED: S.PENDING,
        S.PENDING: S.PENDING,
        S.ACKNOWLEDGED: S.ACKNOWLEDGED,
    },
    (CommitmentKind.ONE_SHOT, Operation.COMPLETE): {S.PENDING: S.COMPLETED, S.ACKNOWLEDGED: S.COMPLETED},
    (CommitmentKind.ONE_SHOT, Operation.FAIL): {S.PENDING: S.FAILED, S.ACKNOWLEDGED: S.FAILED},
    (CommitmentKind.ONE_SHOT, Operation.CANCEL): {
        S.UNSCHEDULED: S.CANCELLED,
        S.PENDING: S.CANCELLED,
        S.ACKNOWLEDGED: S.CANCELLED,
    },
    (CommitmentKind.ONE_SHOT, Operation.NAME_DELEGATE): {s: s for s in (S.UNSCHEDULED, S.PENDING, S.ACKNOWLEDGED)},
    (CommitmentKind.ONE_SHOT, Operation.FIRE): {S.PENDING: S.PENDING, S.ACKNOWLEDGED: S.ACKNOWLEDGED},
    (CommitmentKind.ONE_SHOT, Operation.DELIVER): {S.PENDING: S.COMPLETED, S.ACKNOWLEDGED: S.COMPLETED},
    (CommitmentKind.RECURRING, Operation.ACKNOWLEDGE): {S.PENDING: S.ACKNOWLEDGED},
    (CommitmentKind.RECURRING, Operation.SATISFY): {S.PENDING: S.PENDING, S.ACKNOWLEDGED: S.PENDING},
    (CommitmentKind.RECURRING, Operation.WAIVE): {S.PENDING: S.PENDING, S.ACKNOWLEDGED: S.PENDING},
    (CommitmentKind.RECURRING, Operation.RETIRE): {S.PENDING: S.RETIRED, S.ACKNOWLEDGED: S.RETIRED},
    (CommitmentKind.RECURRING, Operation.NAME_DELEGATE): {S.PENDING: S.PENDING, S.ACKNOWLEDGED: S.ACKNOWLEDGED},
    (CommitmentKind.RECURRING, Operation.FIRE): {S.PENDING: S.PENDING, S.ACKNOWLEDGED: S.ACKNOWLEDGED},
}

_CLOSES = (Operation.COMPLETE, Operation.FAIL, Operation.CANCEL)


def target_status(commitment: Commitment, operation: Operation) -> CommitmentStatus:
    """The status ``operation`` leads to from ``commitment``'s state, or a typed error saying why not."""
    current = commitment.status
    if commitment.kind is CommitmentKind.RECURRING and operation in _CLOSES:
        raise RecurringCloseRefused(
            commitment.id,
            current,
            operation.value,
            "the normal close refuses a recurring duty; use satisfy or waive for an occurrence, "
            "or retire to end the duty for good",
        )
    table = TRANSITIONS.get((commitment.kind, operation))
    if table is None:
        if operation in (Operation.SATISFY, Operation.WAIVE, Operation.RETIRE):
            detail = f"{operation.value} applies to recurring duties only; close a one-shot commitment"
        elif operation is Operation.DELIVER:
            detail = "deliver ends a one-shot commitment; satisfy the occurrence of a recurring duty"
        else:
            detail = "a recurring duty is scheduled by its rule"
        raise IllegalTransition(commitment.id, current, operation.value, detail)
    target = table.get(current)
    if target is None:
        if current in TERMINAL_STATUSES:
            detail = f"{current.value} is terminal"
        else:
            allowed = ", ".join(sorted(s.value for s in table))
            detail = f"{operation.value} is allowed only from: {allowed}"
        raise IllegalTransition(commitment.id, current, operation.value, detail)
    return target
