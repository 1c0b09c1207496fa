"""Pure matchers of the follow-through mode: when a time expression points, and whether two texts share content.

Both are deterministic and small on purpose. The environment uses them to decide whether a task that
waits for an event is the one the episode's scripted event sets off; the checker uses them to decide
whether a tool call's arguments carry a promise (argument-level anchoring) and whether a delivery
carries what was promised.

**Times.** :func:`resolve_time` reads an English time expression ("tomorrow at 9 am", "this evening",
"in half an hour", "next Monday", "on the 15th", "every Sunday at 11") against the episode's fixed
current time and returns the moments it may mean, as :class:`TimeWindow` s in the user's local wall-clock
time (naive datetimes; the user's time zone is the suite's ``time_zone``). An ambiguous expression gives
every reading ("at 7" is 7:00 and 19:00; "next Monday" is the coming Monday and the one after; a
recurring "every Monday" is its first occurrence). Readings wholly in the past are dropped. An
expression that names no time (or only a time relative to something unknown, "an hour before my
meeting") gives ``None``: nothing can be checked against it. :func:`time_fits` applies the tolerance:

* an exact moment T (a clock time, or "in 30 minutes") is met anywhere from ``EARLY_SLACK`` before it
  (a reminder often comes a little ahead of what it is about) to ``LATE_SLACK`` after it;
* a span (a part of the day, a whole day, a week) is met anywhere inside it, with ``LATE_SLACK`` on
  either side.

**Content.** :func:`content_words` turns a text into normalised content words: lower case, possessive
``'s`` dropped, a light suffix stemmer (``meetings``, ``meeting`` -> ``meet``), a handful of synonyms
folded (``mum``, ``mom`` -> ``mother``), and stop words left out: function words, time words, and the
generic verbs of any follow-up ("remind", "notify", "send", "call", "check" ...), which say *that*
something happens, not *what*. :func:`content_match` says whether a delivered or scheduled text carries
a promise: it must share at least a third of the promise's content words (at least one). A promise with
no content word left (for example "I'll remind you tomorrow") constrains nothing.

Every regular expression here has no nested quantifiers, so each runs in linear time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time, timedelta
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.calendar_words import MONTHS, WEEKDAYS

EARLY_SLACK = timedelta(minutes=60)
LATE_SLACK = timedelta(minutes=15)
# A bound on the text a matcher reads (tool arguments and replies are bounded elsewhere too).
MAX_TEXT = 4_000
# A bound on the days a reading is carried over to (a request's "next month" touches 31).
MAX_DAYS = 31

_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
    "forty-five": 45, "sixty": 60, "ninety": 90, "a few": 3, "a couple of": 2, "couple of": 2,
}
_UNITS = {"minute": timedelta(minutes=1), "min": timedelta(minutes=1), "hour": timedelta(hours=1),
          "hr": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}
# Parts of the day: (start hour, end hour), end exclusive; 24 is midnight at the end of the day.
PARTS_OF_DAY: dict[str, tuple[int, int]] = {
    "morning": (6, 12), "afternoon": (12, 18), "evening": (17, 22), "night": (18, 24), "tonight": (18, 24),
    "lunchtime": (12, 14), "lunch": (12, 14),
}


class TimeWindow(BaseModel):
    """One reading of a time expression: the moments from ``start`` to ``end`` (local wall-clock time)."""

    model_config = ConfigDict(frozen=True)

    start: datetime = Field(description="Earliest moment (local time, no zone).")
    end: datetime = Field(description="Latest moment; equal to start for an exact moment.")

    @property
    def exact(self) -> bool:
        return self.start == self.end

    def describe(self) -> str:
        if self.exact:
            return self.start.isoformat(timespec="minutes")
        return f"{self.start.isoformat(timespec='minutes')}..{self.end.isoformat(timespec='minutes')}"


class ResolvedTime(BaseModel):
    """What a time expression may mean: every reading of it."""

    model_config = ConfigDict(frozen=True)

    expression: str = Field(description="The text read.")
    windows: list[TimeWindow] = Field(description="Its readings, earliest first (never empty).")

    def describe(self) -> str:
        return " or ".join(w.describe() for w in self.windows)


# --------------------------------------------------------------------------------------- time parts
_NUM = (r"(\d{1,2}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
        r"forty-five|forty|sixty|ninety|a few|a couple of|couple of)")
_RELATIVE = re.compile(
    r"\b(?:in|after|within) (?:the next )?(half an? hour|" + _NUM + r" (minute|min|hour|hr|day|week)s?)\b"
    r"|\b(half an? hour|" + _NUM + r" (minute|min|hour|hr)s?) from now\b"
)
_WITHIN_THE = re.compile(r"\bwithin the (hour|day|week)\b")
_CLOCK = re.compile(
    r"\b(?:(at|by|before|after|from|around|about|until|till) )?(\d{1,2})(?::(\d\d))?"
    r"(?![\d:]|[.,]\d| ?(?:%|kilos?|kg|km|k\b|degrees?|euros?|dollars?|pounds?|minutes?|mins?|hours?|hrs?|days?"
    r"|weeks?|years?|months?|people|guests|subjects|kids|children|times|st\b|nd\b|rd\b|th\b|of\b))"
    r"(?: ?(am|pm|a\.m\.|p\.m\.|o'clock))?"
)
_WORD_CLOCK = re.compile(
    r"\b(at|by|before|after|around|about|until|till) (one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve)(?: (o'clock|am|pm))?\b"
)
_NOON = re.compile(r"\b(?:(at|by|before|after|around|until|till) )?\b(noon|midday|midnight)\b")
_PART = re.compile(r"\b(this |tomorrow |in the |every |friday |saturday |sunday |monday |tuesday |wednesday |"
                   r"thursday )?(morning|afternoon|evening|night|tonight|lunchtime|lunch)\b")
_BOUND_WORD = {"by": "by", "before": "by", "until": "by", "till": "by", "after": "after", "from": "after"}
_WORD_HOURS = {w: i for i, w in enumerate(("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                            "ten", "eleven", "twelve"), start=1)}


def _amount(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]


def _relative(text: str, now: datetime) -> list[TimeWindow]:
    found: list[TimeWindow] = []
    for match in _RELATIVE.finditer(text):
        phrase = match.group(1) or match.group(4)
        if phrase.startswith("half"):
            delta = timedelta(minutes=30)
        else:
            amount = match.group(2) or match.group(5)
            unit = match.group(3) or match.group(6)
            delta = _amount(amount) * _UNITS[unit]
        moment = now + delta
        if match.group(0).startswith("within"):
            found.append(TimeWindow(start=now, end=moment))
        elif delta >= timedelta(days=1):
            day = moment.date()
            found.append(TimeWindow(start=datetime.combine(day, time()), end=_day_end(day)))
        else:
            found.append(TimeWindow(start=moment, end=moment))
    for match in _WITHIN_THE.finditer(text):
        found.append(TimeWindow(start=now, end=now + _UNITS[match.group(1)]))
    return found


def _day_end(day: date) -> datetime:
    return datetime.combine(day, time(23, 59))


class _TimeOfDay(BaseModel):
    """A time of day as read: candidate clock times, or a span of hours, and a bound (by/after) if any."""

    clocks: list[time] = Field(default_factory=list)
    span: tuple[int, int] | None = None
    bound: str = ""


def _clock_times(text: str) -> list[_TimeOfDay]:
    found: list[_TimeOfDay] = []
    for match in _CLOCK.finditer(text):
        lead, hour_text, minute_text, suffix = match.groups()
        if not lead and not suffix and not minute_text:
            continue  # a bare number is not a time
        hour, minute = int(hour_text), int(minute_text or 0)
        if hour > 23 or minute > 59:
            continue
        suffix = (suffix or "").replace(".", "")
        if suffix == "pm" and hour < 12:
            candidates = [time(hour + 12, minute)]
        elif suffix == "am":
            candidates = [time(0 if hour == 12 else hour, minute)]
        elif hour > 12 or hour == 0:
            candidates = [time(hour, minute)]
        else:  # "at 7", "7 o'clock", "7:30": morning or evening
            candidates = [time(hour % 12, minute), time(hour % 12 + 12, minute)] if hour != 12 else [time(12, minute)]
        found.append(_TimeOfDay(clocks=candidates, bound=_BOUND_WORD.get(lead or "", "")))
    for match in _WORD_CLOCK.finditer(text):
        lead, word, suffix = match.groups()
        hour = _WORD_HOURS[word]
        if suffix == "pm" and hour < 12:
            candidates = [time(hour + 12)]
        elif suffix == "am":
            candidates = [time(hour % 12)]
        else:
            candidates = [time(hour % 12), time(hour % 12 + 12)] if hour != 12 else [time(12)]
        found.append(_TimeOfDay(clocks=candidates, bound=_BOUND_WORD.get(lead or "", "")))
    for match in _NOON.finditer(text):
        lead, word = match.groups()
        moment = time(0) if word == "midnight" else time(12)
        found.append(_TimeOfDay(clocks=[moment], bound=_BOUND_WORD.get(lead or "", "")))
    return found


def _part_of_day(text: str) -> _TimeOfDay | None:
    match = _PART.search(text)
    if match is None:
        return None
    return _TimeOfDay(span=PARTS_OF_DAY[match.group(2)])


# --------------------------------------------------------------------------------------- date parts
_TODAY = re.compile(r"\b(today|tonight|this (?:morning|afternoon|evening)|later today|later on|end of (?:the )?day)\b")
_DAY_AFTER = re.compile(r"\b(?:the )?day after tomorrow\b")
_TOMORROW = re.compile(r"\btomorrow\b")
_WEEKDAY = re.compile(
    r"\b(?:(this|next|on|every|every other|by|until|before|after) )?(" + "|".join(WEEKDAYS) + r")s?\b"
)
_THIS_WEEKEND = re.compile(r"\b(this|next|the|over the) weekend\b")
_NEXT_WEEK = re.compile(r"\bnext week\b")
_END_OF_WEEK = re.compile(r"\b(by )?(?:the )?end of (?:the |this )?week\b")
_NEXT_MONTH = re.compile(r"\bnext month\b")
_DAY_OF_MONTH = re.compile(r"\b(?:on |by )?the (\d{1,2})(?:st|nd|rd|th)\b(?! of)")
_DATE_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)? (?:of )?(" + "|".join(MONTHS) + r")\b")
_DATE_MONTH_DAY = re.compile(r"\b(" + "|".join(MONTHS) + r") (\d{1,2})(?:st|nd|rd|th)?\b")
_EVERY_DAY = re.compile(r"\b(every (?:day|morning|evening|night|afternoon)|daily)\b")


def _next_date(month: int, day: int, today: date) -> date | None:
    for year in (today.year, today.year + 1):
        try:
            candidate = date(year, month, day)
        except ValueError:
            return None
        if candidate >= today:
            return candidate
    return None


def _dates(text: str, today: date) -> tuple[list[date], list[tuple[date, date]]]:
    """Days the text names, and spans of days (weekends, weeks, months)."""
    days: list[date] = []
    spans: list[tuple[date, date]] = []
    if _TODAY.search(text):
        days.append(today)
    if _DAY_AFTER.search(text):
        days.append(today + timedelta(days=2))
    elif _TOMORROW.search(text):
        days.append(today + timedelta(days=1))
    for match in _WEEKDAY.finditer(text):
        lead, name = match.group(1) or "", match.group(2)
        ahead = (WEEKDAYS.index(name) - today.weekday()) % 7
        if lead == "next":
            first = today + timedelta(days=ahead or 7)
            days.extend([first, first + timedelta(days=7)] if ahead else [first])
        elif lead in ("every", "every other", "") and ahead == 0:
            days.extend([today, today + timedelta(days=7)])
        elif lead in ("by", "until", "before"):
            spans.append((today, today + timedelta(days=ahead or 7)))
        else:
            days.append(today + timedelta(days=ahead or 7))
    if _THIS_WEEKEND.search(text):
        saturday = today + timedelta(days=(5 - today.weekday()) % 7)
        spans.append((saturday, saturday + timedelta(days=1)))
    if _NEXT_WEEK.search(text):
        monday = today + timedelta(days=7 - today.weekday())
        spans.append((monday, monday + timedelta(days=6)))
    end_of_week = _END_OF_WEEK.search(text)
    if end_of_week:
        friday = today + timedelta(days=(4 - today.weekday()) % 7)
        spans.append((today if end_of_week.group(1) else friday, friday + timedelta(days=2)))
    if _NEXT_MONTH.search(text):
        first = date(today.year + today.month // 12, today.month % 12 + 1, 1)
        last = date(first.year + first.month // 12, first.month % 12 + 1, 1) - timedelta(days=1)
        spans.append((first, last))
    for match in _DATE_DAY_MONTH.finditer(text):
        found = _next_date(MONTHS.index(match.group(2)) + 1, int(match.group(1)), today)
        if found is not None:
            days.append(found)
    for match in _DATE_MONTH_DAY.finditer(text):
        found = _next_date(MONTHS.index(match.group(1)) + 1, int(match.group(2)), today)
        if found is not None:
            days.append(found)
    for match in _DAY_OF_MONTH.finditer(text):
        day = int(match.group(1))
        month = today.month if day >= today.day else today.month % 12 + 1
        found = _next_date(month, day, today)
        if found is not None:
            days.append(found)
    if _EVERY_DAY.search(text):
        days.extend([today, today + timedelta(days=1)])
    return sorted(set(days)), sorted(set(spans))


# --------------------------------------------------------------------------------------- resolving
def _windows_on(day: date, parts: Sequence[_TimeOfDay], now: datetime) -> list[TimeWindow]:
    start_of_day = datetime.combine(day, time())
    if not parts:
        return [TimeWindow(start=max(start_of_day, now) if day == now.date() else start_of_day, end=_day_end(day))]
    out: list[TimeWindow] = []
    for part in parts:
        if part.span is not None:
            start = start_of_day + timedelta(hours=part.span[0])
            end = start_of_day + timedelta(hours=part.span[1]) - timedelta(minutes=1)
            out.append(TimeWindow(start=max(start, now), end=end))
            continue
        for clock in part.clocks:
            moment = datetime.combine(day, clock)
            if part.bound == "by":
                out.append(TimeWindow(start=max(start_of_day, now) if day == now.date() else start_of_day, end=moment))
            elif part.bound == "after":
                out.append(TimeWindow(start=moment, end=_day_end(day)))
            else:
                out.append(TimeWindow(start=moment, end=moment))
    return out


def _narrow(parts: list[_TimeOfDay], span: _TimeOfDay | None) -> list[_TimeOfDay]:
    """A part of the day picks the morning or evening reading of a clock time ("7 in the evening")."""
    if span is None or span.span is None:
        return parts
    morning = span.span[0] < 12
    narrowed = []
    for part in parts:
        inside = [c for c in part.clocks if (c.hour < 12) == morning]
        narrowed.append(part.model_copy(update={"clocks": inside or part.clocks}))
    return narrowed


def resolve_time(text: str | None, now: datetime, days: Sequence[date] = ()) -> ResolvedTime | None:
    """Every reading of the time expression in ``text`` against ``now`` (see the module docstring), or None.

    ``days`` are the days a time of day that names no day of its own falls on (the days of a request that a
    reply answers: "at 9", said of "tomorrow at 10 am", is read on tomorrow); without them such a time is
    read on today, and on tomorrow too once today's reading has begun.
    """
    if not text or not text.strip():
        return None
    lowered = " ".join(text.lower()[:MAX_TEXT].replace("’", "'").split())
    windows = _relative(lowered, now)
    clocks = _clock_times(lowered)
    part = _part_of_day(lowered)
    default_days = sorted({d for d in days if d >= now.date()})[:MAX_DAYS]
    days, spans = _dates(lowered, now.date())
    if not windows:
        parts = _narrow(clocks, part) if clocks else ([part] if part is not None else [])
        if not days and not spans and parts and default_days:
            days = default_days
        elif not days and not spans and parts:
            # No day named: today if the time is still ahead; tomorrow too once today's reading has begun
            # ("in the morning", said at 10:00, more likely means tomorrow morning).
            today = [w for w in _windows_on(now.date(), parts, now) if w.end > now]
            windows.extend(today)
            if not today or any(w.start <= now for w in today):
                windows.extend(_windows_on(now.date() + timedelta(days=1), parts, now))
        for day in days:
            windows.extend(_windows_on(day, parts, now))
        for first, last in spans:
            if parts:
                day = first
                while day <= last:
                    windows.extend(_windows_on(day, parts, now))
                    day += timedelta(days=1)
            else:
                start = datetime.combine(first, time())
                windows.append(TimeWindow(start=max(start, now) if first == now.date() else start, end=_day_end(last)))
    future = sorted({w for w in windows if w.end > now}, key=lambda w: (w.start, w.end))
    if not future:
        return None
    return ResolvedTime(expression=text.strip()[:200], windows=future)


def days_of(resolved: ResolvedTime | None) -> list[date]:
    """The days the readings of ``resolved`` touch, earliest first (at most ``MAX_DAYS``)."""
    if resolved is None:
        return []
    found: set[date] = set()
    for window in resolved.windows:
        day = window.start.date()
        while day <= window.end.date() and len(found) < MAX_DAYS:
            found.add(day)
            day += timedelta(days=1)
    return sorted(found)[:MAX_DAYS]


def times_disagree(promise: ResolvedTime | None, request: ResolvedTime | None) -> bool:
    """Whether a promise moves the request's time: both resolve and no reading of one overlaps a reading of the
    other (the case in which :func:`combine_times` keeps the promise's readings)."""
    if promise is None or request is None:
        return False
    return not any(max(a.start, b.start) <= min(a.end, b.end) for a in promise.windows for b in request.windows)


def combine_times(promise: ResolvedTime | None, request: ResolvedTime | None) -> ResolvedTime | None:
    """The promise's readings narrowed by the request's where both resolve and overlap; else whichever exists.

    A promise that names only a day ("tomorrow") and a request that names the hour ("tomorrow at 10 am")
    give the hour; when they disagree, the promise (what the assistant committed to) counts.
    """
    if promise is None or request is None:
        return promise or request
    overlaps = []
    for a in promise.windows:
        for b in request.windows:
            start, end = max(a.start, b.start), min(a.end, b.end)
            if start <= end:
                overlaps.append(TimeWindow(start=start, end=end))
    if not overlaps:
        return promise
    return ResolvedTime(expression=f"{promise.expression} / {request.expression}",
                        windows=sorted(set(overlaps), key=lambda w: (w.start, w.end)))


class TimeFit(str, Enum):
    """How a moment relates to a promised time."""

    ON_TIME = "on_time"
    EARLY = "early"
    LATE = "late"
    UNCHECKED = "unchecked"  # nothing to check against


def time_fits(moment: datetime, promised: ResolvedTime | None) -> TimeFit:
    """``on_time`` when ``moment`` meets some reading of ``promised`` within the tolerance; else ``early`` or
    ``late`` (relative to the nearest reading); ``unchecked`` when there is nothing to check against."""
    if promised is None:
        return TimeFit.UNCHECKED
    best_early: timedelta | None = None
    best_late: timedelta | None = None
    for window in promised.windows:
        low = window.start - (EARLY_SLACK if window.exact else LATE_SLACK)
        high = window.end + LATE_SLACK
        if low <= moment <= high:
            return TimeFit.ON_TIME
        if moment < low:
            gap = low - moment
            best_early = gap if best_early is None or gap < best_early else best_early
        else:
            gap = moment - high
            best_late = gap if best_late is None or gap < best_late else best_late
    if best_late is None:
        return TimeFit.EARLY
    if best_early is None:
        return TimeFit.LATE
    return TimeFit.EARLY if best_early < best_late else TimeFit.LATE


# --------------------------------------------------------------------------------------- content
_TOKEN = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
STOP_WORDS: frozenset[str] = frozenset(
    [
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at",
        "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did",
        "do", "does", "doing", "done", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have",
        "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
        "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
        "only", "or", "other", "our", "ours", "out", "over", "own", "same", "she", "should", "so", "some", "such",
        "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to",
        "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
        "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "ll", "ve", "re", "d", "s", "t",
        "m", "o", "y", "please", "sure", "okay", "ok", "thanks", "thank", "yes", "hi", "hello", "there", "let", "know",
        "user", "users", "assistant", "someone", "somebody", "anyone", "person", "people", "team", "agent", "human",
        "i'll", "i'm", "i've", "i'd", "you'll", "you're", "we'll", "we're", "it's", "that's", "there's", "don't",
        "won't", "can't", "remind", "reminder", "reminders", "reminding", "notify", "notification", "notifications",
        "notified", "alert", "alerts", "tell", "told", "inform", "informed", "update", "updates", "send", "sending",
        "sent", "give", "get", "go", "make", "take", "look", "check", "set", "setting", "keep", "kept", "follow",
        "following", "contact", "contacting", "reach", "ring", "phone", "call", "calling", "called", "email", "emails",
        "emailed", "message", "messages", "text", "write", "writes", "written", "help", "need", "needs", "want",
        "wants", "like", "would", "shall", "will", "may", "might", "must", "ask", "asked", "asking", "let's",
        "schedule", "scheduled", "task", "tasks", "note", "noted", "save", "saved", "remember", "remembered", "memory",
        "ticket", "tickets", "escalate", "escalation", "request", "requested", "action", "open", "close", "closed",
        "status", "due", "today", "tonight", "tomorrow", "yesterday", "morning", "afternoon", "evening", "night",
        "noon", "midday", "midnight", "lunchtime", "lunch", "week", "weeks", "weekend", "month", "months", "year",
        "years", "day", "days", "hour", "hours", "minute", "minutes", "time", "times", "later", "soon", "now", "next",
        "last", "every", "other", "ago", "early", "late", "earlier", "o'clock", "pm", "am", "monday", "tuesday",
        "wednesday", "thursday", "friday", "saturday", "sunday", "mondays", "tuesdays", "wednesdays", "thursdays",
        "fridays", "saturdays", "sundays", "january", "february", "march", "april", "june", "july", "august",
        "september", "october", "november", "december"
    ]
)
SYNONYMS: dict[str, str] = {
    "mum": "mother", "mom": "mother", "mommy": "mother", "mummy": "mother", "dad": "father", "daddy": "father",
    "trash": "rubbish", "garbage": "rubbish", "bin": "rubbish", "refuse": "rubbish",
    "e-mail": "email", "mail": "email", "inbox": "email", "phone": "call", "ring": "call",
    "gp": "doctor", "tv": "television",
    "grocery": "groceries", "shop": "shopping", "store": "shopping", "supermarket": "shopping",
    "bday": "birthday", "b-day": "birthday", "meds": "medication", "medicine": "medication", "pills": "medication",
}


def _stem(word: str) -> str:
    """A light stemmer: possessive, plural, then -ing / -ed, then a final -e (both sides of a match agree)."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    return word


def content_words(text: str | None) -> frozenset[str]:
    """The normalised content words of ``text`` (see the module docstring)."""
    if not text:
        return frozenset()
    words: set[str] = set()
    for token in _TOKEN.findall(text.lower()[:MAX_TEXT].replace("’", "'")):
        token = SYNONYMS.get(token, token)
        if token in STOP_WORDS or len(token) < 2:
            continue
        stemmed = _stem(token)
        stemmed = SYNONYMS.get(stemmed, stemmed)
        if stemmed in STOP_WORDS or len(stemmed) < 2:
            continue
        words.add(stemmed)
    return frozenset(words)


class ContentMatch(BaseModel):
    """Whether a text carries a promise's content, and the words that decided it."""

    model_config = ConfigDict(frozen=True)

    matched: bool = Field(description="The text shares enough of the promise's content words.")
    promise_words: list[str] = Field(description="The promise's content words.")
    shared: list[str] = Field(description="The ones the text has too.")
    needed: int = Field(description="How many had to be shared (0: the promise constrains no content).")


def needed_overlap(promise_words: Iterable[str]) -> int:
    """Content words a text must share with a promise of these words: a third of them, at least one."""
    count = len(set(promise_words))
    return 0 if count == 0 else max(1, math.ceil(count / 3))


def content_match(promise: str | Iterable[str], text: str | Iterable[str]) -> ContentMatch:
    """Whether ``text`` carries ``promise`` (each a text, or already a set of content words)."""
    promise_words = content_words(promise) if isinstance(promise, str) else frozenset(promise)
    text_words = content_words(text) if isinstance(text, str) else frozenset(text)
    shared = sorted(promise_words & text_words)
    needed = needed_overlap(promise_words)
    return ContentMatch(matched=len(shared) >= needed, promise_words=sorted(promise_words), shared=shared,
                        needed=needed)
