"""Commitment ledger: promises with a due time, a lifecycle and an audit trail.

    from commitbench.ledger import Ledger, NewCommitment, ManualClock
    ledger = Ledger("ledger.db", clock=ManualClock(start))
    c = ledger.add(NewCommitment(debtor="bot", creditor="Sarah", action="send the plan", due_at=friday), "bot")
    ledger.complete(c.id, actor="bot")
"""

from commitbench.ledger.clock import Clock, FixedClock, ManualClock, SystemClock
from commitbench.ledger.engine import Ledger
from commitbench.ledger.errors import (
    CommitmentNotFound,
    IllegalTransition,
    InvalidCommitment,
    LedgerError,
    RecurringCloseRefused,
    ReplayError,
    SchemaTooNew,
    StaleOccurrence,
    StandingRefused,
)
from commitbench.ledger.models import (
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
    NewCommitment,
    OccurrenceOutcome,
    Outcome,
    StandingBasis,
)
from commitbench.ledger.replay import replay
from commitbench.ledger.standing import AllowParties, CreditorRule, StandingPolicy

__all__ = [
    "OPEN_STATUSES",
    "TERMINAL_STATUSES",
    "AllowParties",
    "AuditEvent",
    "AuditEventKind",
    "Clock",
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
    "ManualClock",
    "NewCommitment",
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
    "replay",
]
