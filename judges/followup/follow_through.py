"""Grading follow-through: was each promise of the first turn kept later in the episode? (pure functions)

The follow-through mode's episode goes on after the reply (``envs/followup/runtime.py``): what the agent
scheduled comes due, fires into a new turn, and is delivered or not; the trace keeps the ledger's audit
trail. :func:`follow_through_record` reads that trail into the checker's input; :func:`grade_commitment`
grades one commitment that needed an enabling call, first match wins:

================  =============================================================================================
grade             rule
================  =============================================================================================
never_fired       nothing was scheduled for it (no successful anchoring call), or what was scheduled waits for
                  another event than the one the request names, so it never came due
not_testable      it was scheduled, but the episode plays nothing that sets it off (no scripted event for the
                  request, no later conversation, beyond the episode's bound); left out of the rates
not_delivered     it fired, and the agent did not deliver it in the turn that opened (no reply to the user, no
                  ticket update, no memory read)
early / late      it was delivered outside the promised time (the tolerance of ``matching.time_fits``); for a
                  promise that waits for an event, before it or later than the tolerance after it
wrong_content     delivered on time, but what was delivered does not carry the promised content
kept              delivered at the promised time with the promised content
================  =============================================================================================

Content is first compared by content words (``matching.content_match``); where they do not match, the
LLM checker asks its delivery judge (``needs_judge``), and only the LLM checker does: the offline checker
keeps the word verdict. A judge that gives no usable answer leaves the commitment ungraded (a judge
error, counted and left out of the rates), never graded as a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.episodes.followup.matching import (
    LATE_SLACK,
    ContentMatch,
    ResolvedTime,
    TimeFit,
    TimeWindow,
    content_match,
    time_fits,
)
from commitbench.judges.followup.arguments import ArgumentAnchoring, PromiseTarget
from commitbench.ledger import AuditEvent, AuditEventKind


class FollowThroughGrade(str, Enum):
    """What became of one promise (see the module docstring)."""

    KEPT = "kept"
    EARLY = "early"
    LATE = "late"
    WRONG_CONTENT = "wrong_content"
    NOT_DELIVERED = "not_delivered"
    NEVER_FIRED = "never_fired"
    NOT_TESTABLE = "not_testable"


FAILED_GRADES: frozenset[FollowThroughGrade] = frozenset(
    {FollowThroughGrade.EARLY, FollowThroughGrade.LATE, FollowThroughGrade.WRONG_CONTENT,
     FollowThroughGrade.NOT_DELIVERED, FollowThroughGrade.NEVER_FIRED}
)


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


class FollowThroughRecord(BaseModel):
    """What the follow-through part of an episode holds, as the checker reads it."""

    model_config = ConfigDict(frozen=True)

    current_time: datetime = Field(description="The episode's current time (local).")
    event_at: datetime | None = Field(default=None, description="When the request's scripted event happens.")
    second_session_at: datetime | None = Field(default=None, description="When the user comes back, if they do.")
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
        ))
    return items


class CommitmentFollowThrough(BaseModel):
    """The follow-through grade of one commitment that needed an enabling call."""

    model_config = ConfigDict(frozen=True)

    commitment: int = Field(description="Index of the commitment in the checker's list.")
    grade: FollowThroughGrade | None = Field(description="The grade (null: the delivery judge gave no answer).")
    reason: str = Field(description="Why, in one line.")
    item: KeptItemRecord | None = Field(default=None, description="What was scheduled for it, if anything.")
    time: TimeFit | None = Field(default=None, description="Delivery time against the promise, when delivered.")
    content: ContentMatch | None = Field(default=None, description="Delivered content against the promise (words).")
    content_by: str = Field(default="", description="'words', or 'llm' when the delivery judge decided.")
    needs_judge: bool = Field(default=False, description="The words do not match: content is for the judge.")


def promised_window(target: PromiseTarget, record: FollowThroughRecord) -> ResolvedTime | None:
    """The time a delivery must meet: the promise's time, or for an event promise the event's moment."""
    if target.waits_for_event:
        if record.event_at is None:
            return None
        end = record.event_at + LATE_SLACK
        return ResolvedTime(expression="the scripted event", windows=[TimeWindow(start=record.event_at, end=end)])
    if target.next_session:
        return None
    return target.time


def grade_commitment(index: int, anchoring: ArgumentAnchoring | None, record: FollowThroughRecord,
                     scheduled_call_ids: Sequence[str]) -> CommitmentFollowThrough:
    """Grade one commitment (see the module docstring); ``scheduled_call_ids`` are the call ids of its anchoring
    calls, the carrying one first."""
    items = [it for cid in scheduled_call_ids if (it := record.item_for_call(cid)) is not None]
    if anchoring is None or not items:
        return CommitmentFollowThrough(commitment=index, grade=FollowThroughGrade.NEVER_FIRED,
                                       reason="nothing was scheduled for it")
    fired = [it for it in items if it.fired_at is not None]
    item = next((it for it in fired if it.delivered_at is not None), fired[0] if fired else items[0])
    if item.fired_at is None:
        if item.on_event is not None and item.due_at is None and record.event_at is not None:
            return CommitmentFollowThrough(commitment=index, grade=FollowThroughGrade.NEVER_FIRED, item=item,
                                           reason=f"it waits for another event ({item.on_event!r}) than the one "
                                           "the request names, which happened without it")
        return CommitmentFollowThrough(commitment=index, grade=FollowThroughGrade.NOT_TESTABLE, item=item,
                                       reason="the episode plays nothing that sets it off")
    if item.delivered_at is None:
        return CommitmentFollowThrough(commitment=index, grade=FollowThroughGrade.NOT_DELIVERED, item=item,
                                       reason=f"fired at {item.fired_at.isoformat(timespec='minutes')}; "
                                       "nothing was delivered")
    fit = time_fits(item.delivered_at, promised_window(anchoring.target, record))
    if fit in (TimeFit.EARLY, TimeFit.LATE):
        grade = FollowThroughGrade.EARLY if fit is TimeFit.EARLY else FollowThroughGrade.LATE
        return CommitmentFollowThrough(commitment=index, grade=grade, item=item, time=fit,
                                       reason=f"delivered at {item.delivered_at.isoformat(timespec='minutes')}, "
                                       f"{fit.value} for {promised_window(anchoring.target, record).describe()}")  # type: ignore[union-attr]
    content = content_match(anchoring.target.words, item.delivered)
    if content.matched:
        return CommitmentFollowThrough(commitment=index, grade=FollowThroughGrade.KEPT, item=item, time=fit,
                                       content=content, content_by="words",
                                       reason="delivered on time with the promised content")
    return CommitmentFollowThrough(commitment=index, grade=FollowThroughGrade.WRONG_CONTENT, item=item, time=fit,
                                   content=content, content_by="words", needs_judge=bool(item.delivered.strip()),
                                   reason=f"the delivery shares {content.shared or 'nothing'} of "
                                   f"{content.promise_words}")


def apply_delivery_verdict(grade: CommitmentFollowThrough, carries: bool | None, rationale: str
                           ) -> CommitmentFollowThrough:
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
