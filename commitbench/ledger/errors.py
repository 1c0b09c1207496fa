"""Typed errors of the ledger. Every one names what was wrong in its message."""

from __future__ import annotations

from datetime import datetime

from commitbench.ledger.models import CommitmentStatus


class LedgerError(Exception):
    """Base class of everything the ledger raises on purpose."""


class InvalidCommitment(LedgerError, ValueError):
    """The input does not describe a valid commitment (bad rule, naive datetime, empty name, ...)."""


class CommitmentNotFound(LedgerError, KeyError):
    def __init__(self, commitment_id: int) -> None:
        self.commitment_id = commitment_id
        super().__init__(commitment_id)

    def __str__(self) -> str:
        return f"no commitment with id {self.commitment_id}"


class IllegalTransition(LedgerError):
    """The attempted operation is not allowed from the commitment's current state."""

    def __init__(self, commitment_id: int, current: CommitmentStatus, attempted: str, detail: str = "") -> None:
        self.commitment_id = commitment_id
        self.current = current
        self.attempted = attempted
        self.detail = detail
        message = f"commitment {commitment_id} is {current.value}; cannot {attempted}"
        super().__init__(f"{message} ({detail})" if detail else message)


class RecurringCloseRefused(IllegalTransition):
    """The normal close (or release) was called on a recurring duty; retiring it is a separate call."""


class StaleOccurrence(LedgerError):
    """The caller's view of the bookmark is out of date (compare-and-set failed)."""

    def __init__(self, commitment_id: int, expected: datetime, live: datetime | None) -> None:
        self.commitment_id = commitment_id
        self.expected = expected
        self.live = live
        live_text = live.isoformat() if live is not None else "none (the duty has no further occurrences)"
        super().__init__(
            f"commitment {commitment_id}: occurrence {expected.isoformat()} is stale; "
            f"the live occurrence is {live_text}"
        )


class StandingRefused(LedgerError):
    """The actor has no standing to release the commitment. The refusal is in the audit trail."""

    def __init__(self, commitment_id: int, actor: str, attempted: str, creditor: str) -> None:
        self.commitment_id = commitment_id
        self.actor = actor
        self.attempted = attempted
        self.creditor = creditor
        super().__init__(
            f"{actor!r} has no standing to {attempted} commitment {commitment_id}: only the creditor "
            f"({creditor!r}), a delegate the creditor named, or a party the policy allows may do that"
        )


class SchemaTooNew(LedgerError):
    """The database was written by a newer version of the ledger."""


class NotALedger(LedgerError):
    """The file is not a SQLite database, or is one that belongs to something else (nothing was written)."""


class LedgerUnavailable(LedgerError):
    """The file cannot be opened or locked (a directory, no permission, another process holding the lock)."""


class UnreadableCommitment(LedgerError):
    """A stored row that does not read back as a commitment (written by hand, by another tool or an old bug)."""

    def __init__(self, commitment_id: int, problem: str) -> None:
        self.commitment_id = commitment_id
        self.problem = problem
        super().__init__(f"commitment {commitment_id} cannot be read: {problem}")


class ClockWentBack(LedgerError):
    """An event dated before the commitment's latest recorded event: an audit trail only moves forward."""

    def __init__(self, commitment_id: int, at: datetime, latest: datetime) -> None:
        self.commitment_id = commitment_id
        self.at = at
        self.latest = latest
        super().__init__(
            f"commitment {commitment_id}: an event dated {at.isoformat()} is earlier than its latest recorded event "
            f"({latest.isoformat()}); an audit trail is not rewritten, so nothing was written (check the clock, or "
            "--now)"
        )


class ReplayError(LedgerError):
    """An event sequence cannot be replayed (missing creation, wrong order, status mismatch)."""
