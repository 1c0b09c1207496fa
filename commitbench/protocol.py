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

Model output is made safe here, where it enters the harness, so that every trace can be written:
lone surrogates (``"\\udcff"`` in JSON decodes to a character no UTF-8 file can hold) are written as
``\\uXXXX`` escapes in every text, name and id (:func:`escape_surrogates`), and tool arguments that
are larger than a bound (:data:`commitbench.bounds.DEFAULT_MAX_ARGUMENT_BYTES` unless the model's
``max_argument_bytes`` says otherwise), nested deeper than :data:`MAX_JSON_DEPTH`, hold a lone
surrogate or a value JSON cannot carry are refused with the reason in ``arguments_error``
(:func:`parse_json_object`, :func:`json_value_problem`), which the environment records as a
``bad_arguments`` tool error; of arguments too large only the beginning is kept.

An *observation* is a dict with ``events`` (a tuple of event dicts, see :class:`Event`) and
``context`` (dynamic state an intervention shows after every message; empty by default).
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES, clip, utf8_size

MAX_TEXT = 20_000
# Containers nested inside one another in tool arguments; real tools take flat objects.
MAX_JSON_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as a ``\\uXXXX`` escape, so that it encodes as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def _surrogate_in(text: str) -> str | None:
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def json_value_problem(value: Any, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why a decoded JSON value cannot be recorded as it is, or None when it can.

    Refused: containers nested deeper than ``max_depth``, strings or keys holding a lone surrogate,
    and values of a type JSON does not have. Walks the value with an explicit stack (no recursion).
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            code = _surrogate_in(item)
            if code is not None:
                return f"hold a lone surrogate ({code}), which no UTF-8 text can carry"
        elif isinstance(item, dict | list | tuple):
            if depth > max_depth:
                return f"are nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return f"have a key of type {type(key).__name__}, not a string"
                    code = _surrogate_in(key)
                    if code is not None:
                        return f"hold a lone surrogate ({code}) in a key, which no UTF-8 text can carry"
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        elif item is not None and not isinstance(item, bool | int | float):
            return f"hold a value of type {type(item).__name__}, which JSON does not have"
    return None


def arguments_too_large(raw: str, max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES) -> str | None:
    """Why tool arguments are too large to use (more than ``max_bytes`` in UTF-8), or None."""
    size = utf8_size(raw)
    if size <= max_bytes:
        return None
    return f"arguments are {size:,} bytes, more than the {max_bytes:,} a tool call may carry"


def parse_json_object(
    raw: str, max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> tuple[dict[str, Any] | None, str | None]:
    """Decode tool arguments sent as JSON text: ``(object, None)`` or ``(None, why not)``; never raises.

    Empty text means no arguments. Text larger than ``max_bytes``, text nested too deep for the
    decoder, text that is not JSON, a value that is not an object and a value
    :func:`json_value_problem` refuses are errors.
    """
    too_large = arguments_too_large(raw, max_bytes)
    if too_large is not None:
        return None, too_large
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except RecursionError:
        return None, f"arguments are nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError as exc:  # JSONDecodeError, and integers too long to convert
        return None, f"arguments are not valid JSON: {escape_surrogates(str(exc))[:300]}"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    problem = json_value_problem(value)
    if problem is not None:
        return None, f"arguments {problem}"
    return value, None


class ActionKind(str, Enum):
    """What an assistant step does."""

    TOOL_CALL = "tool_call"
    REPLY = "reply"
    END_TURN = "end_turn"
    INVALID = "invalid"


# The tool a model calls to end its turn without a reply (the step it stands for is ActionKind.END_TURN): the
# chat agent offers it, and the standing environment's workspace has it.
END_TURN_TOOL = "end_turn"


class Revision(BaseModel):
    """An intervention replaced the agent's final reply: by whom, how, and what the agent wrote."""

    model_config = ConfigDict(frozen=True)

    by: str = Field(description="Name of the intervention that replaced the reply.")
    kind: str = Field(description="What it did, e.g. 'claim_guarded' or 'rewritten'.")
    original: str = Field(description="The reply the agent wrote.")
    note: str = Field(default="", description="Why, in one sentence.")
    flagged_by: str = Field(
        default="", description="The checker whose verdict set it off ('rules', 'llm:<model>'), when one did."
    )


class AgentAction(BaseModel):
    """One parsed assistant step."""

    model_config = ConfigDict(frozen=True)

    kind: ActionKind = Field(description="Tool call, final reply, silent end of turn, or unparseable input.")
    tool: str | None = Field(default=None, description="Tool name for a tool call.")
    arguments: dict[str, Any] | None = Field(
        default=None, description="Parsed tool arguments; None when they were missing or not a JSON object."
    )
    raw_arguments: str | None = Field(
        default=None, description="Arguments as the agent sent them (lone surrogates escaped)."
    )
    arguments_error: str | None = Field(
        default=None, description="Why the arguments cannot be used (not JSON, too deep, ...), when they cannot."
    )
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


def refused_tool_call(tool: str, raw_arguments: str, reason: str, call_id: str | None = None) -> AgentAction:
    """A tool call whose arguments the agent already found unusable (``reason``): the environment records
    it as a ``bad_arguments`` tool error with that reason, keeping at most the beginning of the arguments."""
    name = tool.strip() or "unnamed_tool"
    return AgentAction(
        kind=ActionKind.TOOL_CALL,
        tool=escape_surrogates(name[:MAX_TEXT]),
        raw_arguments=escape_surrogates(clip(raw_arguments, DEFAULT_MAX_ARGUMENT_BYTES)),
        arguments_error=escape_surrogates(reason),
        call_id=None if call_id is None else escape_surrogates(call_id[:200]),
    )


def reply(text: str, revision: Revision | None = None) -> AgentAction:
    return AgentAction(kind=ActionKind.REPLY, text=escape_surrogates(text[:MAX_TEXT]), revision=revision)


def end_turn() -> AgentAction:
    return AgentAction(kind=ActionKind.END_TURN)


def _invalid(reason: str, raw: Any) -> AgentAction:
    shown = raw[:200] if isinstance(raw, str) else _short_repr(raw)
    if isinstance(raw, str) and len(raw) > 200:
        shown += "..."
    return AgentAction(kind=ActionKind.INVALID, error=escape_surrogates(f"{reason}: {shown}"))


def _short_repr(value: Any) -> str:
    try:
        shown = repr(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deep to show>"
    return shown if len(shown) <= 200 else shown[:200] + "..."


def _parse_arguments(value: Any) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Returns (parsed object or None, raw string as sent, why the arguments cannot be used)."""
    if isinstance(value, dict):
        problem = json_value_problem(value)
        if problem is not None:
            return None, escape_surrogates(_short_repr(value)), f"arguments {problem}"
        return value, None, None
    if value is None:
        return {}, None, None
    if isinstance(value, str):
        parsed, error = parse_json_object(value)
        return parsed, escape_surrogates(clip(value, DEFAULT_MAX_ARGUMENT_BYTES)), error
    return None, escape_surrogates(_short_repr(value)), f"arguments must be a JSON object, got {type(value).__name__}"


def parse_action(raw: Any) -> AgentAction:
    """Parse any input into an :class:`AgentAction`; never raises."""
    if isinstance(raw, AgentAction):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return _invalid("empty action", raw)
        try:
            data = json.loads(raw)
        except RecursionError:
            return _invalid(f"action is nested deeper than {MAX_JSON_DEPTH} levels", raw)
        except ValueError:
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
        arguments, raw_args, problem = _parse_arguments(data.get("arguments"))
        call_id = data.get("id")
        if call_id is not None:
            call_id = escape_surrogates(call_id[:200] if isinstance(call_id, str) else _short_repr(call_id))
        return AgentAction(
            kind=ActionKind.TOOL_CALL,
            tool=escape_surrogates(name.strip()[:MAX_TEXT]),
            arguments=arguments,
            raw_arguments=raw_args,
            arguments_error=problem,
            call_id=call_id,
        )
    if "reply" in data:
        text = data.get("reply")
        if not isinstance(text, str):
            return _invalid("reply must be a string", raw)
        return reply(text)
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


class CheckVerdict(str, Enum):
    """What the manipulation check said of a text a party model wrote."""

    PASSED = "passed"  # the check found the text faithful to its role card
    FAILED = "failed"  # the check found a problem, or its answer could not be read (counted as a failure)
    UNCHECKED = "unchecked"  # no generated text was checked (the script's own text stands)


class VoiceMark(BaseModel):
    """How a message of a person came to be when a party model voiced it (the live-parties arm).

    A trace-only mark: :meth:`Event.to_obs` never shows it, so an agent cannot tell a voiced message
    from a scripted one by anything but its words.
    """

    model_config = ConfigDict(frozen=True)

    generated: bool = Field(description="The text is the party model's (false: the script's own text stands).")
    card: str = Field(description="sha256 of the role card the party model was given.")
    check: CheckVerdict = Field(description="The manipulation check's verdict on the text shown.")
    attempts: int = Field(default=0, ge=0, description="Texts the party model wrote for this message (all checked).")
    fallback: bool = Field(
        default=False, description="Every generated text failed the check, so the script's behaviour stands."
    )
    problems: tuple[str, ...] = Field(
        default=(), description="What the check found wrong in each rejected text (bounded), in order."
    )


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
    voice: VoiceMark | None = Field(
        default=None, exclude_if=lambda mark: mark is None,
        description="Set when a party model voiced the message (live parties); left out of scripted traces.",
    )

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
