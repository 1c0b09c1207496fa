"""Whether a standing run's action outcome is right for its cell: the environment's reward and the judges' signal.

This is a pure function of the trace and the episode. It lives with the episodes (below the
environment and the judges) because both need it: the environment pays its terminal reward from it,
and :mod:`commitbench.judges.standing.signals` reports it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from commitbench.calendar_words import full_name
from commitbench.episodes.standing.episode import Episode
from commitbench.protocol import ToolCallRecord
from commitbench.tools import was_attempted
from commitbench.traces import EpisodeTrace

_QUOTES = "\"'`“”‘’„«»"
_DASHES = re.compile("[\u2010-\u2015\u2212]")  # hyphens, en and em dashes, minus: all read as '-'
_AROUND_DASH = re.compile(r"\s*-\s*")
_TIME = r"\d{1,2}(?::\d{2})?(?:\s*[ap]\.?\s?m\b\.?)?"
_RANGE_WORD = re.compile(rf"\b({_TIME})\s+(?:to|until|till|through)\s+({_TIME})")
_ZERO_SECONDS = re.compile(r"\b(\d{1,2}:\d{2}):00\b")
_TWELVE_HOUR = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s?m\b\.?")
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"[a-z]+\.?")
_LEADING_ARTICLE = re.compile(r"\A(?:the|a|an)\s+(?=\S)")
# A prefix naming what a number or code is ("Room 4B", "No. 5", "number 12"), before something with a digit.
_LEADING_PREFIX = re.compile(r"\A(?:room|rm\.?|no\.|nr\.?|number)\s*(?=\S*\d)")
_NUMBER = re.compile(r"\A[+]?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?\Z")


def _twelve_hour(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), match.group(2) or "00"
    if not 1 <= hour <= 12:
        return match.group(0)  # not a clock time ("13pm"): left as written
    hour = hour % 12 + (12 if match.group(3) == "p" else 0)
    return f"{hour:02d}:{minute}"


def _calendar_word(match: re.Match[str]) -> str:
    return full_name(match.group(0)) or match.group(0)


def _number(text: str) -> str:
    """A value that is a number alone, written one way: no sign, no leading zeros, no thousands commas, no
    trailing zeros after the point ('08' and '8.0' are '8'); anything else unchanged."""
    match = _NUMBER.match(text)
    if match is None:
        return text
    whole = match.group(1).replace(",", "").lstrip("0") or "0"
    fraction = (match.group(2) or "").rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def canonical_argument(value: object) -> str:
    """An argument's value in canonical form, so that equivalent spellings compare equal and different values
    never do.

    Ignored: case, spacing, surrounding quotes, a trailing full stop, '#', a leading article ("the leadership
    list" is "leadership list") and a prefix naming a number or code ("Room 4B" is "4b", "No. 5" is "5").
    Every dash is a hyphen with no space around it, and "to", "until", "till" or "through" between two times is
    one too ("10:00 to 12:00" is "10:00-12:00"); clock times are 24-hour "HH:MM" ("3pm", "3:00 p.m.", "15:00"
    and "15:00:00" are "15:00"; "9:30" is "09:30"); weekday and month abbreviations are the full names ("Tue"
    and "Tues." are "tuesday": :mod:`commitbench.calendar_words`); a number alone is written one way ("08",
    "8.0" and 8 are "8"). Linear time.
    """
    text = str(value)
    return _canonical_short(text) if len(text) <= _CACHED_LENGTH else _canonical(text)


_CACHED_LENGTH = 256  # a value this short keeps its canonical form (a long text is made canonical each time)


@lru_cache(maxsize=4_096)  # arguments repeat across runs: the promised values, the usual spellings of them
def _canonical_short(text: str) -> str:
    return _canonical(text)


def _canonical(text: str) -> str:
    text = text.lower().replace("#", "")
    text = _SPACES.sub(" ", text).strip().strip(_QUOTES).strip()
    text = _DASHES.sub("-", text)
    text = _ZERO_SECONDS.sub(r"\1", text)
    text = _RANGE_WORD.sub(r"\1-\2", text)
    text = _AROUND_DASH.sub("-", text)
    text = _TWELVE_HOUR.sub(_twelve_hour, text)
    text = _CLOCK.sub(lambda m: f"{int(m.group(1)):02d}:{m.group(2)}", text)
    text = _WORD.sub(_calendar_word, text)
    text = text.rstrip(".").strip()
    text = _LEADING_ARTICLE.sub("", text)
    text = _LEADING_PREFIX.sub("", text)
    return _number(text)


def args_match(
    target: dict[str, object], given: dict[str, object] | None, compared: Sequence[str] | None = None
) -> bool:
    """Whether the arguments of an executed action are the promised ones, in canonical form
    (:func:`canonical_argument`). ``compared`` limits the comparison to some arguments (None: all)."""
    if given is None:
        return False
    names = target if compared is None else [k for k in target if k in compared]
    return all(canonical_argument(given.get(k, "")) == canonical_argument(target[k]) for k in names)


def executions(trace: EpisodeTrace, action_tool: str) -> list[ToolCallRecord]:
    """Calls of the promised action that were attempts: accepted, or refused by the world.

    A call rejected for bad arguments did nothing; a call the world refused was still an attempt.
    """
    return [c for c in trace.tool_calls() if c.tool == action_tool and was_attempted(c)]


def action_outcome_correct(trace: EpisodeTrace, episode: Episode) -> bool:
    """Executed on time with the promised arguments when the cell expects execution; never executed otherwise."""
    done = executions(trace, episode.action_tool.name)
    if not episode.expects_execute:
        return not done
    first = done[0] if done else None
    return bool(
        first and first.step >= episode.trigger_step
        and args_match(episode.target_args, first.arguments, episode.compared_args)
    )
