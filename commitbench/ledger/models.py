"""Data models of the commitment ledger: what a commitment is, what an audit event records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator


class CommitmentKind(str, Enum):
    """A one-shot promise ends once; a recurring duty re-arms after every occurrence."""

    ONE_SHOT = "one_shot"
    RECURRING = "recurring"


class CommitmentStatus(str, Enum):
    """Lifecycle states. The last four are terminal."""

    UNSCHEDULED = "unscheduled"  # the promise is clear, the date is not
    PENDING = "pending"
    ACKNOWLEDGED = "acknowledged"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETIRED = "retired"  # a recurring duty ended for good by a party with standing


TERMINAL_STATUSES: frozenset[CommitmentStatus] = frozenset(
    {
        CommitmentStatus.COMPLETED,
        CommitmentStatus.FAILED,
        CommitmentStatus.CANCELLED,
        CommitmentStatus.RETIRED,
    }
)
OPEN_STATUSES: frozenset[CommitmentStatus] = frozenset(
    {CommitmentStatus.UNSCHEDULED, CommitmentStatus.PENDING, CommitmentStatus.ACKNOWLEDGED}
)


class Outcome(str, Enum):
    """How the normal close ends a one-shot commitment."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AuditEventKind(str, Enum):
    """What an audit event records."""

    CREATED = "created"
    ACKNOWLEDGED = "acknowledged"
    SCHEDULED = "scheduled"  # an unscheduled promise got its due time
    RESCHEDULED = "rescheduled"  # a scheduled promise got a different due time
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SATISFIED = "satisfied"  # a recurring occurrence was done
    WAIVED = "waived"  # a recurring occurrence was deliberately skipped
    OCCURRENCES_SKIPPED = "occurrences_skipped"  # catch-up over occurrences nobody closed
    RETIRED = "retired"
    DELEGATE_NAMED = "delegate_named"
    STANDING_REFUSED = "standing_refused"  # someone without standing tried to release; no state change
    FIRED = "fired"  # the runtime set the commitment off (its due time came, or its event happened)
    DELIVERED = "delivered"  # the debtor carried the fired commitment out; it is completed


class StandingBasis(str, Enum):
    """Why a party was allowed to release a commitment."""

    CREDITOR = "creditor"
    DELEGATE = "delegate"
    POLICY = "policy"


class DueGroup(str, Enum):
    """Sections of the due list, in the order they are listed."""

    OVERDUE = "overdue"
    DUE_SOON = "due_soon"
    SCHEDULED = "scheduled"
    UNSCHEDULED = "unscheduled"


class OccurrenceOutcome(str, Enum):
    """What closing a recurring occurrence did."""

    ADVANCED = "advanced"
    RETRY_NOOP = "retry_noop"  # the caller closed the occurrence that was already closed


_ZERO = timedelta(0)

# The times a caller may give (due times, recurrence anchors, the clock of the command line). Stored times
# are written in one padded form whatever their year; these bounds keep input to dates a ledger means.
EARLIEST_TIME = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
TIME_RANGE_TEXT = "1900-01-01T00:00:00Z to 2999-12-31T23:59:59Z"


def check_time_range(value: datetime, what: str) -> datetime:
    """``value`` if it lies in the ledger's range, else ValueError naming ``what`` and the range."""
    if not EARLIEST_TIME <= value <= LATEST_TIME:
        raise ValueError(f"{what} {value.isoformat()} is outside the ledger's range ({TIME_RANGE_TEXT})")
    return value


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is UTC:
        return value
    if value.utcoffset() == _ZERO:  # parsed "+00:00"/"Z": relabel, cheaper than a conversion
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _clean_name(value: str, what: str) -> str:
    cleaned = value.strip()
    if not cleaned:
        raise ValueError(f"{what} must not be empty")
    return cleaned


class NewCommitment(BaseModel):
    """What a caller supplies to record a promise."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    debtor: str = Field(description="Who owes the action (the party that promised).")
    creditor: str = Field(description="Who the action is owed to (the party that asked).")
    action: str = Field(description="What was promised, in words.")
    delegates: tuple[str, ...] = Field(
        default=(), description="Parties the creditor named as entitled to release the commitment for them."
    )
    condition: str | None = Field(
        default=None, description="The trigger the action waits for ('when the agenda is final'), if any."
    )
    due_at: AwareDatetime | None = Field(default=None, description="Due time of a one-shot commitment.")
    rrule: str | None = Field(
        default=None, description="RFC 5545 recurrence rule (e.g. FREQ=WEEKLY;BYDAY=MO) of a recurring duty."
    )
    starts_at: AwareDatetime | None = Field(
        default=None, description="Anchor (DTSTART) of the recurrence; required with rrule."
    )
    timezone: str = Field(
        default="UTC", description="IANA zone in which the recurrence's wall-clock times are expanded."
    )
    scope: str = Field(default="default", description="Visibility group (a team, a workspace, one agent).")

    @field_validator("debtor", "creditor", "action", "scope")
    @classmethod
    def _not_empty(cls, value: str, info: Any) -> str:
        return _clean_name(value, info.field_name)

    @field_validator("delegates")
    @classmethod
    def _clean_delegates(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(dict.fromkeys(_clean_name(name, "delegate name") for name in value))
        return cleaned

    @field_validator("due_at", "starts_at")
    @classmethod
    def _to_utc(cls, value: datetime | None, info: Any) -> datetime | None:
        converted = _utc(value)
        return check_time_range(converted, info.field_name) if converted is not None else None

    @model_validator(mode="after")
    def _kind_consistent(self) -> NewCommitment:
        if self.rrule is not None:
            if self.due_at is not None:
                raise ValueError("a recurring commitment takes rrule + starts_at, not due_at")
            if self.starts_at is None:
                raise ValueError("a recurring commitment needs starts_at (the recurrence anchor)")
        elif self.starts_at is not None:
            raise ValueError("starts_at is only meaningful with rrule")
        return self

    @property
    def kind(self) -> CommitmentKind:
        return CommitmentKind.RECURRING if self.rrule is not None else CommitmentKind.ONE_SHOT


class Commitment(BaseModel):
    """A recorded promise and where it stands. Datetimes are always UTC."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int = Field(description="Ledger-assigned identifier.")
    kind: CommitmentKind = Field(description="One-shot or recurring.")
    status: CommitmentStatus = Field(description="Current lifecycle state.")
    debtor: str = Field(description="Who owes the action.")
    creditor: str = Field(description="Who the action is owed to.")
    delegates: tuple[str, ...] = Field(default=(), description="Parties the creditor named to act for them.")
    action: str = Field(description="What was promised.")
    condition: str | None = Field(default=None, description="Trigger the action waits for, if any.")
    due_at: AwareDatetime | None = Field(default=None, description="Due time of a one-shot commitment.")
    rrule: str | None = Field(default=None, description="Recurrence rule of a recurring duty.")
    starts_at: AwareDatetime | None = Field(default=None, description="Recurrence anchor (DTSTART).")
    timezone: str | None = Field(default=None, description="IANA zone of the recurrence's wall-clock times.")
    bookmark: AwareDatetime | None = Field(
        default=None, description="Next due occurrence of a recurring duty; only satisfy and waive move it."
    )
    last_closed: AwareDatetime | None = Field(
        default=None, description="The occurrence most recently satisfied or waived (for retry detection)."
    )
    scope: str = Field(default="default", description="Visibility group.")
    created_at: AwareDatetime = Field(description="When the commitment was recorded.")
    updated_at: AwareDatetime = Field(description="Time of the last state change.")
    version: int = Field(description="Number of state changes so far, counting creation as 1.")

    @field_validator("due_at", "starts_at", "bookmark", "last_closed", "created_at", "updated_at")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES

    @property
    def next_due(self) -> datetime | None:
        """The time the due list sorts by: the due time, or the bookmark of a recurring duty."""
        return self.bookmark if self.kind is CommitmentKind.RECURRING else self.due_at


class AuditEvent(BaseModel):
    """One entry of a commitment's history. State-changing events carry the changed fields."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(description="Global, increasing sequence number.")
    commitment_id: int = Field(description="The commitment this event belongs to.")
    at: AwareDatetime = Field(description="When it happened (from the ledger's clock).")
    actor: str = Field(description="Who caused it.")
    kind: AuditEventKind = Field(description="What happened.")
    reason: str = Field(default="", description="Why, in the actor's words.")
    from_status: CommitmentStatus | None = Field(description="Status before (None for creation).")
    to_status: CommitmentStatus = Field(description="Status after.")
    changes: dict[str, Any] = Field(
        default_factory=dict,
        description="Fields changed by this event, as JSON values (the full record for 'created'; "
        "empty when nothing changed).",
    )
    details: dict[str, Any] = Field(
        default_factory=dict, description="Context that is not state: the occurrence closed, skipped ones, ..."
    )

    @field_validator("at")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return _utc(value)  # type: ignore[return-value]

    @property
    def changes_state(self) -> bool:
        return bool(self.changes)


class DueItem(BaseModel):
    """One line of the due list."""

    model_config = ConfigDict(frozen=True)

    group: DueGroup = Field(description="Which section of the due list it belongs to.")
    due_at: AwareDatetime | None = Field(description="Due time or bookmark; None when unscheduled.")
    commitment: Commitment = Field(description="The commitment itself.")

    @field_validator("due_at")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class CloseResult(BaseModel):
    """Result of satisfying or waiving a recurring occurrence."""

    model_config = ConfigDict(frozen=True)

    outcome: OccurrenceOutcome = Field(description="Advanced, or a harmless retry that changed nothing.")
    closed_occurrence: AwareDatetime = Field(description="The occurrence the caller closed.")
    skipped: tuple[AwareDatetime, ...] = Field(
        default=(), description="Occurrences passed over by catch-up (at most the first 1,000 are listed)."
    )
    skipped_count: int = Field(
        default=0,
        description="How many occurrences catch-up passed over (a lower bound when skipped_count_exact is False).",
    )
    skipped_count_exact: bool = Field(
        default=True,
        description="False when too many went by to walk and the rule is not a plain grid to count by arithmetic.",
    )
    commitment: Commitment = Field(description="The commitment after the call.")


class UnreadableRow(BaseModel):
    """A stored commitment that could not be read back; listings report it instead of failing."""

    model_config = ConfigDict(frozen=True)

    commitment_id: int = Field(description="Id of the row that could not be read.")
    problem: str = Field(description="What is wrong with it.")


RowT = TypeVar("RowT")


class Listing(list[RowT]):
    """The rows of a listing that could be read, in order, and (``unreadable``) the ones that could not."""

    def __init__(self, rows: list[RowT] | tuple[RowT, ...] = (), unreadable: tuple[UnreadableRow, ...] = ()) -> None:
        super().__init__(rows)
        self.unreadable = unreadable
