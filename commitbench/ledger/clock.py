"""Clocks for the ledger engine.

The engine never reads the wall clock itself: every operation asks an injected :class:`Clock`.
Tests use :class:`FixedClock` or :class:`ManualClock`; :class:`SystemClock` belongs at the edge
(the command line, a long-running service).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now()`` returning a timezone-aware datetime."""

    def now(self) -> datetime: ...


def require_aware(value: datetime, what: str) -> datetime:
    """Return ``value`` in UTC, or raise ``ValueError`` naming ``what`` if it has no timezone."""
    if not isinstance(value, datetime):
        raise ValueError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"{what} must be timezone-aware (got naive {value.isoformat()})")
    return value.astimezone(UTC)


class SystemClock:
    """The real time, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """Always the same instant."""

    def __init__(self, at: datetime) -> None:
        self._at = require_aware(at, "FixedClock time")

    def now(self) -> datetime:
        return self._at


class ManualClock:
    """A clock a test moves by hand; it never goes backwards unless ``set`` is called."""

    def __init__(self, start: datetime) -> None:
        self._at = require_aware(start, "ManualClock start")

    def now(self) -> datetime:
        return self._at

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError(f"ManualClock.advance needs a non-negative delta, got {delta}")
        self._at = self._at + delta
        return self._at

    def set(self, at: datetime) -> datetime:
        self._at = require_aware(at, "ManualClock time")
        return self._at
