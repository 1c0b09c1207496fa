"""Commitment ledger: promises with a due time, a lifecycle and an audit trail.

    from commitbench.ledger import Ledger, NewCommitment, ManualClock
    ledger = Ledger("ledger.db", clock=ManualClock(start))
    c = ledger.add(NewCommitment(debtor="bot", creditor="Sarah", action="send the plan", due_at=friday), "bot")
    ledger.complete(c.id, actor="bot")
"""

from commitbench.ledger.clock import Clock, FixedClock, ManualClock, SystemClock
from commitbench.ledger.engine import Ledger
from commitbench.ledger.errors import (
    ClockWentBack,
    CommitmentNotFound,
    IllegalTransition,
    InvalidCommitment,
    LedgerError,
    LedgerUnavailable,
    NotALedger,
    RecurringCloseRefused,
    ReplayError,
    SchemaTooNew,
    StaleOccurrence,
    StandingRefused,
    UnreadableCommitment,
)
from commitbench.ledger.models import (
    EARLIEST_TIME,
    LATEST_TIME,
    OPEN_STATUSES,
    TERMINAL_STATUSES,
    AuditEvent,
    AuditEventKind,
    CloseResult,
    Commitment,
    CommitmentKind,
    CommitmentStatus,
    DueGroup,
    DueItem,
    Listing,
    NewCommitment,
    OccurrenceOutcome,
    Outcome,
    StandingBasis,
    UnreadableRow,
)
from commitbench.ledger.replay import replay
from commitbench.ledger.standing import AllowParties, CreditorRule, StandingPolicy

__all__ = [
    "EARLIEST_TIME",
    "LATEST_TIME",
    "OPEN_STATUSES",
    "TERMINAL_STATUSES",
    "AllowParties",
    "AuditEvent",
    "AuditEventKind",
    "Clock",
    "ClockWentBack",
    "CloseResult",
    "Commitment",
    "CommitmentKind",
    "CommitmentNotFound",
    "CommitmentStatus",
    "CreditorRule",
    "DueGroup",
    "DueItem",
    "FixedClock",
    "IllegalTransition",
    "InvalidCommitment",
    "Ledger",
    "LedgerError",
    "LedgerUnavailable",
    "Listing",
    "ManualClock",
    "NewCommitment",
    "NotALedger",
    "OccurrenceOutcome",
    "Outcome",
    "RecurringCloseRefused",
    "ReplayError",
    "SchemaTooNew",
    "StaleOccurrence",
    "StandingBasis",
    "StandingPolicy",
    "StandingRefused",
    "SystemClock",
    "UnreadableCommitment",
    "UnreadableRow",
    "replay",
]
