"""The follow-through runtime: what the agent left for later is kept in the commitment ledger and set off.

In the follow-through mode the follow-up environment hands the suite's tools a :class:`FollowThroughRuntime`
as their keeper (:class:`commitbench.episodes.followup.tools.Keeper`). Every successful call that leaves
something for later becomes a ledger commitment on a simulated clock that starts at the episode's current
time (in the user's time zone):

=============  ===============================================  ===========================================
kind           comes due                                         delivered when
=============  ===============================================  ===========================================
task           at ``run_at``; or, for ``on_event``, when the    the agent's turn that the firing opens
               episode's scripted event happens and the task's  ends with a reply to the user
               event description matches it
reminder       at ``remind_at``                                  at once: the runtime shows the user the
                                                                 reminder's message (the tool says so)
ticket,        at ``due_by``; without one, ``DEFAULT_TICKET_DUE``  the agent updates it (``update_ticket``)
escalation     after it was opened                               in the turn the firing opens
memory         when the user comes back in a later conversation  the agent reads it (``memory_read``) in
               (the request's second session)                    that conversation
=============  ===============================================  ===========================================

:meth:`FollowThroughRuntime.next_firing` says what comes due next (earliest first, then ledger id); the
environment moves the clock there, fires it (:meth:`fire`, a ``fired`` audit event with the due time)
and opens a new agent turn with :meth:`notice`; when the turn ends, :meth:`close_turn` records a
``delivered`` event for each fired item the turn delivered and a ``failed`` one for each it did not.
At most ``MAX_FIRINGS`` agent turns are opened, and nothing due more than ``HORIZON`` after the current
time fires. :meth:`audit` is the ledger's whole audit trail, which the trace keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from commitbench.episodes.followup.episodes import FollowUpEpisode
from commitbench.episodes.followup.matching import content_match, content_words
from commitbench.episodes.followup.setups import SuiteSetups
from commitbench.ledger import AuditEvent, CommitmentStatus, Ledger, ManualClock, NewCommitment

ASSISTANT = "assistant"
RUNTIME = "runtime"
USER = "user"
TEAM = "support team"
NEXT_SESSION = "the user's next conversation"
# A ticket or escalation without a due time comes due this long after it was opened (the team's response time).
DEFAULT_TICKET_DUE = timedelta(hours=24)
MAX_FIRINGS = 6
HORIZON = timedelta(days=400)


class ItemKind(str, Enum):
    """What a call left for later."""

    TASK = "task"
    REMINDER = "reminder"
    MEMORY = "memory"
    TICKET = "ticket"
    ESCALATION = "escalation"


@dataclass
class KeptItem:
    """One ledger commitment and where it came from."""

    ledger_id: int
    kind: ItemKind
    handle: str
    text: str
    turn: int
    call_id: str
    due: datetime | None  # local time
    on_event: str | None
    fired_turn: int | None = None
    delivered: bool = False


@dataclass(frozen=True)
class Firing:
    """What comes due next: when, why, and which items (a later conversation sets off every memory at once)."""

    at: datetime  # local time
    items: tuple[KeptItem, ...]
    reason: str  # due, event, session


@dataclass
class _TurnActivity:
    updates: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    reads: set[str] = field(default_factory=set)


def local_text(moment: datetime) -> str:
    """A moment as the notices write it: ``Friday 2 October 2026, 09:00``."""
    return f"{moment:%A} {moment.day} {moment:%B %Y}, {moment:%H:%M}"


class FollowThroughRuntime:
    """Keeps one episode's scheduled work in a ledger on a simulated clock, and sets it off."""

    def __init__(self, episode: FollowUpEpisode, suite: SuiteSetups) -> None:
        self.episode = episode
        self.suite = suite
        self.clock = ManualClock(suite.aware(suite.current_time))
        self.ledger = Ledger(":memory:", clock=self.clock)
        self.items: list[KeptItem] = []
        self.turn = 0
        self.call_id = ""
        self.firings = 0
        self.session = 1
        self._activity = _TurnActivity()
        self._session_done = False
        self._event_done = False

    def close(self) -> None:
        self.ledger.close()

    # ------------------------------------------------------------------------------- the clock
    def now(self) -> datetime:
        """The simulated current time in the user's local time (no zone attached), for the tools."""
        return self.clock.now().astimezone(self.suite.zone).replace(tzinfo=None)

    # ------------------------------------------------------------------------------- the keeper
    def keep(
        self, kind: str, handle: str, text: str, due: datetime | None = None, on_event: str | None = None
    ) -> None:
        item_kind = ItemKind(kind)
        if item_kind in (ItemKind.TICKET, ItemKind.ESCALATION) and due is None:
            due = self.now() + DEFAULT_TICKET_DUE
        condition = on_event if on_event else (NEXT_SESSION if item_kind is ItemKind.MEMORY else None)
        debtor = TEAM if item_kind in (ItemKind.TICKET, ItemKind.ESCALATION) else ASSISTANT
        details: dict[str, Any] = {"kind": item_kind.value, "handle": handle, "turn": self.turn,
                                   "call_id": self.call_id}
        if on_event:
            details["on_event"] = on_event
        commitment = self.ledger.add(
            NewCommitment(debtor=debtor, creditor=USER, action=(text.strip() or handle)[:2000], condition=condition,
                          due_at=self.suite.aware(due) if due is not None else None),
            actor=ASSISTANT, reason=f"kept from the {item_kind.value} call {self.call_id or '(no id)'}",
            details=details,
        )
        self.items.append(KeptItem(commitment.id, item_kind, handle, text, self.turn, self.call_id, due, on_event))

    def updated(self, handle: str, status: str, note: str) -> str | None:
        self._activity.updates.setdefault(handle, []).append((status, note))
        return None

    def recalled(self, key: str) -> None:
        self._activity.reads.add(key)

    # ------------------------------------------------------------------------------- firing
    def _open(self, item: KeptItem) -> bool:
        return item.fired_turn is None and self.ledger.get(item.ledger_id).status is CommitmentStatus.PENDING

    def _event_matches(self, item: KeptItem) -> bool:
        event = self.episode.request.event
        if event is None or item.on_event is None:
            return False
        words = content_words(f"{event.text} {self.episode.request.text}")
        return content_match(item.on_event, words).matched and bool(content_words(item.on_event))

    def next_firing(self) -> Firing | None:
        """What comes due next, or None (nothing left, the bound on firings is reached, or it is too far)."""
        if self.firings >= MAX_FIRINGS:
            return None
        now = self.now()
        horizon = self.suite.current_time + HORIZON
        candidates: list[Firing] = []
        for item in self.items:
            if not self._open(item) or item.kind is ItemKind.MEMORY:
                continue
            if item.due is not None:
                candidates.append(Firing(max(item.due, now), (item,), "due"))
            elif item.on_event is not None and not self._event_done and self._event_matches(item):
                event = self.episode.request.event
                assert event is not None
                if event.at >= now:
                    candidates.append(Firing(event.at, (item,), "event"))
        session = self.episode.request.second_session
        if session is not None and not self._session_done and self._remembers() and session.at >= now:
            memories = tuple(i for i in self.items if i.kind is ItemKind.MEMORY and self._open(i))
            candidates.append(Firing(session.at, memories, "session"))
        candidates = [c for c in candidates if c.at <= horizon]
        if not candidates:
            return None
        return min(candidates, key=lambda c: (c.at, c.items[0].ledger_id if c.items else 0))

    def _remembers(self) -> bool:
        return self.suite.setups[self.episode.setup].properties.remembers_across_sessions

    def fire(self, firing: Firing, turn: int | None) -> list[KeptItem]:
        """Move the clock to the firing and record it; returns the reminders the runtime delivered itself.

        ``turn`` is the agent turn the firing opens (None: it opens none, a reminder alone)."""
        self.clock.set(self.suite.aware(firing.at))
        self.firings += 1
        if turn is not None:
            self.turn = turn
            self._activity = _TurnActivity()
        if firing.reason == "session":
            self._session_done = True
            self.session += 1
        if firing.reason == "event":
            self._event_done = True
        delivered: list[KeptItem] = []
        for item in firing.items:
            details: dict[str, Any] = {"turn": turn, "why": firing.reason}
            if firing.reason == "event" and self.episode.request.event is not None:
                details["event"] = self.episode.request.event.text
                details["due_at"] = self.suite.aware(self.episode.request.event.at).isoformat()
            self.ledger.fire(item.ledger_id, actor=RUNTIME, reason=f"{item.kind.value} {item.handle} came due",
                             details=details)
            item.fired_turn = turn
            if item.kind is ItemKind.REMINDER:
                self.ledger.deliver(item.ledger_id, actor=RUNTIME, reason="the reminder was shown to the user",
                                    details={"turn": turn, "content": item.text, "by": "reminder"})
                item.delivered = True
                delivered.append(item)
        return delivered

    def needs_turn(self, firing: Firing) -> bool:
        """Whether the agent must act on the firing (a reminder alone delivers itself)."""
        return firing.reason == "session" or any(i.kind is not ItemKind.REMINDER for i in firing.items)

    def notice(self, firing: Firing) -> str:
        """The short system event that opens the agent's turn: which task, its text, and the time."""
        when = local_text(firing.at)
        lines = []
        for item in firing.items:
            if item.kind is ItemKind.REMINDER:
                continue
            if item.kind is ItemKind.TASK and firing.reason == "event":
                event = self.episode.request.event
                assert event is not None
                lines.append(f"Scheduled task {item.handle} started because this happened ({when}): {event.text} "
                             f"Its instruction: \"{item.text}\".")
            elif item.kind is ItemKind.TASK:
                lines.append(f"Scheduled task {item.handle} is due now ({when}). Its instruction: \"{item.text}\".")
            elif item.kind is ItemKind.TICKET:
                lines.append(f"Ticket {item.handle} is due now ({when}): \"{item.text}\".")
            elif item.kind is ItemKind.ESCALATION:
                lines.append(f"Escalation {item.handle} is due now ({when}): \"{item.text}\".")
        if firing.reason == "session":
            keys = [i.handle for i in self.items if i.kind is ItemKind.MEMORY and i.fired_turn is not None
                    and i.fired_turn == self.turn]
            if keys:
                lines.append("Saved in this user's long-term memory: " + ", ".join(f"\"{k}\"" for k in keys) + ".")
        return "\n".join(lines)

    def close_turn(self, turn: int, reply: str) -> None:
        """Record, for every item fired into ``turn``, whether the turn delivered it (see the module docstring);
        ``reply`` is the turn's reply to the user ('' when it ended without one)."""
        for item in self.items:
            if item.fired_turn != turn or item.delivered:
                continue
            content = self._delivery(item, reply)
            if content is not None:
                self.ledger.deliver(item.ledger_id, actor=ASSISTANT, reason=f"delivered in turn {turn}",
                                    details={"turn": turn, **content})
                item.delivered = True
            else:
                self.ledger.fail(item.ledger_id, actor=RUNTIME, reason=f"fired in turn {turn}; nothing was delivered")

    def _delivery(self, item: KeptItem, reply: str) -> dict[str, Any] | None:
        if item.kind is ItemKind.TASK:
            return {"content": reply, "by": "reply"} if reply.strip() else None
        if item.kind in (ItemKind.TICKET, ItemKind.ESCALATION):
            updates = self._activity.updates.get(item.handle)
            if not updates:
                return None
            status, note = updates[-1]
            return {"content": " ".join([note, reply]).strip(), "by": "update_ticket", "status": status}
        if item.kind is ItemKind.MEMORY:
            if item.handle not in self._activity.reads:
                return None
            return {"content": reply, "by": "memory_read"}
        return None

    def finish(self) -> None:
        """Items fired into a turn that never closed (the episode was cut short) are recorded as failed."""
        for item in self.items:
            if item.fired_turn is not None and not item.delivered:
                commitment = self.ledger.get(item.ledger_id)
                if commitment.is_open:
                    self.ledger.fail(item.ledger_id, actor=RUNTIME, reason="the episode ended before a delivery")

    def audit(self) -> list[AuditEvent]:
        """Every audit event of the episode's ledger, oldest first."""
        events: list[AuditEvent] = []
        for item in self.items:
            events.extend(self.ledger.history(item.ledger_id))
        return sorted(events, key=lambda e: e.seq)
