"""The follow-up checker's input: one response and its turn, as the judges read it.

A :class:`FollowUpTurn` is what one episode produced (the user's message, the turn's tool calls and its
reply, with the episode's design factors), built from a trace by :func:`turn_from_trace` or from its parts
by :func:`turn_from_parts` (the commitment gateway builds one from a deployment's request). The
``render_*`` functions write it, and a setup's card, as the checker's prompts show them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from commitbench.episodes.followup.setups import SuiteSetups, load_setups
from commitbench.episodes.followup.vocabulary import Capability, Doability, Persona, RequestCategory, SetupId
from commitbench.judges.followup.follow_through import FollowThroughRecord, items_from_audit
from commitbench.protocol import ToolCallRecord
from commitbench.traces import EpisodeTrace

__all__ = [
    "FollowUpTurn",
    "TurnToolCall",
    "render_card",
    "render_exchange",
    "render_tool_list",
    "render_turn",
    "turn_from_parts",
    "turn_from_trace",
]


class TurnToolCall(BaseModel):
    """A tool call of the turn, as the judges see it."""

    name: str = Field(description="Tool name as called.")
    arguments: str = Field(description="Arguments as JSON text (or the raw text when unparseable).")
    ok: bool = Field(description="Whether the call executed.")
    result: str = Field(description="What the tool returned (an error message when ok is False).")
    call_id: str = Field(default="", description="The call's id ('#<index>' when the agent gave none).")


class FollowUpTurn(BaseModel):
    """Everything the checker needs about one response."""

    episode_id: str = Field(description="Episode id (request:setup:variant:persona).")
    request_id: str = Field(description="The request's id.")
    category: RequestCategory = Field(description="The request's category.")
    source: str = Field(default="template", description="Where the request came from.")
    setup: SetupId = Field(description="The setup the response was produced in.")
    variant: str = Field(description="inferred or stated.")
    persona: Persona = Field(description="generic or support.")
    doability: Doability = Field(description="Doability of the request in the setup.")
    required_capabilities: list[Capability] = Field(description="What serving the request after the turn needs.")
    user_message: str = Field(description="Context and request as the user sent them.")
    reply: str = Field(description="The final reply ('' when the turn ended without one).")
    tool_calls: list[TurnToolCall] = Field(default_factory=list, description="The turn's tool calls in order.")
    request_text: str = Field(default="", description="The request alone, without its context (follow-through mode).")
    follow_through: FollowThroughRecord | None = Field(
        default=None, description="What the episode's later turns did with what this turn scheduled (follow-through "
        "mode; null otherwise).",
    )

    @property
    def called_tools(self) -> list[str]:
        """Names of the turn's successful tool calls."""
        return [c.name for c in self.tool_calls if c.ok]


def turn_from_parts(
    episode_id: str,
    factors: Mapping[str, str | int],
    user_message: str,
    calls: Sequence[ToolCallRecord],
    reply: str,
    follow_through: FollowThroughRecord | None = None,
) -> FollowUpTurn:
    """The checker's input from an episode's design factors, the user's message, the turn's calls and the reply."""
    missing = [k for k in ("request_id", "category", "setup", "variant", "persona", "doability") if k not in factors]
    if missing:
        raise ValueError(f"episode {episode_id!r} is not a follow-up episode: factors lack {missing}")
    shown: list[TurnToolCall] = []
    for index, c in enumerate(calls):
        arguments = json.dumps(c.arguments, ensure_ascii=False) if c.arguments is not None else (c.raw_arguments or "")
        shown.append(TurnToolCall(name=c.tool, arguments=arguments, ok=c.ok, result=c.result,
                                  call_id=c.call_id or f"#{index}"))
    capabilities = [Capability(v) for v in str(factors.get("required_capabilities", "")).split(",") if v]
    return FollowUpTurn(
        episode_id=episode_id,
        request_id=str(factors["request_id"]),
        category=RequestCategory(str(factors["category"])),
        source=str(factors.get("source", "template")),
        setup=SetupId(str(factors["setup"])),
        variant=str(factors["variant"]),
        persona=Persona(str(factors["persona"])),
        doability=Doability(str(factors["doability"])),
        required_capabilities=capabilities,
        user_message=user_message,
        reply=reply,
        tool_calls=shown,
        request_text=str(factors.get("request_text", "")),
        follow_through=follow_through,
    )


def _factor_time(factors: Mapping[str, str | int], name: str) -> datetime | None:
    value = factors.get(name)
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def turn_from_trace(trace: EpisodeTrace, suite: SuiteSetups | None = None) -> FollowUpTurn:
    """The checker's input from a FollowUpEnv trace (factors carry the episode's design).

    The checker reads the first turn: the only one of a single-turn episode, and the one the outcome label
    is taken from in the follow-through mode, whose later turns come in as a :class:`FollowThroughRecord`.
    """
    user = next((e.text for e in trace.events if e.kind.value == "message"), "")
    first = trace.turns[0] if trace.turns else None
    calls = list(first.calls) if first is not None else []
    reply = (first.reply or "") if first is not None else ""
    record = None
    if trace.factors.get("follow_through"):
        setups = suite or load_setups()
        record = FollowThroughRecord(
            current_time=setups.current_time, event_at=_factor_time(trace.factors, "event_at"),
            second_session_at=_factor_time(trace.factors, "second_session_at"),
            delivery_facts=bool(trace.factors.get("delivery_facts")),
            items=items_from_audit(trace.ledger_audit, setups.zone),
        )
    return turn_from_parts(trace.episode_id, trace.factors, user, calls, reply, record)


def render_turn(turn: FollowUpTurn) -> str:
    """The user message and the assistant's whole turn as the judges read it."""
    return render_exchange(turn.user_message, turn.tool_calls, turn.reply)


def render_exchange(user_message: str, tool_calls: Sequence[TurnToolCall], reply: str) -> str:
    """A user message, the assistant's tool calls and its final reply as the judges read them (any source of
    turns: an episode, or a deployment's request seen by the commitment gateway)."""
    lines = ["USER MESSAGE:", user_message, "", "ASSISTANT TURN:"]
    for call in tool_calls:
        status = "ok" if call.ok else "failed"
        lines.append(f"[tool call] {call.name}({call.arguments}) -> {status}: {call.result}")
    lines.append(f"[final reply] {reply}" if reply else "[final reply] (none)")
    return "\n".join(lines)


def render_card(setup: SetupId, persona: Persona, suite: SuiteSetups) -> str:
    """The setup's environment card: tools with descriptions and what persists after a turn."""
    tools = suite.tool_definitions(setup, persona)
    lines = ["TOOLS:"]
    lines.extend(f"- {t.name}: {t.description.strip()}" for t in tools)
    if not tools:
        lines.append("- (none)")
    lines.extend(["", "WHAT PERSISTS:", suite.stated_paragraph(setup)])
    return "\n".join(lines)


def render_tool_list(setup: SetupId, persona: Persona, suite: SuiteSetups) -> str:
    tools = suite.tool_definitions(setup, persona)
    if not tools:
        return "TOOLS: none"
    return "TOOLS:\n" + "\n".join(f"- {t.name}: {t.description.strip()}" for t in tools)
