"""The ledger: commitments with a lifecycle, an audit trail and a due list, over one SQLite file.

Every mutating call runs its pure transition (``transitions``) inside one ``BEGIN IMMEDIATE``
transaction: read the row, decide, write the row and its events, commit. Concurrent callers in
other processes queue on the write lock, so compare-and-set on a recurring bookmark is exact.

Times come from the injected clock only; pass :class:`~commitbench.ledger.clock.SystemClock`
at the edge of a program and a fixed or manual clock in tests.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from commitbench.ledger import transitions
from commitbench.ledger.clock import Clock, require_aware
from commitbench.ledger.errors import CommitmentNotFound, InvalidCommitment
from commitbench.ledger.models import (
    AuditEvent,
    CloseResult,
    Commitment,
    CommitmentKind,
    CommitmentStatus,
    DueGroup,
    DueItem,
    Listing,
    NewCommitment,
    Outcome,
    UnreadableRow,
)
from commitbench.ledger.standing import CreditorRule, StandingPolicy
from commitbench.ledger.store import LedgerStore
from commitbench.ledger.transitions import Plan

# Times an occurrence close is planned outside the write lock before it is planned under it.
_PLAN_ATTEMPTS = 3


class Ledger:
    """A commitment ledger stored at ``path`` (``":memory:"`` for a throwaway one).

    ``policy`` may grant release standing beyond the creditor and named delegates. All mutating
    methods take the acting party and a free-text reason, both recorded in the audit trail.
    """

    def __init__(
        self,
        path: str | Path,
        clock: Clock,
        policy: StandingPolicy | None = None,
        busy_timeout_ms: int = 10_000,
        init_existing: bool = False,
        create: bool = True,
    ) -> None:
        if not isinstance(clock, Clock):
            raise TypeError(f"clock must provide now() -> datetime, got {type(clock).__name__}")
        self.clock = clock
        self.policy: StandingPolicy = policy if policy is not None else CreditorRule()
        self.store = LedgerStore(
            path, now=self._now, busy_timeout_ms=busy_timeout_ms, init_existing=init_existing, create=create
        )

    # -- lifecycle of the object

    def close(self) -> None:
        """Close the database connection (not a commitment: see :meth:`close_commitment`)."""
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- writes

    def add(
        self, new: NewCommitment, actor: str, reason: str = "", details: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> Commitment:
        """Record a new commitment. Status: pending if it has a due time, rule or condition, else unscheduled.

        ``details`` (JSON values) go into the 'created' event: where the commitment came from, say.
        ``key`` makes the add idempotent: a second add with the same key writes nothing and returns the
        commitment the first one added (as it stands now), so a caller that retries records a promise once.
        """
        if not isinstance(new, NewCommitment):
            raise TypeError(f"add() takes a NewCommitment, got {type(new).__name__}")
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise InvalidCommitment("an idempotency key must be a non-empty string")
        transitions.first_occurrence(new)  # the slow part of creating a duty, outside the write lock
        with self.store.write():
            existing = self.store.keyed(key) if key is not None else None
            if existing is not None:
                found = self.store.get(existing)
                if found is None:
                    raise CommitmentNotFound(existing)
                return found
            plan = transitions.create(new, self.store.next_id(), actor, reason, self._now(), details)
            self.store.insert(plan.after)
            self.store.append(plan.after.id, plan.events)
            if key is not None:
                self.store.remember_key(key, plan.after.id)
        return plan.after

    def add_many(self, items: Iterable[NewCommitment], actor: str, reason: str = "") -> list[Commitment]:
        """Record many commitments in one transaction (an import): all of them, or none on error."""
        added: list[Commitment] = []
        items = builtins.list(items)
        for new in items:
            if isinstance(new, NewCommitment):
                transitions.first_occurrence(new)  # outside the write lock, as in add()
        with self.store.write():
            next_id = self.store.next_id()
            now = self._now()
            for new in items:
                if not isinstance(new, NewCommitment):
                    raise TypeError(f"add_many() takes NewCommitment items, got {type(new).__name__}")
                plan = transitions.create(new, next_id, actor, reason, now)
                self.store.insert(plan.after)
                self.store.append(plan.after.id, plan.events)
                added.append(plan.after)
                next_id += 1
        return added

    def acknowledge(self, commitment_id: int, actor: str, reason: str = "") -> Commitment:
        """pending -> acknowledged: the party that owes the action has picked it up."""
        return self._run(commitment_id, lambda c, now: transitions.acknowledge(c, actor, reason, now)).after

    def schedule(self, commitment_id: int, due_at: datetime, actor: str, reason: str = "") -> Commitment:
        """Set (unscheduled -> pending) or move the due time of a one-shot commitment."""
        return self._run(
            commitment_id, lambda c, now: transitions.schedule(c, due_at, actor, reason, now)
        ).after

    def close_commitment(self, commitment_id: int, outcome: Outcome, actor: str, reason: str = "") -> Commitment:
        """The normal close of a one-shot commitment. Refuses recurring duties; cancelling needs standing."""
        outcome = Outcome(outcome)
        return self._run(
            commitment_id, lambda c, now: transitions.close(c, outcome, actor, reason, now, self.policy)
        ).after

    def complete(self, commitment_id: int, actor: str, reason: str = "") -> Commitment:
        return self.close_commitment(commitment_id, Outcome.COMPLETED, actor, reason)

    def fail(self, commitment_id: int, actor: str, reason: str = "") -> Commitment:
        return self.close_commitment(commitment_id, Outcome.FAILED, actor, reason)

    def release(self, commitment_id: int, actor: str, reason: str = "") -> Commitment:
        """Cancel on behalf of a party with standing; others get StandingRefused (also recorded)."""
        return self._run(
            commitment_id, lambda c, now: transitions.release(c, actor, reason, now, self.policy)
        ).after

    def retire(self, commitment_id: int, actor: str, reason: str = "") -> Commitment:
        """End a recurring duty for good (party with standing only)."""
        return self._run(
            commitment_id, lambda c, now: transitions.retire(c, actor, reason, now, self.policy)
        ).after

    def fire(
        self, commitment_id: int, actor: str, reason: str = "", details: dict[str, Any] | None = None
    ) -> Commitment:
        """Record that the runtime set the commitment off (its due time came, or its event happened).

        The state does not change; the 'fired' event holds the due time and ``details`` (JSON values).
        """
        return self._run(commitment_id, lambda c, now: transitions.fire(c, actor, reason, now, details)).after

    def deliver(
        self, commitment_id: int, actor: str, reason: str = "", details: dict[str, Any] | None = None
    ) -> Commitment:
        """pending | acknowledged -> completed, recorded as 'delivered' with ``details`` (what was delivered)."""
        return self._run(commitment_id, lambda c, now: transitions.deliver(c, actor, reason, now, details)).after

    def name_delegate(self, commitment_id: int, delegate: str, actor: str, reason: str = "") -> Commitment:
        """The creditor names a party who may release on their behalf."""
        return self._run(
            commitment_id, lambda c, now: transitions.name_delegate(c, delegate, actor, reason, now)
        ).after

    def satisfy(self, commitment_id: int, expected_due_at: datetime, actor: str, reason: str = "") -> CloseResult:
        """Close the live occurrence as done (compare-and-set on ``expected_due_at``)."""
        return self._close_occurrence(commitment_id, expected_due_at, False, actor, reason)

    def waive(self, commitment_id: int, expected_due_at: datetime, actor: str, reason: str = "") -> CloseResult:
        """Close the live occurrence as deliberately skipped (compare-and-set on ``expected_due_at``)."""
        return self._close_occurrence(commitment_id, expected_due_at, True, actor, reason)

    # -- reads

    def get(self, commitment_id: int) -> Commitment:
        found = self.store.get(commitment_id)
        if found is None:
            raise CommitmentNotFound(commitment_id)
        return found

    def history(self, commitment_id: int) -> list[AuditEvent]:
        """Every event of the commitment, oldest first."""
        events = self.store.history(commitment_id)
        if not events:
            raise CommitmentNotFound(commitment_id)
        return events

    def list(
        self,
        *,
        status: CommitmentStatus | list[CommitmentStatus] | None = None,
        kind: CommitmentKind | None = None,
        debtor: str | None = None,
        creditor: str | None = None,
        scope: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> Listing[Commitment]:
        """Commitments in id order, optionally filtered; rows that cannot be read are in ``.unreadable``."""
        if limit is not None and limit < 0:
            raise InvalidCommitment(f"limit must not be negative, got {limit}")
        if offset < 0:
            raise InvalidCommitment(f"offset must not be negative, got {offset}")
        statuses = [status] if isinstance(status, CommitmentStatus) else status
        return self.store.select(
            statuses=statuses, kind=kind, debtor=debtor, creditor=creditor, scope=scope, limit=limit, offset=offset
        )

    def due(
        self,
        soon: timedelta = timedelta(hours=24),
        *,
        limit: int | None = None,
        debtor: str | None = None,
        creditor: str | None = None,
        scope: str | None = None,
    ) -> Listing[DueItem]:
        """Open commitments: overdue, then due within ``soon``, then later, then unscheduled.

        Within each group: earliest due first, ties by id; unscheduled ones by id. ``limit`` caps
        the whole list (groups are filled in order). Rows that cannot be read are in ``.unreadable``.
        """
        if soon < timedelta(0):
            raise InvalidCommitment(f"the due-soon window must not be negative, got {soon}")
        if limit is not None and limit < 0:
            raise InvalidCommitment(f"limit must not be negative, got {limit}")
        now = self._now()
        try:
            horizon: datetime | None = now + soon
        except OverflowError:  # the window reaches past the last representable time: everything later is soon
            horizon = None
        bounds: tuple[tuple[DueGroup, datetime | None, datetime | None], ...] = (
            (DueGroup.OVERDUE, None, now),
            (DueGroup.DUE_SOON, now, horizon),
            (DueGroup.SCHEDULED, horizon, None),
            (DueGroup.UNSCHEDULED, None, None),
        )
        items: list[DueItem] = []
        unreadable: list[UnreadableRow] = []
        filters = {"debtor": debtor, "creditor": creditor, "scope": scope}
        with self.store.snapshot():
            for group, lower, upper in bounds:
                remaining = None if limit is None else limit - len(items)
                if remaining == 0:
                    break
                if group is DueGroup.SCHEDULED and upper is None and lower is None:
                    continue  # no horizon: the due-soon group already holds everything after now
                found = self.store.due_items(group, lower, upper, group is DueGroup.UNSCHEDULED, remaining, **filters)
                items.extend(found)
                unreadable.extend(found.unreadable)
        return Listing(items, tuple(unreadable))

    # -- internals

    def _now(self) -> datetime:
        return require_aware(self.clock.now(), "clock.now()")

    def _run(self, commitment_id: int, planner: Callable[[Commitment, datetime], Plan]) -> Plan:
        with self.store.write():
            before = self.store.get(commitment_id)
            if before is None:
                raise CommitmentNotFound(commitment_id)
            plan = planner(before, self._now())
            self._write(before, plan)
        if plan.error is not None:
            raise plan.error
        return plan

    def _write(self, before: Commitment, plan: Plan) -> None:
        """Store a plan made from ``before`` (inside a write transaction)."""
        if plan.after.version != before.version:
            self.store.update(plan.after, before.version)
        if plan.events:
            self.store.append(before.id, plan.events)

    def _close_occurrence(
        self, commitment_id: int, expected: datetime, waive: bool, actor: str, reason: str
    ) -> CloseResult:
        # Catch-up may walk thousands of occurrences: plan it from a read, outside the write lock, and
        # write it under the lock only if the row is still the one it was planned from; another writer
        # in between means planning again from the newer row.
        for _ in range(_PLAN_ATTEMPTS):
            before = self.get(commitment_id)
            plan = transitions.close_occurrence(before, expected, waive, actor, reason, self._now())
            with self.store.write():
                current = self.store.get(commitment_id)
                if current is None:
                    raise CommitmentNotFound(commitment_id)
                if current.version == before.version:
                    self._write(before, plan)
                    assert plan.result is not None
                    return plan.result
        plan = self._run(
            commitment_id,
            lambda c, now: transitions.close_occurrence(c, expected, waive, actor, reason, now),
        )
        assert plan.result is not None
        return plan.result
