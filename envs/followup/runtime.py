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
ticket,        at ``due_by``; without one, ``DEFAULT_TICKET_DUE``  at once: the support team (the runtime)
escalation     after it was opened                               does what the ticket asks; a human agent
                                                                 takes an escalation's case over
memory         when the user comes back in a later conversation  the agent reads it (``memory_read``) in
               (the request's second session)                    that conversation
=============  ===============================================  ===========================================

**The team is simulated.** Nobody the tested model plays acts for a person: at a ticket's due time the
support team does what the ticket asks (its summary, requested action and details are what it delivers),
and a human agent who takes over an escalation acts on its reason and on the user's request, the case it
was handed. Whether that is what was promised, when it was promised, is fixed when the ticket is created;
nothing the agent writes later counts as a person's act. The team's act is recorded like every other
event (a ``delivered`` audit event whose actor is the team, and a notice in the trace) and opens no agent
turn.

**The data source.** A deferred delivery that reports facts from outside the conversation (the weather,
a score) can only be made with facts that exist when it comes due. The request's :class:`DeliveryFacts`
are what the data tool ``look_up`` returns for a query that shares a content word with their topic; the
facts the data source handed out in a turn are recorded with that turn's delivery (``supplied``), so the
grade can tell facts a tool supplied from facts the agent made up. The team looks facts up the same way,
with the ticket's text as its query.

:meth:`FollowThroughRuntime.next_firing` says what comes due next (earliest first, then ledger id); the
environment moves the clock there and fires it (:meth:`fire`, a ``fired`` audit event with the due time;
a reminder or the team's act is delivered there and then). A task or a later conversation opens a new
agent turn with :meth:`notice`; when the turn ends, :meth:`close_turn` records a ``delivered`` event for
each fired item the turn delivered and a ``failed`` one for each it did not.
At most ``MAX_FIRINGS`` firings happen, and nothing due more than ``HORIZON`` after the current
time fires. :meth:`audit` is the ledger's whole audit trail, which the trace keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from commitbench.episodes.followup.episodes import FollowUpEpisode
from commitbench.episodes.followup.matching import content_match, content_words
from commitbench.episodes.followup.requests import DeliveryFacts
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


@dataclass(frozen=True)
class RuntimeDelivery:
    """Something the runtime delivered itself when it fired: a reminder shown, or the team's act."""

    item: KeptItem
    by: str  # reminder, or the team
    shown: str  # what the user experiences, as the trace's notice says it


@dataclass
class _TurnActivity:
    reads: set[str] = field(default_factory=set)
    supplied: list[str] = field(default_factory=list)  # facts the data source handed out in the turn


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

    def recalled(self, key: str) -> None:
        self._activity.reads.add(key)

    def look_up(self, query: str) -> str | None:
        """The data source: the request's facts when ``query`` shares a content word with their topic."""
        facts = self._facts_for(query)
        if facts is None:
            return None
        self._activity.supplied.append(facts.text)
        return facts.text

    def _facts_for(self, query: str) -> DeliveryFacts | None:
        facts = self.episode.request.facts
        if facts is None or not content_words(query) & content_words(facts.topic):
            return None
        return facts

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

    def fire(self, firing: Firing, turn: int | None) -> list[RuntimeDelivery]:
        """Move the clock to the firing and record it; returns what the runtime delivered itself (reminders
        shown, the team's acts on tickets and escalations).

        ``turn`` is the agent turn the firing opens (None: it opens none)."""
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
        delivered: list[RuntimeDelivery] = []
        for item in firing.items:
            details: dict[str, Any] = {"turn": turn, "why": firing.reason}
            if firing.reason == "event" and self.episode.request.event is not None:
                details["event"] = self.episode.request.event.text
                details["due_at"] = self.suite.aware(self.episode.request.event.at).isoformat()
            self.ledger.fire(item.ledger_id, actor=RUNTIME, reason=f"{item.kind.value} {item.handle} came due",
                             details=details)
            item.fired_turn = turn
            when = local_text(firing.at)
            if item.kind is ItemKind.REMINDER:
                self.ledger.deliver(item.ledger_id, actor=RUNTIME, reason="the reminder was shown to the user",
                                    details={"turn": turn, "content": item.text, "by": "reminder", "supplied": []})
                delivered.append(RuntimeDelivery(item, "reminder", f"Reminder ({when}): {item.text}"))
            elif item.kind in (ItemKind.TICKET, ItemKind.ESCALATION):
                delivered.append(self._team_acts(item, when, turn))
            else:
                continue
            item.delivered = True
        return delivered

    def _team_acts(self, item: KeptItem, when: str, turn: int | None) -> RuntimeDelivery:
        """The support team does what the ticket asks; a human agent acts on an escalation's case (its reason
        and the user's request). Either looks up the facts its text asks about, as the data tool would."""
        if item.kind is ItemKind.TICKET:
            content = item.text
            shown = f"Support team ({when}): acted on ticket {item.handle} as it asks: {item.text}"
            reason = f"the support team acted on ticket {item.handle} at its due time"
        else:
            content = f"{item.text} {self.episode.request.text}"
            shown = (f"Human agent ({when}): took over escalation {item.handle} ({item.text}) and acted on the "
                     f"user's request: {self.episode.request.text}")
            reason = f"a human agent took over escalation {item.handle} at its due time"
        facts = self._facts_for(content)
        supplied = [facts.text] if facts is not None else []
        if facts is not None:
            content = f"{content} {facts.text}"
            shown = f"{shown} They looked up: {facts.text}"
        self.ledger.deliver(item.ledger_id, actor=TEAM, reason=reason,
                            details={"turn": turn, "content": content, "by": TEAM, "supplied": supplied})
        return RuntimeDelivery(item, TEAM, shown)

    def needs_turn(self, firing: Firing) -> bool:
        """Whether the agent must act on the firing (a task, or a later conversation); reminders, tickets and
        escalations are delivered by the runtime."""
        return firing.reason == "session" or any(i.kind is ItemKind.TASK for i in firing.items)

    def notice(self, firing: Firing) -> str:
        """The short system event that opens the agent's turn: which task, its text, and the time."""
        when = local_text(firing.at)
        lines = []
        for item in firing.items:
            if item.kind is not ItemKind.TASK:
                continue
            if firing.reason == "event":
                event = self.episode.request.event
                assert event is not None
                lines.append(f"Scheduled task {item.handle} started because this happened ({when}): {event.text} "
                             f"Its instruction: \"{item.text}\".")
            else:
                lines.append(f"Scheduled task {item.handle} is due now ({when}). Its instruction: \"{item.text}\".")
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
        """What the turn delivered for ``item``, with the facts the data source supplied in it (and, for a
        task set off by the scripted event, the event the notice reported)."""
        supplied = list(self._activity.supplied)
        if item.kind is ItemKind.TASK:
            if not reply.strip():
                return None
            event = self.episode.request.event
            if item.on_event is not None and item.due is None and event is not None:
                supplied.insert(0, event.text)
            return {"content": reply, "by": "reply", "supplied": supplied}
        if item.kind is ItemKind.MEMORY:
            if item.handle not in self._activity.reads:
                return None
            return {"content": reply, "by": "memory_read", "supplied": supplied}
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
