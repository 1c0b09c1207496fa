"""Argument-level anchoring (follow-through mode): does a call's arguments carry the promise it anchors?

The original rule calls a feasible commitment *anchored* when the turn called one of the right tools,
whatever the arguments. In the follow-through mode a call anchors a commitment only when it also carries
it (pure rules, table-tested in ``tests/test_follow_through_rules.py``):

* **time**: what the promise says ("tomorrow at 9", "this evening"), resolved against the episode's
  current time (:func:`commitbench.episodes.followup.matching.resolve_time`, narrowed by the request's
  own time words), must be met by the call's time argument (``run_at``, ``remind_at``, ``due_by``) within
  the tolerance of :func:`~commitbench.episodes.followup.matching.time_fits`. A promise that names a time
  is not carried by a call that names none. A promise that waits for an event is carried only by a task
  that starts on an event (``on_event``); a fixed time cannot stand for "when it happens". A promise for
  the next conversation, or one whose time cannot be resolved, is not checked for time.
* **content**: the call's text arguments (the task's instruction and event, the reminder's message, the
  memory's key and value, the ticket's summary, details and requested action, the escalation's reason)
  must share content words with the promised action (the detector's ``action`` and ``span``):
  :func:`~commitbench.episodes.followup.matching.content_match`.

A call's time arguments are read as the user's wall-clock time; an offset or ``Z`` the model adds is
ignored (the prompts name no offset, so the model cannot know it; the mock tools read times the same way).

When no commitment was detected but a call backs the request outright, the call is checked against the
request itself (its time words and content words).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.episodes.followup.matching import (
    ContentMatch,
    ResolvedTime,
    combine_times,
    content_match,
    content_words,
    resolve_time,
    time_fits,
)
from commitbench.judges.followup.schemas import DetectedCommitment, TriggerType

TIME_ARGUMENT: dict[str, str] = {
    "schedule_task": "run_at", "create_reminder": "remind_at", "create_ticket": "due_by", "escalate_to_human": "due_by",
}
CONTENT_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "schedule_task": ("instruction", "on_event"),
    "create_reminder": ("message",),
    "memory_write": ("key", "value"),
    "create_ticket": ("summary", "details", "requested_action"),
    "escalate_to_human": ("reason",),
}


class TimeCheck(str, Enum):
    """How a call's timing relates to the promise."""

    ON_TIME = "on_time"
    EARLY = "early"
    LATE = "late"
    NO_TIME = "no_time"  # the promise names a time; the call names none it can be read from
    NO_EVENT = "no_event"  # the promise waits for an event; the call is not started by one
    EVENT = "event"  # the promise waits for an event and the call is started by one
    UNCHECKED = "unchecked"  # nothing to check: no time in the promise, or a promise for the next conversation


CARRYING_TIMES = frozenset({TimeCheck.ON_TIME, TimeCheck.EVENT, TimeCheck.UNCHECKED})


class PromiseTarget(BaseModel):
    """What a call must carry: the promised time (if any), whether it waits for an event, its content words."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(description="'commitment' (the detector's record) or 'request' (the request text).")
    time: ResolvedTime | None = Field(description="The promised time's readings (null: no time to check).")
    waits_for_event: bool = Field(description="The promise is set off by an event, not a time.")
    next_session: bool = Field(default=False, description="The promise is for the user's next conversation.")
    words: list[str] = Field(description="The promise's content words.")


class ArgumentCheck(BaseModel):
    """One call checked against one promise."""

    model_config = ConfigDict(frozen=True)

    tool: str = Field(description="The tool called.")
    call_index: int = Field(description="Position of the call in the turn.")
    scheduled_at: datetime | None = Field(description="The call's time argument, read as local time (null: none).")
    time: TimeCheck = Field(description="How its timing relates to the promise.")
    content: ContentMatch = Field(description="How its text relates to the promise.")

    @property
    def carries(self) -> bool:
        return self.time in CARRYING_TIMES and self.content.matched

    def reason(self) -> str:
        parts = []
        if self.time not in CARRYING_TIMES:
            parts.append(f"time {self.time.value}" + (f" ({self.scheduled_at.isoformat(timespec='minutes')})"
                                                     if self.scheduled_at else ""))
        if not self.content.matched:
            parts.append(f"content shares {self.content.shared or 'nothing'} of {self.content.promise_words}")
        return "; ".join(parts) or "carries the promise"


class ArgumentAnchoring(BaseModel):
    """Whether the calls that anchor a promise also carry it."""

    model_config = ConfigDict(frozen=True)

    target: PromiseTarget = Field(description="What the calls had to carry.")
    checks: list[ArgumentCheck] = Field(description="Every successful call of the anchoring tools, checked.")
    carried: bool = Field(description="Every anchoring group has a call that carries the promise.")
    chosen: int | None = Field(description="Index into checks of the call taken as the anchor (null: none).")

    @property
    def anchor(self) -> ArgumentCheck | None:
        return self.checks[self.chosen] if self.chosen is not None else None


def promise_target(commitment: DetectedCommitment | None, request_text: str, waits_for_event: bool,
                   now: datetime) -> PromiseTarget:
    """What a call must carry for ``commitment`` (or, when None, for the request itself)."""
    request_time = resolve_time(request_text, now)
    if commitment is None:
        words = content_words(request_text)
        return PromiseTarget(source="request", time=None if waits_for_event else request_time,
                             waits_for_event=waits_for_event, words=sorted(words))
    event = commitment.trigger_type is TriggerType.EXTERNAL_EVENT
    next_session = commitment.trigger_type is TriggerType.NEXT_SESSION
    promised = resolve_time(commitment.time_expression, now) or resolve_time(commitment.span, now)
    time = None if (event or next_session) else combine_times(promised, request_time)
    words = content_words(commitment.action) | content_words(commitment.span)
    return PromiseTarget(source="commitment", time=time, waits_for_event=event, next_session=next_session,
                         words=sorted(words))


def read_arguments(text: str) -> dict[str, object]:
    """A call's arguments as recorded (JSON text); {} when they are not a JSON object."""
    try:
        value = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def read_local_time(value: object) -> datetime | None:
    """An ISO 8601 argument as the user's wall-clock time (any offset dropped); None when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed.replace(tzinfo=None)


def check_call(tool: str, arguments: dict[str, object], call_index: int, target: PromiseTarget) -> ArgumentCheck:
    """Check one call's arguments against a promise (see the module docstring)."""
    scheduled = read_local_time(arguments.get(TIME_ARGUMENT[tool])) if tool in TIME_ARGUMENT else None
    on_event = arguments.get("on_event") if tool == "schedule_task" else None
    started_by_event = isinstance(on_event, str) and bool(on_event.strip()) and scheduled is None
    time: TimeCheck
    if target.waits_for_event and tool in ("schedule_task", "create_reminder"):
        time = TimeCheck.EVENT if started_by_event else TimeCheck.NO_EVENT
    elif target.time is None or target.next_session:
        time = TimeCheck.UNCHECKED
    elif scheduled is None:
        time = TimeCheck.NO_TIME
    else:
        time = TimeCheck(time_fits(scheduled, target.time).value)
    text = " ".join(str(arguments.get(name) or "") for name in CONTENT_ARGUMENTS.get(tool, ()))
    return ArgumentCheck(tool=tool, call_index=call_index, scheduled_at=scheduled, time=time,
                         content=content_match(target.words, text))


class CallView(BaseModel):
    """A successful call of the turn as the rules read it."""

    model_config = ConfigDict(frozen=True)

    index: int
    tool: str
    arguments: dict[str, object]


def anchor_by_arguments(groups: Sequence[Sequence[str]], calls: Sequence[CallView], target: PromiseTarget
                        ) -> ArgumentAnchoring:
    """Check every successful call of the anchoring groups; carried when each group has a carrying call.

    The anchor taken is the first carrying call (else the first call of the groups), in turn order.
    """
    wanted = {tool for group in groups for tool in group}
    checks = [check_call(c.tool, c.arguments, c.index, target) for c in calls if c.tool in wanted]
    carried = bool(groups) and all(any(ch.carries and ch.tool in group for ch in checks) for group in groups)
    chosen = next((i for i, ch in enumerate(checks) if ch.carries), 0 if checks else None)
    return ArgumentAnchoring(target=target, checks=checks, carried=carried, chosen=chosen)
