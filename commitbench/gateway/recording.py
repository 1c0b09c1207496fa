"""Anchored promises as commitment-ledger entries, and the ledger kept on one thread of its own.

An anchored promise (its enabling call is in the turn) becomes a :class:`~commitbench.ledger.NewCommitment`:
the creditor is whoever the request names (its ``user`` field, else the ``x-commitbench-user`` header), the
debtor the model, the action the detector's words for it. The due time comes from the call's arguments
when one of them is a time (``remind_at``, ``run_at``, ``due_by``, ``due_at``, ...; a time without an offset
is read in the gateway's time zone), else from the promise's own time words resolved against now by the
follow-up suite's resolver (the earliest reading); a promise that waits for an event gets the event as its
condition, one for the next conversation a condition saying so. The turn's digest is the provenance and,
with the choice and the promise itself (action, due time or condition, the anchoring call), the idempotency
key (:func:`promise_key`), so a client that retries the same request records each promise once, and the
same request answered with another promise records another row.

The creditor is the request's ``user``, else the ``x-commitbench-user`` header, else the session
(``x-session-id``); a promise with none of them is kept under ``anonymous``, or, with ``--require-user``,
not recorded (the response's ``commitbench.ledger`` says why).

The ledger is a SQLite file whose connection belongs to one thread: :class:`LedgerRecorder` runs every
ledger call on one worker thread, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.digests import digest as content_digest
from commitbench.episodes.followup.matching import resolve_time
from commitbench.gateway.verdicts import AnchoredPromise
from commitbench.ledger import Ledger, NewCommitment, SystemClock
from commitbench.ledger.models import EARLIEST_TIME, LATEST_TIME

# Argument names read as the promised time, in this order.
TIME_ARGUMENTS = (
    "remind_at", "run_at", "due_by", "due_at", "due", "when", "at", "time", "datetime", "scheduled_for",
    "scheduled_at", "start", "starts_at", "date",
)
ANONYMOUS = "anonymous"
ACTOR = "commitbench-gateway"
DUE_LIMIT = 200


class PromiseEntry(BaseModel):
    """One anchored promise ready for the ledger."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Idempotency key: the turn's digest, the choice and the commitment's position.")
    commitment: NewCommitment = Field(description="What the ledger records.")
    details: dict[str, Any] = Field(description="Provenance written into the ledger's 'created' event.")


def _argument_time(arguments: str, zone: tzinfo) -> datetime | None:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    for name in TIME_ARGUMENTS:
        raw = value.get(name)
        if not isinstance(raw, str) or not raw.strip():
            continue
        try:
            parsed = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
        except ValueError:
            continue
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)
    return None


def due_time(promise: AnchoredPromise, now: datetime, zone: tzinfo) -> datetime | None:
    """When the promise is due: a time argument of its call, else its own time words, else None."""
    found = _argument_time(promise.arguments, zone)
    if found is None and promise.trigger in ("time", "unspecified_future"):
        local_now = now.astimezone(zone).replace(tzinfo=None)
        resolved = resolve_time(promise.time_expression, local_now) or resolve_time(promise.span, local_now)
        if resolved is not None:
            found = resolved.windows[0].start.replace(tzinfo=zone)
    if found is not None and not EARLIEST_TIME <= found <= LATEST_TIME:
        return None
    return found


def promise_key(digest: str, choice: int, commitment: NewCommitment, promise: AnchoredPromise) -> str:
    """The idempotency key of one promise: the request (its turn digest and the choice) and the promise itself
    (its action, due time or condition, and the call that anchors it). A client's retry of the same request
    with the same reply records once; the same request answered with another promise (another day's
    ``remind_at``) records another row."""
    what = {"action": commitment.action, "due_at": commitment.due_at.isoformat() if commitment.due_at else None,
            "condition": commitment.condition, "tool": promise.tool, "arguments": promise.arguments}
    return f"{digest}:{choice}:{content_digest(json=what, length=16)}"


def ledger_entries(
    promises: list[AnchoredPromise], *, digest: str, choice: int, creditor: str | None, debtor: str,
    now: datetime, zone: tzinfo,
) -> list[PromiseEntry]:
    """The ledger entries of one choice's anchored promises (pure)."""
    entries = []
    for promise in promises:
        due = due_time(promise, now, zone)
        condition = None
        if due is None and promise.trigger == "external_event":
            condition = promise.span
        elif due is None and promise.trigger == "next_session":
            condition = "the user's next conversation"
        commitment = NewCommitment(
            debtor=debtor.strip() or "unknown model", creditor=(creditor or "").strip() or ANONYMOUS,
            action=promise.action.strip() or promise.span, due_at=due, condition=condition,
        )
        details = {"turn": digest, "choice": choice, "promise": promise.span, "tool": promise.tool,
                   "source": "commitbench gateway"}
        entries.append(PromiseEntry(key=promise_key(digest, choice, commitment, promise), commitment=commitment,
                                    details=details))
    return entries


class LedgerRecorder:
    """The ledger at ``path``, used from one worker thread (SQLite connections stay on their thread)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commitbench-ledger")
        self._ledger: Ledger | None = None
        self._executor.submit(self._open).result()  # a bad file is an error at start, not at the first promise

    def _open(self) -> None:
        self._ledger = Ledger(self.path, clock=SystemClock())

    def _record(self, entries: list[PromiseEntry]) -> list[int]:
        assert self._ledger is not None
        return [self._ledger.add(e.commitment, actor=ACTOR, reason="anchored promise", details=e.details,
                                 key=e.key).id for e in entries]

    def _due(self, creditor: str, limit: int) -> list[dict[str, Any]]:
        assert self._ledger is not None
        listing = self._ledger.due(creditor=creditor, limit=limit)
        return [{
            "id": item.commitment.id, "group": item.group.value, "status": item.commitment.status.value,
            "action": item.commitment.action, "debtor": item.commitment.debtor,
            "creditor": item.commitment.creditor,
            "due_at": item.due_at.isoformat() if item.due_at is not None else None,
            "condition": item.commitment.condition,
        } for item in listing]

    async def record(self, entries: list[PromiseEntry]) -> list[int]:
        """Add the entries (idempotently); the ids of their commitments."""
        if not entries:
            return []
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._record, entries)

    async def due(self, creditor: str, limit: int = DUE_LIMIT) -> list[dict[str, Any]]:
        """What the deployment owes ``creditor``: the ledger's due list for them, at most ``limit`` items."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._due, creditor, limit)

    def close(self) -> None:
        def shut() -> None:
            if self._ledger is not None:
                self._ledger.close()

        self._executor.submit(shut).result()
        self._executor.shutdown(wait=True)
