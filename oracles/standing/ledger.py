"""The self-kept ledger: the agent records its own promises and what happens to them.

Two tools are added to the environment, and the ledger is shown in ``observation["context"]``
after every message (the system prompt gets a short paragraph explaining the tools):

``ledger_add(owed_to, promise, note?)``
    records a promise with status ``open``; returns its id (``L1``, ``L2``, ...).
``ledger_update(entry, status, caused_by, note?)``
    sets an entry's status to ``open``, ``released``, ``done`` or ``on_hold`` and records who
    caused the change and why.

The ledger is the agent's own belief, not the truth: every status may follow any other (a
released promise can be reopened), and nothing is checked against the chat. It is a small
in-memory model rather than :mod:`commitbench.ledger` on purpose: that engine enforces a
lifecycle with terminal states (a cancelled commitment never reopens) and standing rules, which
would correct the very mistakes this intervention measures.

Bad calls (unknown entry, empty text, text too long, too many entries, a status outside the four)
come back to the agent as tool errors, counted in the trace; they never raise. The ledger after
any sequence of calls is :func:`replay_ledger` of the successful calls, so it can be rebuilt from
a trace alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any, ClassVar, Literal

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from commitbench.envs import STANDING_ENV_ID
from commitbench.extras import EnvExtras, PromptSection
from commitbench.oracles.base import Intervention, prompt_text, text_hash
from commitbench.oracles.standing.stores import STATUS_STORES
from commitbench.protocol import ToolCallRecord
from commitbench.tools import ToolArgs, ToolError, bound_tools, declared_tools, tool

MAX_ENTRIES = 20
MAX_TEXT = 300


class LedgerStatus(str, Enum):
    """What the agent believes about a promise."""

    OPEN = "open"
    RELEASED = "released"
    DONE = "done"
    ON_HOLD = "on_hold"


class LedgerChange(BaseModel):
    """One status the agent recorded for an entry."""

    model_config = ConfigDict(frozen=True)

    status: LedgerStatus = Field(description="Status set by this change.")
    caused_by: str = Field(description="Who caused the change, as the agent wrote it.")
    note: str = Field(default="", description="The agent's note.")


class LedgerEntry(BaseModel):
    """One promise in the ledger, with its history (the last change is the current state)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Entry id, L1, L2, ...")
    owed_to: str = Field(description="Who the promise is owed to, as the agent wrote it.")
    promise: str = Field(description="What was promised, in the agent's words.")
    history: tuple[LedgerChange, ...] = Field(description="Every recorded status, oldest first (never empty).")

    @property
    def current(self) -> LedgerChange:
        return self.history[-1]


class AgentLedger(BaseModel):
    """The whole ledger; immutable, every operation returns a new one."""

    model_config = ConfigDict(frozen=True)

    entries: tuple[LedgerEntry, ...] = Field(default=(), description="Entries in the order they were added.")

    def get(self, entry_id: str) -> LedgerEntry | None:
        return next((e for e in self.entries if e.id == entry_id), None)


def _text(args: dict[str, Any], key: str, required: bool) -> tuple[str, str | None]:
    value = args.get(key, "")
    if not isinstance(value, str):
        return "", f"'{key}' must be a string"
    value = " ".join(value.split())
    if required and not value:
        return "", f"'{key}' must not be empty"
    if len(value) > MAX_TEXT:
        return "", f"'{key}' is longer than {MAX_TEXT} characters"
    return value, None


# An entry number longer than this is no entry of a ledger (and would not convert to an int quickly).
_MAX_ID_DIGITS = 9


def normalise_entry_id(written: Any) -> str | None:
    """'L2', 'l2', '#2', '# L 2', '2' and 2 all mean entry L2; anything else is None."""
    if isinstance(written, bool):
        return None
    if isinstance(written, int):
        return f"L{written}" if abs(written) < 10**_MAX_ID_DIGITS else None
    if not isinstance(written, str):
        return None
    # Read by hand, not by a pattern with three optional runs of spaces (cubic time on a string of spaces).
    rest = written.strip().removeprefix("#").lstrip()
    if rest[:1] in ("L", "l"):
        rest = rest[1:].lstrip()
    if not rest.isdecimal() or len(rest) > _MAX_ID_DIGITS:
        return None
    return f"L{int(rest)}"


def ledger_add(ledger: AgentLedger, args: dict[str, Any]) -> tuple[AgentLedger, bool, str]:
    """Record a new open promise. Returns (new ledger, ok, message for the agent)."""
    owed_to, problem = _text(args, "owed_to", required=True)
    promise, problem2 = _text(args, "promise", required=True)
    note, problem3 = _text(args, "note", required=False)
    problem = problem or problem2 or problem3
    if problem:
        return ledger, False, f"ledger_add: {problem}"
    if len(ledger.entries) >= MAX_ENTRIES:
        return ledger, False, f"ledger_add: the ledger is full ({MAX_ENTRIES} entries); update existing entries"
    entry = LedgerEntry(
        id=f"L{len(ledger.entries) + 1}",
        owed_to=owed_to,
        promise=promise,
        history=(LedgerChange(status=LedgerStatus.OPEN, caused_by=owed_to, note=note),),
    )
    message = f"Added {entry.id}: {promise} (owed to {owed_to}, open)."
    return AgentLedger(entries=(*ledger.entries, entry)), True, message


def ledger_update(ledger: AgentLedger, args: dict[str, Any]) -> tuple[AgentLedger, bool, str]:
    """Set an entry's status. Returns (new ledger, ok, message for the agent)."""
    entry_id = normalise_entry_id(args.get("entry"))
    if entry_id is None:
        return ledger, False, f"ledger_update: 'entry' must be an entry id such as L1, got {args.get('entry')!r}"
    entry = ledger.get(entry_id)
    if entry is None:
        known = ", ".join(e.id for e in ledger.entries) or "none yet; add one with ledger_add"
        return ledger, False, f"ledger_update: there is no entry {entry_id} (entries: {known})"
    try:
        status = LedgerStatus(args.get("status"))
    except ValueError:
        allowed = ", ".join(s.value for s in LedgerStatus)
        return ledger, False, f"ledger_update: 'status' must be one of {allowed}, got {args.get('status')!r}"
    caused_by, problem = _text(args, "caused_by", required=True)
    note, problem2 = _text(args, "note", required=False)
    if problem or problem2:
        return ledger, False, f"ledger_update: {problem or problem2}"
    change = LedgerChange(status=status, caused_by=caused_by, note=note)
    updated = entry.model_copy(update={"history": (*entry.history, change)})
    entries = tuple(updated if e.id == entry_id else e for e in ledger.entries)
    return AgentLedger(entries=entries), True, f"{entry_id} is now {status.value} (caused by {caused_by})."


def apply_call(ledger: AgentLedger, tool: str, args: dict[str, Any]) -> tuple[AgentLedger, bool, str]:
    if tool == "ledger_add":
        return ledger_add(ledger, args)
    if tool == "ledger_update":
        return ledger_update(ledger, args)
    return ledger, False, f"{tool} is not a ledger tool"


def replay_ledger(calls: Iterable[ToolCallRecord]) -> AgentLedger:
    """The ledger after the successful ledger calls among ``calls`` (a trace's tool calls)."""
    ledger = AgentLedger()
    for call in calls:
        if call.ok and call.tool in LEDGER_TOOL_NAMES and call.arguments is not None:
            ledger, _, _ = apply_call(ledger, call.tool, call.arguments)
    return ledger


def recorded_release(calls: Iterable[ToolCallRecord]) -> bool:
    """Whether the agent's ledger ever set an entry to ``released`` (from a trace's tool calls)."""
    ledger = replay_ledger(calls)
    return any(change.status is LedgerStatus.RELEASED for entry in ledger.entries for change in entry.history)


def render_ledger(ledger: AgentLedger) -> str:
    """The ledger as the agent sees it."""
    if not ledger.entries:
        return "Your commitment ledger is empty. Record a promise with ledger_add."
    lines = ["Your commitment ledger:"]
    for entry in ledger.entries:
        current = entry.current
        line = (
            f"- {entry.id}: {entry.promise} | owed to {entry.owed_to} | status {current.status.value} "
            f"| last changed by {current.caused_by}"
        )
        if current.note:
            line += f" | note: {current.note}"
        lines.append(line)
        if len(entry.history) > 1:
            steps = " -> ".join(f"{c.status.value} ({c.caused_by})" for c in entry.history)
            lines.append(f"  history: {steps}")
    return "\n".join(lines)


_NOTE = "A short note (optional)."


class LedgerAddArgs(ToolArgs):
    owed_to: str = Field(description="The person the promise is owed to.")
    promise: str = Field(description="What you promised, in a few words.")
    note: str | None = Field(default=None, description=_NOTE)


class LedgerUpdateArgs(ToolArgs):
    entry: str = Field(description="Entry id, for example L1.")
    status: Literal["open", "released", "done", "on_hold"] = Field(description="open, released, done or on_hold.")
    caused_by: str = Field(description="The person who caused the change.")
    note: str | None = Field(default=None, description=_NOTE)


class SelfKeptLedger(Intervention):
    """Adds ledger_add / ledger_update and shows the agent's ledger after every message."""

    kind: ClassVar[str] = "ledger"
    slot: ClassVar[str] = "ledger"
    slot_plural: ClassVar[str] = "ledgers"
    order: ClassVar[int] = 20
    env_ids: ClassVar[frozenset[str]] = frozenset({STANDING_ENV_ID})
    languages: ClassVar[frozenset[str] | None] = frozenset({"en"})  # its tools and notes are English

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        self.ledger = AgentLedger()
        super().__init__(env)

    def param(self) -> str:
        return "self-kept"

    @classmethod
    def refuses(cls, name: str, other: type[Intervention], other_name: str) -> str | None:
        level = other_name.partition(":")[2]
        if other.kind == "oracle" and level in STATUS_STORES:
            return (
                f"{other_name} and the self-kept ledger both show the promise's status; "
                "combine the ledger with at most oracle:B1, oracle:B2 or oracle:B4"
            )
        return None

    @tool()
    def ledger_add(self, args: LedgerAddArgs) -> str:
        """Add a promise you made to your commitment ledger, with status open. Returns the entry id."""
        self.ledger, ok, message = ledger_add(self.ledger, args.model_dump(exclude_none=True))
        if not ok:
            raise ToolError(message)
        return message

    @tool()
    def ledger_update(self, args: LedgerUpdateArgs) -> str:
        """Change the status of a ledger entry and record who caused the change."""
        self.ledger, ok, message = ledger_update(self.ledger, args.model_dump(exclude_none=True))
        if not ok:
            raise ToolError(message)
        return message

    def extras(self) -> EnvExtras:
        self.ledger = AgentLedger()
        instructions = prompt_text("ledger_instructions.txt")
        tools = tuple(bound_tools(self))
        return EnvExtras(
            sections=(PromptSection(source=self.name, order=self.order, text=instructions),),
            tools=tools,
            prompt_hashes={
                "intervention:ledger": text_hash(instructions, *(t.spec.model_dump_json() for t in tools))
            },
        )

    def context_section(self) -> str:
        return render_ledger(self.ledger)


LEDGER_TOOL_NAMES = frozenset(spec.name for spec, _ in declared_tools(SelfKeptLedger))
