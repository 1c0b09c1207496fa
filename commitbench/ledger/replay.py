"""Rebuild a commitment from its audit trail alone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from commitbench.ledger.errors import ReplayError
from commitbench.ledger.models import AuditEvent, AuditEventKind, Commitment


def replay(events: Iterable[AuditEvent]) -> Commitment:
    """Fold a commitment's events, oldest first, into the commitment they describe.

    The first event must be ``created`` (it carries the full record); every later event applies
    its ``changes``. Events without changes (standing refusals) leave the state alone. Raises
    :class:`ReplayError` when the sequence is not a consistent history of one commitment.
    """
    current: Commitment | None = None
    last_seq: int | None = None
    for event in events:
        if last_seq is not None and event.seq <= last_seq:
            raise ReplayError(f"event {event.seq} comes after event {last_seq}; events must be in order")
        last_seq = event.seq
        if current is None:
            if event.kind is not AuditEventKind.CREATED:
                raise ReplayError(f"history must start with a 'created' event, got {event.kind.value!r}")
            current = _validate(event.changes, event)
            continue
        if event.kind is AuditEventKind.CREATED:
            raise ReplayError(f"event {event.seq}: a second 'created' event for commitment {current.id}")
        if event.commitment_id != current.id:
            raise ReplayError(
                f"event {event.seq} belongs to commitment {event.commitment_id}, not {current.id}"
            )
        if event.from_status is not current.status:
            raise ReplayError(
                f"event {event.seq} starts from {getattr(event.from_status, 'value', None)}, "
                f"but the commitment is {current.status.value}"
            )
        if event.changes:
            current = _validate({**current.model_dump(mode="json"), **event.changes}, event)
        if current.status is not event.to_status:
            raise ReplayError(
                f"event {event.seq} claims status {event.to_status.value}, replay gives {current.status.value}"
            )
    if current is None:
        raise ReplayError("no events to replay")
    return current


def _validate(data: dict[str, Any], event: AuditEvent) -> Commitment:
    try:
        return Commitment.model_validate(data)
    except ValidationError as exc:
        raise ReplayError(f"event {event.seq} does not describe a valid commitment: {exc}") from exc
