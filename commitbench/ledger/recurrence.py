"""Recurrence rules: expanding an RRULE and computing where a bookmark goes next.

Occurrences are expanded as wall-clock times in the duty's timezone (so "every Monday at 09:00"
stays at 09:00 across daylight-saving changes) and returned in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule, rrulestr

from commitbench.ledger.errors import InvalidCommitment

# Catch-up lists at most this many skipped occurrences by value; it always counts all of them.
SKIPPED_LIST_CAP = 1000


@dataclass(frozen=True)
class CatchUp:
    """Where the bookmark goes after the live occurrence is closed."""

    next_after_live: datetime | None  # the occurrence right after the one closed
    upcoming: datetime | None  # first occurrence at or after now (None: the rule is exhausted)
    skipped: tuple[datetime, ...]  # occurrences in [next_after_live, now), capped at SKIPPED_LIST_CAP
    skipped_count: int


class Recurrence:
    """A parsed recurrence rule anchored at ``starts_at`` in ``timezone``."""

    def __init__(self, rule_text: str, starts_at: datetime, timezone: str = "UTC") -> None:
        self.text = normalize_rule(rule_text)
        try:
            self.zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InvalidCommitment(f"unknown timezone {timezone!r}") from exc
        if starts_at.tzinfo is None:
            raise InvalidCommitment("recurrence anchor starts_at must be timezone-aware")
        local_start = starts_at.astimezone(self.zone)
        try:
            parsed = rrulestr(self.text, dtstart=local_start, cache=True)
        except (ValueError, TypeError) as exc:
            raise InvalidCommitment(f"invalid recurrence rule {rule_text!r}: {exc}") from exc
        if not isinstance(parsed, rrule):
            raise InvalidCommitment(f"recurrence rule {rule_text!r} must be a single RRULE")
        self._rule = parsed
        self._start = local_start

    def first(self) -> datetime | None:
        """The first occurrence (at or after the anchor)."""
        return self._utc(self._rule.after(self._start, inc=True))

    def after(self, moment: datetime, inclusive: bool = False) -> datetime | None:
        return self._utc(self._rule.after(moment.astimezone(UTC), inc=inclusive))

    def is_occurrence(self, moment: datetime) -> bool:
        return self.after(moment, inclusive=True) == moment.astimezone(UTC)

    def catch_up(self, live: datetime, now: datetime) -> CatchUp:
        """Close ``live``: the next occurrence, or, if some went by already, the upcoming one."""
        following = self.after(live)
        if following is None or following >= now:
            return CatchUp(following, following, (), 0)
        skipped: list[datetime] = []
        count = 0
        upcoming: datetime | None = None
        for occurrence in self._rule.xafter(following.astimezone(UTC), inc=True):
            occurrence_utc = occurrence.astimezone(UTC)
            if occurrence_utc >= now:
                upcoming = occurrence_utc
                break
            count += 1
            if len(skipped) < SKIPPED_LIST_CAP:
                skipped.append(occurrence_utc)
        return CatchUp(following, upcoming, tuple(skipped), count)

    @staticmethod
    def _utc(value: datetime | None) -> datetime | None:
        return value.astimezone(UTC) if value is not None else None


def normalize_rule(rule_text: str) -> str:
    """Trim an RRULE and drop an optional ``RRULE:`` prefix; reject multi-line rule sets."""
    if not isinstance(rule_text, str) or not rule_text.strip():
        raise InvalidCommitment("recurrence rule must be a non-empty string such as FREQ=WEEKLY;BYDAY=MO")
    text = rule_text.strip()
    if "\n" in text or "\r" in text:
        raise InvalidCommitment("recurrence rule must be one RRULE line (no DTSTART, EXDATE or RDATE lines)")
    if text.upper().startswith("RRULE:"):
        text = text[len("RRULE:") :]
    if "DTSTART" in text.upper():
        raise InvalidCommitment("give the recurrence anchor as starts_at, not as DTSTART inside the rule")
    if "FREQ=" not in text.upper():
        raise InvalidCommitment(f"recurrence rule {rule_text!r} has no FREQ= part")
    return text


@lru_cache(maxsize=4096)
def recurrence_for(rule_text: str, starts_at: datetime, timezone: str) -> Recurrence:
    """A cached :class:`Recurrence` (rules are immutable once parsed)."""
    return Recurrence(rule_text, starts_at, timezone)
