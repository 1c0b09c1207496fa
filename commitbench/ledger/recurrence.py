"""Recurrence rules: expanding an RRULE and computing where a bookmark goes next.

Occurrences are expanded as wall-clock times in the duty's timezone (so "every Monday at 09:00"
stays at 09:00 across daylight-saving changes) and returned in UTC.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, SECONDLY, WEEKLY, YEARLY, rrule, rrulestr

from commitbench.ledger.errors import InvalidCommitment

# Catch-up lists at most this many skipped occurrences by value.
SKIPPED_LIST_CAP = 1000
# Catch-up walks at most this many skipped occurrences one by one. Past that it counts them by arithmetic
# when the rule is a plain grid (one occurrence per period), and otherwise states this many as a lower bound.
WALK_LIMIT = 10_000
# No single question to a rule walks more occurrences than this; a rule that needs more is refused as too
# dense (with the jump below, no ordinary rule comes near it).
STEP_BUDGET = 100_000
# A COUNT rule cannot jump (its count runs from the anchor), so its count is bounded instead.
MAX_COUNT = 10_000
# A new duty's first occurrence must come within this many years of its anchor (a rule that never matches,
# such as February 30th, is walked this far and no further).
FIRST_WITHIN_YEARS = 10

_FIXED_PERIOD = {
    SECONDLY: timedelta(seconds=1), MINUTELY: timedelta(minutes=1), HOURLY: timedelta(hours=1),
    DAILY: timedelta(days=1), WEEKLY: timedelta(weeks=1),
}  # fmt: skip
_PLAIN_KEYS = frozenset({"FREQ", "INTERVAL", "UNTIL", "WKST"})
_DAY_KEYS = frozenset({"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY", "BYWEEKDAY", "BYEASTER"})
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_UTC_ZONE = ZoneInfo("UTC")
_UNKNOWN = object()


@dataclass(frozen=True)
class CatchUp:
    """Where the bookmark goes after the live occurrence is closed."""

    next_after_live: datetime | None  # the occurrence right after the one closed
    upcoming: datetime | None  # first occurrence at or after now (None: the rule is exhausted)
    skipped: tuple[datetime, ...]  # occurrences in [next_after_live, now), capped at SKIPPED_LIST_CAP
    skipped_count: int  # exact, or (when skipped_count_exact is False) a lower bound
    skipped_count_exact: bool = True


class Recurrence:
    """A parsed recurrence rule anchored at ``starts_at`` in ``timezone``.

    dateutil answers "the first occurrence after X" by walking every occurrence from the anchor, which
    for a duty that ticks every second since 1900 is billions of steps. Here a question about a moment
    is put to the same rule re-anchored at the start of a period of its grid (the anchor plus a whole
    number of INTERVALs) shortly before that moment. The defaults dateutil takes from the anchor (the
    time of day, the weekday, the day of the month) are written into the re-anchored rule, so it has
    exactly the original's occurrences from that period on; the tests compare the two by walking.
    """

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
            parsed = rrulestr(self.text, dtstart=local_start, cache=False)
        except (ValueError, TypeError, OverflowError) as exc:
            raise InvalidCommitment(f"invalid recurrence rule {rule_text!r}: {exc}") from exc
        if not isinstance(parsed, rrule):
            raise InvalidCommitment(f"recurrence rule {rule_text!r} must be a single RRULE")
        parts = _parts(parsed)
        if parts["_count"] is not None and parts["_count"] > MAX_COUNT:
            raise InvalidCommitment(
                f"recurrence rule {rule_text!r}: COUNT above {MAX_COUNT:,} is not supported; give UNTIL instead"
            )
        if _never_a_valid_date(parsed):
            raise InvalidCommitment(f"recurrence rule {rule_text!r} never occurs: no month has that day")
        self._rule = parsed
        self._start = local_start
        self._freq: int = parts["_freq"]
        self._interval: int = parts["_interval"]
        self._until: datetime | None = parts["_until"]
        self._counted = parts["_count"] is not None
        keys = {part.split("=", 1)[0].strip().upper() for part in self.text.split(";") if part.strip()}
        self._plain = not self._counted and self._freq in _FIXED_PERIOD and keys <= _PLAIN_KEYS
        self._pinned = _pin_defaults(self.text, keys, self._freq, local_start.replace(tzinfo=None))
        self._origin = _grid_origin(self._freq, local_start.replace(tzinfo=None, microsecond=0), parts["_wkst"])
        self._anchored: dict[int, rrule] = {}
        self._first: object = _UNKNOWN

    # -- questions about occurrences

    def first(self) -> datetime | None:
        """The first occurrence (at or after the anchor), if one comes within FIRST_WITHIN_YEARS years."""
        if self._first is _UNKNOWN:
            self._first = self._find_first()
        return self._first  # type: ignore[return-value]

    def _find_first(self) -> datetime | None:
        try:
            bound = self._start + timedelta(days=365 * FIRST_WITHIN_YEARS)
        except OverflowError:
            bound = None
        rule = self._rule
        if bound is not None and (self._until is None or self._until > bound):
            with warnings.catch_warnings():  # dateutil warns when COUNT and UNTIL meet; UNTIL only bounds here
                warnings.simplefilter("ignore")
                rule = self._rule.replace(until=bound)
        return self._utc(_first_matching(rule, self._start, inclusive=True))

    def after(self, moment: datetime, inclusive: bool = False) -> datetime | None:
        rule, _ = self._near(moment)
        return self._utc(_first_matching(rule, moment, inclusive))

    def is_occurrence(self, moment: datetime) -> bool:
        return self.after(moment, inclusive=True) == moment.astimezone(UTC)

    def catch_up(self, live: datetime, now: datetime) -> CatchUp:
        """Close ``live``: the next occurrence, or, if some went by already, the upcoming one.

        The occurrences passed over are walked (listed up to SKIPPED_LIST_CAP, counted up to WALK_LIMIT);
        a longer gap is counted by arithmetic on the grid when the rule is plain, else reported as at
        least WALK_LIMIT.
        """
        following = self.after(live)
        if following is None or following >= now:
            return CatchUp(following, following, (), 0)
        rule, _ = self._near(following)
        skipped: list[datetime] = []
        count = 0
        for occurrence in _budgeted(rule):
            if occurrence < following:
                continue
            if occurrence >= now:
                return CatchUp(following, self._utc(occurrence), tuple(skipped), count)
            if count == WALK_LIMIT:
                break  # more than WALK_LIMIT went by
            count += 1
            if len(skipped) < SKIPPED_LIST_CAP:
                skipped.append(occurrence.astimezone(UTC))
        else:
            return CatchUp(following, None, tuple(skipped), count)  # the rule ran out before now
        upcoming = self.after(now, inclusive=True)
        if not self._plain:
            return CatchUp(following, upcoming, tuple(skipped), count, skipped_count_exact=False)
        last = self._index(upcoming) if upcoming is not None else self._index(self._last()) + 1
        return CatchUp(following, upcoming, tuple(skipped), last - self._index(following))

    # -- the grid

    def _near(self, moment: datetime) -> tuple[rrule, int]:
        """The rule re-anchored at the start of the last grid period that begins safely before ``moment``
        (the original rule when that is its first period), and that period's number."""
        if self._counted:
            return self._rule, 0
        local = moment.astimezone(self.zone).replace(tzinfo=None) - self._wall_clock_slack(moment)
        period = _period_index(self._freq, self._interval, self._origin, local)
        if period <= 0:
            return self._rule, 0
        rule = self._anchored.get(period)
        if rule is None:
            try:
                anchor = _period_start(self._freq, self._interval, self._origin, period).replace(tzinfo=self.zone)
            except (OverflowError, ValueError):
                return self._rule, 0
            anchored = rrulestr(self._pinned, dtstart=anchor, cache=False)
            assert isinstance(anchored, rrule)
            rule = anchored
            if len(self._anchored) > 16:
                self._anchored.clear()
            self._anchored[period] = rule
        return rule, period

    def _wall_clock_slack(self, moment: datetime) -> timedelta:
        """How far wall-clock time near ``moment`` may run behind it (clocks set back, a zone that changed
        its offset), plus an hour: a grid period starting that much earlier holds every occurrence at or
        after ``moment``. Zero in a zone whose offset does not change around ``moment``."""
        if self.zone is _UTC_ZONE:
            return timedelta(0)
        offsets = set()
        for quarter in range(-192, 193):  # every 15 minutes, two days either side
            try:
                offsets.add((moment + timedelta(minutes=15 * quarter)).astimezone(self.zone).utcoffset())
            except OverflowError:
                continue
        known = [offset for offset in offsets if offset is not None]
        if len(known) <= 1:
            return timedelta(0)
        return max(known) - min(known) + timedelta(hours=1)

    def _index(self, occurrence: datetime | None) -> int:
        """The number of the grid period of an occurrence of a plain rule (one occurrence per period)."""
        assert occurrence is not None and self._plain
        rule, period = self._near(occurrence)
        for steps, candidate in enumerate(_budgeted(rule)):
            if candidate == occurrence:
                return period + steps
        raise InvalidCommitment(f"recurrence rule {self.text!r}: {occurrence.isoformat()} is not an occurrence")

    def _last(self) -> datetime:
        """The last occurrence of a plain rule that ends (by UNTIL)."""
        until = self._until
        assert until is not None
        rule, _ = self._near(until)
        last = None
        for occurrence in _budgeted(rule):
            last = occurrence
        if last is None:
            raise InvalidCommitment(f"recurrence rule {self.text!r} has no occurrence before its UNTIL")
        return last

    @staticmethod
    def _utc(value: datetime | None) -> datetime | None:
        return value.astimezone(UTC) if value is not None else None


def _budgeted(rule: Iterable[datetime]) -> Iterator[datetime]:
    """The rule's occurrences, at most STEP_BUDGET of them; dateutil's own complaints become ledger errors."""
    occurrences = iter(rule)
    for steps in itertools.count():
        try:
            occurrence = next(occurrences)
        except StopIteration:
            return
        except (ValueError, OverflowError) as exc:  # e.g. "Invalid combination of interval and byhour"
            raise InvalidCommitment(f"recurrence rule cannot be expanded: {exc}") from exc
        if steps >= STEP_BUDGET:
            raise InvalidCommitment(
                f"recurrence rule is too dense: more than {STEP_BUDGET:,} occurrences in one step of catch-up"
            )
        yield occurrence


def _first_matching(rule: rrule, moment: datetime, inclusive: bool) -> datetime | None:
    for occurrence in _budgeted(rule):
        if occurrence > moment or (inclusive and occurrence == moment):
            return occurrence
    return None


def _parts(rule: rrule) -> dict[str, Any]:
    """The parsed parts of a dateutil rule (frequency, interval, count, until, week start, BY sets). They
    are private attributes; the differential tests walk the rules and would see a change in their meaning."""
    return vars(rule)


_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February as in a leap year


def _never_a_valid_date(rule: rrule) -> bool:
    """February 30th and its kind: months and days of the month that never meet (dateutil would walk every
    day to the year 9999 looking for one)."""
    parts = _parts(rule)
    months = parts["_bymonth"]
    days = [*parts["_bymonthday"], *parts["_bynmonthday"]]
    if not months or not days:
        return False
    return not any(abs(day) <= _DAYS_IN_MONTH[month - 1] for month in months for day in days)


def _pin_defaults(text: str, keys: set[str], freq: int, start: datetime) -> str:
    """The rule with the parts dateutil would take from the anchor written out (see ``rrule.__init__``)."""
    parts = [text]
    if freq < HOURLY and "BYHOUR" not in keys:
        parts.append(f"BYHOUR={start.hour}")
    if freq < MINUTELY and "BYMINUTE" not in keys:
        parts.append(f"BYMINUTE={start.minute}")
    if freq < SECONDLY and "BYSECOND" not in keys:
        parts.append(f"BYSECOND={start.second}")
    if not keys & _DAY_KEYS:
        if freq == YEARLY:
            if "BYMONTH" not in keys:
                parts.append(f"BYMONTH={start.month}")
            parts.append(f"BYMONTHDAY={start.day}")
        elif freq == MONTHLY:
            parts.append(f"BYMONTHDAY={start.day}")
        elif freq == WEEKLY:
            parts.append(f"BYDAY={_WEEKDAYS[start.weekday()]}")
    return ";".join(part.strip(";") for part in parts)


def _grid_origin(freq: int, start: datetime, week_start: int) -> datetime:
    """The start of the grid period that holds the anchor, in wall-clock time."""
    if freq == SECONDLY:
        return start
    if freq == MINUTELY:
        return start.replace(second=0)
    if freq == HOURLY:
        return start.replace(minute=0, second=0)
    midnight = start.replace(hour=0, minute=0, second=0)
    if freq == DAILY:
        return midnight
    if freq == WEEKLY:
        return midnight - timedelta(days=(start.weekday() - week_start) % 7)
    if freq == MONTHLY:
        return midnight.replace(day=1)
    return midnight.replace(month=1, day=1)


def _period_index(freq: int, interval: int, origin: datetime, local: datetime) -> int:
    """The number of the grid period that holds wall-clock time ``local`` (0: the anchor's)."""
    if freq in _FIXED_PERIOD:
        return math.floor((local - origin) / (_FIXED_PERIOD[freq] * interval))
    if freq == MONTHLY:
        return ((local.year - origin.year) * 12 + local.month - origin.month) // interval
    return (local.year - origin.year) // interval


def _period_start(freq: int, interval: int, origin: datetime, period: int) -> datetime:
    if freq in _FIXED_PERIOD:
        return origin + _FIXED_PERIOD[freq] * interval * period
    if freq == MONTHLY:
        month = origin.month - 1 + period * interval
        return origin.replace(year=origin.year + month // 12, month=month % 12 + 1)
    return origin.replace(year=origin.year + period * interval)


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
