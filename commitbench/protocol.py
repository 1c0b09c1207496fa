"""The turn protocol every commitbench environment speaks.

An *action* is one step of an assistant turn: a tool call, a final reply (plain text that
ends the turn), or ending the turn silently. Its canonical wire form is a JSON string, so
the action space is a text space and anything an agent (or a fuzzer) sends can be
represented; ``env.step`` also accepts a ``dict`` or an :class:`AgentAction`.

Wire forms::

    {"tool": "send_dm", "arguments": {"to": "Alice", "text": "..."}, "id": "call_1"}
    {"tool": "send_dm", "arguments": "{\\"to\\": \\"Alice\\"}"}     # raw JSON string kept as sent
    {"reply": "Sure, done."}
    {"end_turn": true}

Nothing here raises on bad input: :func:`parse_action` turns garbage into an action of kind
``invalid`` carrying the reason, which environments record as a tool error.

An *observation* is a dict with ``events`` (a tuple of event dicts, see :class:`Event`) and
``context`` (dynamic state an intervention shows after every message; empty by default).
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_TEXT = 20_000


class ActionKind(str, Enum):
    """What an assistant step does."""

    TOOL_CALL = "tool_call"
    REPLY = "reply"
    END_TURN = "end_turn"
    INVALID = "invalid"


class Revision(BaseModel):
    """An intervention replaced the agent's final reply: by whom, how, and what the agent wrote."""

    model_config = ConfigDict(frozen=True)

    by: str = Field(description="Name of the intervention that replaced the reply.")
    kind: str = Field(description="What it did, e.g. 'claim_guarded' or 'rewritten'.")
    original: str = Field(description="The reply the agent wrote.")
    note: str = Field(default="", description="Why, in one sentence.")


class AgentAction(BaseModel):
    """One parsed assistant step."""

    model_config = ConfigDict(frozen=True)

    kind: ActionKind = Field(description="Tool call, final reply, silent end of turn, or unparseable input.")
    tool: str | None = Field(default=None, description="Tool name for a tool call.")
    arguments: dict[str, Any] | None = Field(
        default=None, description="Parsed tool arguments; None when they were missing or not a JSON object."
    )
    raw_arguments: str | None = Field(default=None, description="Arguments exactly as the agent sent them.")
    call_id: str | None = Field(default=None, description="The agent's id for this tool call, if any.")
    text: str | None = Field(default=None, description="Reply text for a reply action.")
    error: str | None = Field(default=None, description="Why the action could not be parsed (kind=invalid).")
    revision: Revision | None = Field(
        default=None,
        description="Set by an intervention that replaced the agent's reply (never read from the wire form).",
    )

    def to_wire(self) -> str:
        """The canonical JSON string for this action."""
        if self.kind is ActionKind.TOOL_CALL:
            payload: dict[str, Any] = {"tool": self.tool}
            payload["arguments"] = self.arguments if self.arguments is not None else (self.raw_arguments or "")
            if self.call_id:
                payload["id"] = self.call_id
            return json.dumps(payload, ensure_ascii=False)
        if self.kind is ActionKind.REPLY:
            return json.dumps({"reply": self.text or ""}, ensure_ascii=False)
        if self.kind is ActionKind.END_TURN:
            return json.dumps({"end_turn": True})
        return json.dumps({"invalid": self.error or ""}, ensure_ascii=False)


def tool_call(tool: str, arguments: dict[str, Any] | str | None = None, call_id: str | None = None) -> AgentAction:
    """Build a tool-call action (arguments may be a dict or the raw JSON string the model produced)."""
    return parse_action({"tool": tool, "arguments": arguments if arguments is not None else {}, "id": call_id})


def reply(text: str, revision: Revision | None = None) -> AgentAction:
    return AgentAction(kind=ActionKind.REPLY, text=text[:MAX_TEXT], revision=revision)


def end_turn() -> AgentAction:
    return AgentAction(kind=ActionKind.END_TURN)


def _invalid(reason: str, raw: Any) -> AgentAction:
    shown = raw if isinstance(raw, str) else repr(raw)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    return AgentAction(kind=ActionKind.INVALID, error=f"{reason}: {shown}")


def _parse_arguments(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Returns (parsed object or None, raw string as sent)."""
    if isinstance(value, dict):
        return value, None
    if value is None:
        return {}, None
    if isinstance(value, str):
        if not value.strip():
            return {}, value
        try:
            parsed = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return None, value
        return (parsed if isinstance(parsed, dict) else None), value
    return None, repr(value)


def parse_action(raw: Any) -> AgentAction:
    """Parse any input into an :class:`AgentAction`; never raises."""
    if isinstance(raw, AgentAction):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return _invalid("empty action", raw)
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            return _invalid("action is not JSON", raw)
    elif isinstance(raw, dict):
        data = raw
    else:
        return _invalid(f"action must be a JSON string or dict, got {type(raw).__name__}", raw)
    if not isinstance(data, dict):
        return _invalid("action JSON must be an object", raw)
    if "tool" in data:
        name = data.get("tool")
        if not isinstance(name, str) or not name.strip():
            return _invalid("tool name must be a non-empty string", raw)
        arguments, raw_args = _parse_arguments(data.get("arguments"))
        call_id = data.get("id")
        return AgentAction(
            kind=ActionKind.TOOL_CALL,
            tool=name.strip(),
            arguments=arguments,
            raw_arguments=raw_args,
            call_id=str(call_id) if call_id is not None else None,
        )
    if "reply" in data:
        text = data.get("reply")
        if not isinstance(text, str):
            return _invalid("reply must be a string", raw)
        return AgentAction(kind=ActionKind.REPLY, text=text[:MAX_TEXT])
    if data.get("end_turn") is True:
        return AgentAction(kind=ActionKind.END_TURN)
    return _invalid("action needs one of the keys 'tool', 'reply' or 'end_turn'", raw)


class EventKind(str, Enum):
    """Kinds of things an agent observes."""

    SYSTEM = "system"  # the system prompt and workspace description (first observation)
    MESSAGE = "message"  # a workspace message from a person
    ASSISTANT = "assistant"  # a message the assistant itself posted (including the pre-seeded promise)
    TOOL_RESULT = "tool_result"  # the result of the assistant's tool call
    NOTICE = "notice"  # an environment notice (for example: the turn's tool-call budget is spent)
    REVISION_REQUEST = "revision_request"  # an intervention asks the agent to rewrite its last reply


ANNOTATION_FIELDS: tuple[str, ...] = ("act", "subject", "rank")


class Event(BaseModel):
    """One event of an episode, as the trace keeps it.

    ``act``, ``subject`` and ``rank`` are *script annotations*: what a scripted message does, whom
    it is about and how senior its sender is. They stay in the trace for signals and judges, but a
    participant does not see them, so :meth:`to_obs` leaves them out; :meth:`annotation` gives
    them to the explicit privileged channel (:class:`commitbench.envs.privileged.RevealScriptAnnotations`).
    """

    kind: EventKind = Field(description="What sort of event this is.")
    step: int = Field(description="Script step at which the event happened (0-based).")
    sender: str = Field(default="", description="Display name of who produced it ('' for tool results).")
    role: str = Field(default="", description="The sender's job title in the workspace.")
    rank: int = Field(default=0, description="The sender's seniority (higher outranks lower).")
    channel: str = Field(default="", description="Where it appeared: '#channel' or 'dm:<name>'.")
    text: str = Field(default="", description="The message text or tool result text.")
    act: str = Field(default="", description="Scripted speech act (request, cancel, relay, claim, ...); '' if none.")
    subject: str = Field(default="", description="Person the act is about (delegate named, creditor reported).")
    tool: str = Field(default="", description="Tool name for tool results.")
    ok: bool = Field(default=True, description="False when a tool call failed or was rejected.")
    call_id: str = Field(default="", description="The agent's id of the tool call this result answers.")

    def to_obs(self) -> dict[str, Any]:
        """What a participant sees of the event (no script annotations)."""
        return {
            "kind": self.kind.value,
            "step": self.step,
            "sender": self.sender,
            "role": self.role,
            "channel": self.channel,
            "text": self.text,
            "tool": self.tool,
            "ok": int(self.ok),
            "call_id": self.call_id,
        }

    def annotation(self) -> dict[str, Any]:
        """The script annotations of the event (the privileged channel's view)."""
        return {"act": self.act, "subject": self.subject, "rank": self.rank}


class ToolSpec(BaseModel):
    """A tool the agent may call, described once and exported as an OpenAI function schema."""

    name: str = Field(description="Function name the model calls.")
    description: str = Field(description="What the tool does, for the model.")
    parameters: dict[str, Any] = Field(description="JSON schema (type object) of the arguments.")
    is_write: bool = Field(default=False, description="True when the tool changes the world (sends, books, saves).")

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class ToolCallRecord(BaseModel):
    """A tool call as the environment executed (or rejected) it."""

    step: int = Field(description="Script step of the turn in which the call was made.")
    turn: int = Field(description="Index of the agent turn (0-based).")
    tool: str = Field(description="Tool name as the agent sent it.")
    arguments: dict[str, Any] | None = Field(default=None, description="Parsed arguments (None if unparseable).")
    raw_arguments: str | None = Field(default=None, description="Raw argument string, when one was sent.")
    call_id: str = Field(default="", description="The agent's call id.")
    ok: bool = Field(description="Whether the call executed.")
    result: str = Field(description="Result text returned to the agent (an error message when ok is False).")
    is_write: bool = Field(default=False, description="Whether the tool changes the world.")
    error_kind: str = Field(default="", description="unknown_tool, bad_arguments, turn_limit, failed, ... ('' if ok).")
