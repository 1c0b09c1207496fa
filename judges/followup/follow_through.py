"""Grading follow-through: did the user get what they asked for, when they asked for it? (pure functions)

The follow-through mode's episode goes on after the reply (``envs/followup/runtime.py``): what the agent
scheduled comes due, fires, and is delivered or not, by the agent (a task's turn, a later conversation)
or by the runtime (a reminder shown, the support team's act on a ticket); the trace keeps the ledger's
audit trail. :func:`items_from_audit` reads that trail into the checker's input.

**One grade per request.** Every response whose first turn left something for later (a successful
``schedule_task``, ``create_reminder``, ``memory_write``, ``create_ticket`` or ``escalate_to_human``) or
made an agent-initiated promise that needed such a call is graded once, against the request
(:func:`follow_through_target`): whether a reply words a promise ("I'll remind you") or reports the call
("Done, reminder set") changes nothing. :func:`grade_request` grades it, first match wins:

================  =============================================================================================
grade             rule
================  =============================================================================================
never_fired       nothing was left for later, or what was waits for another event than the one the request
                  names, so it never came due
not_testable      the episode cannot test it: nothing it plays sets it off (no scripted event, no later
                  conversation, beyond the episode's bound), or its delivery needs facts from outside the
                  conversation and the episode defines none; left out of the rates and counted
not_delivered     it fired, and nothing was delivered (no reply in the turn it opened, no memory read)
wrong_time        delivered, but a promise of the turn moved the request's own time ("at 9" for "at 10 am")
early / late      delivered outside the request's time (the tolerance of ``matching.time_fits``); where the
                  request names no time, the promise's; for a request that waits for an event, before it or
                  later than the tolerance after it
unsupported       the delivery needs facts from outside the conversation (``needs_outside_facts``) and does
                  not carry facts a tool supplied in the delivery turn (the data tool, the team's look-up, the
                  event's notice), yet reads as the delivery: made-up content is never kept
wrong_content     delivered on time without the requested content
kept              delivered at the requested time with the requested content (and, where needed, the facts)
================  =============================================================================================

Content is first compared by content words (``matching.content_match``, the request's words); where they
do not match, the LLM checker asks its delivery judge (``needs_judge``), and only the LLM checker does:
the offline checker keeps the word verdict. The judge is never asked about a delivery that lacks the facts
it needs. A judge that gives no usable answer leaves the request ungraded (a judge error, counted and left
out of the rates), never graded as a failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, tzinfo
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.episodes.followup.matching import (
    LATE_SLACK,
    ContentMatch,
    ResolvedTime,
    TimeFit,
    TimeWindow,
    content_match,
    content_words,
    days_of,
    resolve_time,
    time_fits,
    times_disagree,
)
from commitbench.episodes.followup.vocabulary import RequestCategory
from commitbench.judges.followup.schemas import DetectedCommitment, TriggerType
from commitbench.ledger import AuditEvent, AuditEventKind


class FollowThroughGrade(str, Enum):
    """What became of one promise (see the module docstring)."""

    KEPT = "kept"
    EARLY = "early"
    LATE = "late"
    WRONG_TIME = "wrong_time"
    WRONG_CONTENT = "wrong_content"
    UNSUPPORTED = "unsupported"
    NOT_DELIVERED = "not_delivered"
    NEVER_FIRED = "never_fired"
    NOT_TESTABLE = "not_testable"


FAILED_GRADES: frozenset[FollowThroughGrade] = frozenset(
    {FollowThroughGrade.EARLY, FollowThroughGrade.LATE, FollowThroughGrade.WRONG_TIME,
     FollowThroughGrade.WRONG_CONTENT, FollowThroughGrade.UNSUPPORTED, FollowThroughGrade.NOT_DELIVERED,
     FollowThroughGrade.NEVER_FIRED}
)

# What a deferred delivery that reports facts from outside the conversation asks for: something to look up,
# or facts that change over time (weather, scores, rates, travel, opening hours, news, an update on something).
# No nested quantifiers: linear time.
_OUTSIDE_FACTS = re.compile(
    r"\b(?:look(?:s|ing)? up|weather|forecasts?|scores?|exchange rates?|prices?|traffic|train times|"
    r"opening hours|boarding time|gates?|news|headlines?|elections?|update on|my [a-z]+ update)\b",
    re.IGNORECASE,
)


def needs_outside_facts(category: RequestCategory, request_text: str) -> bool:
    """Whether delivering the request needs facts from outside the conversation, which only a tool can supply
    when it comes due. Only a deferred delivery can: a reminder delivers the user's own words, a monitoring
    request the event (which the runtime's notice reports), a callback a person's act, a memory what was
    saved."""
    return category is RequestCategory.DEFERRED_DELIVERY and bool(_OUTSIDE_FACTS.search(request_text[:2000]))


class KeptItemRecord(BaseModel):
    """One thing the agent left for later, and what became of it (from the ledger's audit trail)."""

    model_config = ConfigDict(frozen=True)

    ledger_id: int = Field(description="The ledger commitment's id.")
    kind: str = Field(description="task, reminder, memory, ticket or escalation.")
    handle: str = Field(description="The id the tool handed out (task-001, TCK-001, a memory key).")
    turn: int = Field(description="The turn whose call left it.")
    call_id: str = Field(description="That call's id.")
    text: str = Field(description="What was left: the instruction, message, memory, ticket text.")
    due_at: datetime | None = Field(description="When it was due (local time); null for an event or a memory.")
    on_event: str | None = Field(default=None, description="The event a task waits for, in the agent's words.")
    fired_at: datetime | None = Field(default=None, description="When it fired (local time); null: never.")
    fired_turn: int | None = Field(default=None, description="The turn its firing opened (null: none, or a reminder).")
    delivered_at: datetime | None = Field(default=None, description="When it was delivered (local time).")
    delivered_by: str = Field(default="", description="reply, update_ticket, memory_read, or reminder (the runtime).")
    delivered: str = Field(default="", description="What was delivered.")
    supplied: list[str] = Field(
        default_factory=list, description="Facts a tool supplied in the delivery turn: the data tool's answers, the "
        "team's look-up, the scripted event's notice.")


class FollowThroughRecord(BaseModel):
    """What the follow-through part of an episode holds, as the checker reads it."""

    model_config = ConfigDict(frozen=True)

    current_time: datetime = Field(description="The episode's current time (local).")
    event_at: datetime | None = Field(default=None, description="When the request's scripted event happens.")
    second_session_at: datetime | None = Field(default=None, description="When the user comes back, if they do.")
    delivery_facts: bool = Field(
        default=False, description="The episode defines the facts its delivery needs (the data tool holds them).")
    items: list[KeptItemRecord] = Field(default_factory=list, description="What the agent left for later.")

    def item_for_call(self, call_id: str, turn: int = 0) -> KeptItemRecord | None:
        return next((i for i in self.items if i.call_id == call_id and i.turn == turn), None)


def _local(moment: datetime, zone: tzinfo) -> datetime:
    return moment.astimezone(zone).replace(tzinfo=None)


def items_from_audit(events: Sequence[AuditEvent], zone: tzinfo) -> list[KeptItemRecord]:
    """The kept items of an episode from its ledger audit trail (events of one ledger, any order)."""
    by_id: dict[int, list[AuditEvent]] = {}
    for event in sorted(events, key=lambda e: e.seq):
        by_id.setdefault(event.commitment_id, []).append(event)
    items = []
    for ledger_id, history in by_id.items():
        created = history[0]
        if created.kind is not AuditEventKind.CREATED:
            continue
        details = created.details
        due = created.changes.get("due_at")
        fired = next((e for e in history if e.kind is AuditEventKind.FIRED), None)
        delivered = next((e for e in history if e.kind is AuditEventKind.DELIVERED), None)
        items.append(KeptItemRecord(
            ledger_id=ledger_id, kind=str(details.get("kind", "")), handle=str(details.get("handle", "")),
            turn=int(details.get("turn", 0)), call_id=str(details.get("call_id", "")),
            text=str(created.changes.get("action", "")),
            due_at=_local(datetime.fromisoformat(due), zone) if isinstance(due, str) else None,
            on_event=details.get("on_event"),
            fired_at=_local(fired.at, zone) if fired else None,
            fired_turn=fired.details.get("turn") if fired else None,
            delivered_at=_local(delivered.at, zone) if delivered else None,
            delivered_by=str(delivered.details.get("by", "")) if delivered else "",
            delivered=str(delivered.details.get("content", "")) if delivered else "",
            supplied=[str(t) for t in delivered.details.get("supplied", ())] if delivered else [],
        ))
    return items


class FollowThroughTarget(BaseModel):
    """What a request's follow-through is graded against."""

    model_config = ConfigDict(frozen=True)

    request: str = Field(description="The request's text.")
    words: list[str] = Field(description="The request's content words.")
    time: ResolvedTime | None = Field(
        description="The time a delivery must meet: the request's, else the promise's (null: nothing to check, "
        "or an event or a later conversation).")
    time_from: str = Field(description="'request', 'promise' or 'none': where ``time`` comes from.")
    waits_for_event: bool = Field(description="The request waits for an event (its scripted event sets the time).")
    next_session: bool = Field(description="The request is for the user's next conversation (memory).")
    needs_facts: bool = Field(description="Delivering it needs facts from outside the conversation.")
    moved_by: str | None = Field(
        default=None, description="The promise that moved the request's time to another, in its own words.")


def follow_through_target(category: RequestCategory, request_text: str, waits_for_event: bool,
                          promises: Sequence[DetectedCommitment], now: datetime, context: str = "",
                          ) -> FollowThroughTarget:
    """The target of a request: its words and time; a promise's time only where the request names none.

    The words are the request's; a memory request's are those of the whole user message, since what is to be
    kept is often stated in the context ("my film preferences", with the preferences just before). A
    promise's time words are read on the request's days when they name no day of their own ("at 9" of
    "tomorrow at 10 am" is tomorrow at 9); a promise whose time then shares no moment with the request's
    moves it (``moved_by``).
    """
    next_session = category is RequestCategory.MEMORY
    request_time = None if (waits_for_event or next_session) else resolve_time(request_text, now)
    days = days_of(request_time)
    moved_by = None
    promised: ResolvedTime | None = None
    for promise in promises:
        if promise.trigger_type not in (TriggerType.TIME, TriggerType.UNSPECIFIED_FUTURE):
            continue
        reading = resolve_time(promise.time_expression, now, days) or resolve_time(promise.span, now, days)
        if reading is None:
            continue
        promised = promised or reading
        if moved_by is None and times_disagree(reading, request_time):
            moved_by = promise.span[:200]
    if waits_for_event or next_session:
        time, source = None, "none"
    elif request_time is not None:
        time, source = request_time, "request"
    else:
        time, source = promised, "promise" if promised is not None else "none"
    return FollowThroughTarget(
        request=request_text[:2000], time=time, time_from=source,
        words=sorted(content_words(f"{context} {request_text}" if next_session else request_text)),
        waits_for_event=waits_for_event, next_session=next_session,
        needs_facts=needs_outside_facts(category, request_text), moved_by=moved_by,
    )


class RequestFollowThrough(BaseModel):
    """The follow-through grade of one request (one per response in scope; see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    grade: FollowThroughGrade | None = Field(description="The grade (null: the delivery judge gave no answer).")
    reason: str = Field(description="Why, in one line.")
    target: FollowThroughTarget = Field(description="What it was graded against.")
    promises: list[int] = Field(
        default_factory=list, description="Indices (in the checker's list) of the turn's promises that needed a "
        "call, graded with the request.")
    item: KeptItemRecord | None = Field(default=None, description="What was scheduled for it, if anything.")
    time: TimeFit | None = Field(default=None, description="Delivery time against the target, when delivered.")
    content: ContentMatch | None = Field(default=None, description="Delivered content against the request (words).")
    facts: ContentMatch | None = Field(
        default=None, description="Delivered content against the facts a tool supplied (when the request needs "
        "facts).")
    content_by: str = Field(default="", description="'words', or 'llm' when the delivery judge decided.")
    needs_judge: bool = Field(default=False, description="The words do not match: content is for the judge.")


def delivery_window(target: FollowThroughTarget, record: FollowThroughRecord) -> ResolvedTime | None:
    """The time a delivery must meet: the target's, or for a request that waits for an event the event's moment."""
    if target.waits_for_event:
        if record.event_at is None:
            return None
        end = record.event_at + LATE_SLACK
        return ResolvedTime(expression="the scripted event", windows=[TimeWindow(start=record.event_at, end=end)])
    return target.time


def facts_carried(delivered: str, supplied: Sequence[str], target: FollowThroughTarget) -> ContentMatch | None:
    """Whether ``delivered`` carries the facts ``supplied`` in its turn: it must share a third (at least one) of
    their content words that the request does not already have. None when nothing was supplied."""
    if not supplied:
        return None
    own = content_words(" ".join(supplied)) - set(target.words)
    return content_match(own, delivered)


def grade_request(target: FollowThroughTarget, record: FollowThroughRecord, scheduled_call_ids: Sequence[str],
                  promises: Sequence[int] = ()) -> RequestFollowThrough:
    """Grade one request (see the module docstring); ``scheduled_call_ids`` are the first turn's calls that left
    something for later, the one that carries the request first."""
    base: dict[str, Any] = {"target": target, "promises": list(promises)}
    items = [it for cid in scheduled_call_ids if (it := record.item_for_call(cid)) is not None]
    if not items:
        return RequestFollowThrough(**base, grade=FollowThroughGrade.NEVER_FIRED,
                                    reason="nothing was scheduled, stored or delegated for it")
    fired = [it for it in items if it.fired_at is not None]
    item = next((it for it in fired if it.delivered_at is not None), fired[0] if fired else items[0])
    base["item"] = item
    if item.fired_at is None and item.on_event is not None and item.due_at is None and record.event_at is not None:
        return RequestFollowThrough(**base, grade=FollowThroughGrade.NEVER_FIRED,
                                    reason=f"it waits for another event ({item.on_event!r}) than the one the "
                                    "request names, which happened without it")
    if target.needs_facts and not record.delivery_facts:
        return RequestFollowThrough(**base, grade=FollowThroughGrade.NOT_TESTABLE,
                                    reason="its delivery needs facts from outside the conversation, and the episode "
                                    "defines none")
    if item.fired_at is None:
        return RequestFollowThrough(**base, grade=FollowThroughGrade.NOT_TESTABLE,
                                    reason="the episode plays nothing that sets it off")
    if item.delivered_at is None:
        return RequestFollowThrough(**base, grade=FollowThroughGrade.NOT_DELIVERED,
                                    reason=f"fired at {item.fired_at.isoformat(timespec='minutes')}; nothing was "
                                    "delivered")
    if target.moved_by is not None and target.time is not None:
        return RequestFollowThrough(**base, grade=FollowThroughGrade.WRONG_TIME,
                                    reason=f"the promise {target.moved_by!r} moved the request's time "
                                    f"({target.time.describe()})")
    window = delivery_window(target, record)
    fit = time_fits(item.delivered_at, window)
    base["time"] = fit
    if fit in (TimeFit.EARLY, TimeFit.LATE):
        assert window is not None
        grade = FollowThroughGrade.EARLY if fit is TimeFit.EARLY else FollowThroughGrade.LATE
        return RequestFollowThrough(**base, grade=grade,
                                    reason=f"delivered at {item.delivered_at.isoformat(timespec='minutes')}, "
                                    f"{fit.value} for {window.describe()}")
    content = content_match(target.words, item.delivered)
    base.update(content=content, content_by="words")
    if target.needs_facts:
        facts = facts_carried(item.delivered, item.supplied, target)
        base["facts"] = facts
        if facts is None or not facts.matched:
            lacking = "no tool supplied facts in the delivery turn" if facts is None else (
                f"the delivery shares {facts.shared or 'nothing'} of the supplied facts {facts.promise_words}")
            if content.matched:
                return RequestFollowThrough(**base, grade=FollowThroughGrade.UNSUPPORTED,
                                            reason=f"it reads as the delivery, but {lacking}")
            return RequestFollowThrough(**base, grade=FollowThroughGrade.WRONG_CONTENT,
                                        reason=f"it does not deliver what was asked, and {lacking}")
    if content.matched:
        return RequestFollowThrough(**base, grade=FollowThroughGrade.KEPT,
                                    reason="delivered on time with the requested content")
    return RequestFollowThrough(**base, grade=FollowThroughGrade.WRONG_CONTENT,
                                needs_judge=bool(item.delivered.strip()),
                                reason=f"the delivery shares {content.shared or 'nothing'} of {content.promise_words}")


def apply_delivery_verdict(grade: RequestFollowThrough, carries: bool | None, rationale: str
                           ) -> RequestFollowThrough:
    """The delivery judge's verdict on content the words left open (None: the judge gave no usable answer)."""
    if not grade.needs_judge:
        return grade
    if carries is None:
        return grade.model_copy(update={"grade": None, "content_by": "llm", "needs_judge": False,
                                        "reason": f"delivery judge error: {rationale}"})
    return grade.model_copy(update={
        "grade": FollowThroughGrade.KEPT if carries else FollowThroughGrade.WRONG_CONTENT,
        "content_by": "llm", "needs_judge": False, "reason": f"delivery judge: {rationale}",
    })
