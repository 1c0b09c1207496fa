"""The chat agent: plays any commitbench environment through an OpenAI-compatible model.

One :class:`ChatAgent` plays one episode. It keeps the conversation as OpenAI chat messages,
calls the model through :class:`commitbench.llm.ModelClient` (cache, retries, concurrency) and
turns the model's answer into environment actions.

Rendering (stable prefix first, so server-side prefix caches hit):

* the system prompt (the ``system`` event of the opening observation, else ``info["system_prompt"]``);
* messages from people as *user* lines ``[#channel] Name (title): text`` or ``[dm:Name] Name
  (title): text``, consecutive lines joined into one user message; environment notices as
  ``[notice] text`` lines;
* what the assistant itself said (the pre-seeded promise, its replies) as *assistant* content;
* its tool calls as an assistant message with ``tool_calls`` followed by one ``tool`` message per
  call, in order; call ids are renumbered ``call00001``, ``call00002``, ... so the history does
  not depend on the ids a server happens to generate (9 alphanumerics, valid for every parser);
* the observation's ``context`` (dynamic state an intervention shows) last, never stored in the
  history, so it is the only part of a prompt that changes between calls.

Mapping answers to actions:

* tool calls are fed to the environment one by one, in order; when the turn ends before all of
  them ran (``end_turn``, the turn's tool budget), the rest get a "not run" tool message;
* text without tool calls is a reply (it ends the turn); text that comes with tool calls is kept
  in the history as the model's narration and is not posted;
* no text and no tool calls ends the turn silently;
* malformed tool-call arguments go to the environment as the raw string (it records the error);
  in the history they are wrapped as ``{"unparsed_arguments": raw}`` so that every server can
  re-read the conversation;
* a refusal is posted as the reply and recorded as an error; a call that failed (error after
  retries, bad request) is recorded and ends the turn. A failure of the model *infrastructure*
  that persists after retries sets :attr:`ChatAgent.infra_error`: the agent makes no further
  calls in the episode (it ends every remaining turn), and the runner marks the trace so that a
  resumed run plays the cell again;
* at most ``max_model_calls_per_turn`` calls per turn: past that the turn is ended and a record
  with ``purpose="notice"`` says so (such records are not model calls). With
  ``closing_call_without_tools`` (the follow-up suite's turn loop, as its paper runs it) the last of
  those calls offers no tools, so that a model still calling tools after the others gives its reply
  then; tool calls in that answer are not run, and a turn that still ends without text is recorded so
  (a notice) and left to be labelled from what it said.

Two turn protocols (:data:`PROTOCOLS`), part of the run identity when it is not the default:

* ``auto`` (the default, for real servers): the tools are sent without ``tool_choice``; the model
  answers in text (the reply) or calls tools;
* ``tools_only``: every answer is one tool call, forced with ``tool_choice: "required"``, and the
  reply and the end of the turn are tools too (:data:`REPLY_TOOL` with a ``text`` argument, and
  ``end_turn`` when the environment has none). A server that constrains its output to the tools'
  schemas (vLLM, OpenAI, the embedded model's own handler) then always returns a well-formed call, so
  a small model exercises the tools. The agent answers its own protocol calls in the history
  (:data:`POSTED_TEXT`, :data:`ENDED_TEXT`); a reply call without a string ``text`` goes to the
  environment as it is and comes back as a tool error.

Every call is recorded as a :class:`commitbench.traces.ModelCallRecord` (reasoning text apart
from the reply). :meth:`ChatAgent.identity` is the run identity: the model identity (name,
sampling, extra_body; never the URL or key), the call cap and the rendering version.
"""

from __future__ import annotations

import json
from collections import deque
from typing import TYPE_CHECKING, Any

from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES, clip
from commitbench.digests import digest
from commitbench.llm import INFRASTRUCTURE_ERRORS, ModelResponse, ModelSettings
from commitbench.protocol import (
    END_TURN_TOOL,
    ActionKind,
    AgentAction,
    end_turn,
    refused_tool_call,
    reply,
    tool_call,
)
from commitbench.traces import AgentIdentity, ModelCallRecord, call_record

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "RENDER_HASH",
    "RENDER_VERSION",
    "REPLY_TOOL",
    "TOOLS_ONLY",
    "ChatAgent",
    "call_record",
    "chat_identity",
    "format_line",
]

# Bump when the way conversations are rendered changes (it is part of the run identity).
RENDER_VERSION = 1

NOT_RUN_TEXT = "Not run: the turn ended before this call."
CALL_LIMIT_TEXT = "call_limit: {n} model calls in this turn; the turn was ended without another call"
NO_REPLY_TEXT = "no_reply: {n} tool rounds and a closing call without tools gave no reply text; the turn ended silently"
CLOSING_TOOL_CALLS_TEXT = "closing call: tool calls in an answer to a call that offered no tools were not run"
NOTICE_PREFIX = "[notice]"
UNPARSED_KEY = "unparsed_arguments"

DEFAULT_PROTOCOL = "auto"
TOOLS_ONLY = "tools_only"
PROTOCOLS = {
    DEFAULT_PROTOCOL: "tools sent without tool_choice; text is the reply",
    TOOLS_ONLY: "every answer is one tool call (tool_choice required); the reply and the end of the turn are tools",
}
REPLY_TOOL = "reply"
POSTED_TEXT = "Posted."
ENDED_TEXT = "Turn ended."
MAX_REPLY_CHARS = 4000
PROTOCOL_TOOLS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": REPLY_TOOL,
            "description": "Write your answer where the last message came from; this ends your turn.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": MAX_REPLY_CHARS, "description": "Your answer."}},
                "required": ["text"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": END_TURN_TOOL,
            "description": "Finish your turn without writing anything.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
)

# Every fixed piece of text the rendering adds; hashed into the prompt hashes of a run.
RENDER_HASH = digest(
    json.dumps(
        [RENDER_VERSION, NOT_RUN_TEXT, CALL_LIMIT_TEXT, NOTICE_PREFIX, UNPARSED_KEY, "[{channel}] {sender} ({role}): "]
    )
)

def format_line(event: dict[str, Any]) -> str:
    """The user-side line for a message event: ``[channel] Name (title): text``."""
    role = event.get("role") or ""
    who = f"{event.get('sender', '')} ({role})" if role else str(event.get("sender", ""))
    return f"[{event.get('channel', '')}] {who}: {event.get('text', '')}"


def _history_arguments(raw: str, parsed: dict[str, Any] | None) -> str:
    """Arguments as they go back into the history: the raw text when it is a JSON object."""
    if parsed is not None:
        return raw if raw.strip() else "{}"
    return json.dumps({UNPARSED_KEY: raw}, ensure_ascii=False)


def protocol_hash() -> str:
    """sha256 of the tools_only protocol's fixed texts (its tools and the results the agent writes)."""
    payload = [TOOLS_ONLY, list(PROTOCOL_TOOLS), POSTED_TEXT, ENDED_TEXT]
    return digest(json.dumps(payload, sort_keys=True))


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown chat protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    return protocol


def chat_identity(
    name: str, settings: ModelSettings, max_model_calls_per_turn: int, protocol: str = DEFAULT_PROTOCOL,
    closing_call_without_tools: bool = False,
) -> AgentIdentity:
    """The run identity of a chat agent: model identity (no URL, no key), call cap, rendering version,
    and the turn protocol and a closing call without tools when they are not the default (so runs of the
    default keep their keys)."""
    values: dict[str, Any] = {
        "model": settings.identity(),
        "max_model_calls_per_turn": max_model_calls_per_turn,
        "render_version": RENDER_VERSION,
    }
    if check_protocol(protocol) != DEFAULT_PROTOCOL:
        values["protocol"] = protocol
        values["protocol_hash"] = protocol_hash()
    if closing_call_without_tools:
        values["closing_call"] = "without_tools"
    if settings.max_argument_bytes != DEFAULT_MAX_ARGUMENT_BYTES:  # it decides which calls are tool errors
        values["max_argument_bytes"] = settings.max_argument_bytes
    return AgentIdentity(name=name, kind="chat", settings=values)


class ChatAgent:
    """A model-backed agent for one episode (create one per episode; share the client)."""

    kind = "chat"

    def __init__(
        self,
        client: ModelClient,
        *,
        name: str | None = None,
        sample_index: int = 0,
        session_id: str | None = None,
        max_model_calls_per_turn: int = 10,
        protocol: str = DEFAULT_PROTOCOL,
        closing_call_without_tools: bool = False,
    ) -> None:
        if max_model_calls_per_turn < 1:
            raise ValueError("max_model_calls_per_turn must be at least 1")
        self.protocol = check_protocol(protocol)
        self.closing_call_without_tools = closing_call_without_tools
        self.client = client
        self.name = name or f"chat:{client.settings.model}"
        self.sample_index = sample_index
        self.session_id = session_id
        self.max_model_calls_per_turn = max_model_calls_per_turn
        self.model_calls: list[ModelCallRecord] = []
        self.infra_error: str | None = None
        self._max_argument_bytes = client.settings.max_argument_bytes
        self._messages: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self._pending: deque[AgentAction] = deque()
        self._pending_ids: deque[str | None] = deque()  # the protocol call id of each pending action, if any
        self._protocol_calls: dict[str, str] = {}  # protocol call id -> the result the agent writes for it
        self._open_call_ids: deque[str] = deque()
        # Messages that arrived inside the turn while tool calls of the same reply were still to run (a live
        # party's answer): shown once those calls have their results, so none is dropped and the calls stay paired.
        self._held: list[str] = []
        self._next_call = 0
        self._turn: Any = None
        self._calls_this_turn = 0
        self._context = ""
        self._revision: str | None = None

    # ------------------------------------------------------------------ identity
    def identity(self) -> AgentIdentity:
        return chat_identity(self.name, self.client.settings, self.max_model_calls_per_turn, self.protocol,
                             self.closing_call_without_tools)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (without the dynamic context)."""
        return self._messages

    # ------------------------------------------------------------------ protocol
    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self._messages = []
        self._tools = list(info.get("tools") or [])
        self._own_tools: set[str] = set()
        if self.protocol == TOOLS_ONLY:
            present = {str((t.get("function") or {}).get("name", "")) for t in self._tools}
            for tool in PROTOCOL_TOOLS:
                name = tool["function"]["name"]
                if name not in present:
                    self._tools.append(tool)
                    self._own_tools.add(name)
        self._pending.clear()
        self._pending_ids.clear()
        self._protocol_calls.clear()
        self._open_call_ids.clear()
        self._held = []
        self.model_calls = []
        self.infra_error = None
        self._next_call = 0
        self._calls_this_turn = 0
        self._turn = info.get("turn")
        events = observation.get("events") or ()
        if not any(e.get("kind") == "system" for e in events) and info.get("system_prompt"):
            self._messages.append({"role": "system", "content": str(info["system_prompt"])})
        self._ingest(events)
        self._context = str(observation.get("context") or "")
        self._last_seen = observation

    async def act(self, observation: dict[str, Any], info: dict[str, Any]) -> AgentAction:
        """The next action for the environment; calls the model when no tool call is queued."""
        if not self._messages:  # begin() was not called: treat this observation as the opening one
            self.begin(observation, info)
        elif observation is not self._last_seen:
            self._observe(observation, info)
            self._last_seen = observation
        if self._revision is not None:
            return await self._revise()
        if self._pending:
            return self._next_pending()
        self._flush_held()
        if self.infra_error is not None:
            return end_turn()
        if self._calls_this_turn >= self.max_model_calls_per_turn:
            self.model_calls.append(
                ModelCallRecord(
                    turn=self._turn_index(), purpose="notice",
                    error=CALL_LIMIT_TEXT.format(n=self._calls_this_turn),
                )
            )
            return end_turn()
        self._calls_this_turn += 1
        closing = self.closing_call_without_tools and self._calls_this_turn == self.max_model_calls_per_turn
        request = self._messages
        if self._context:
            request = self._with_context(self._messages, self._context)
        tools = None if closing else (self._tools or None)
        options: dict[str, Any] = {}
        if self.protocol == TOOLS_ONLY and tools:
            options["tool_choice"] = "required"
        response = await self.client.complete(
            request,
            tools=tools,
            sample_index=self.sample_index,
            session_id=self.session_id,
            **options,
        )
        record = self._record(response)
        if closing and response.tool_calls and response.error is None:
            record = record.model_copy(update={"error": CLOSING_TOOL_CALLS_TEXT})
            response = response.model_copy(update={"tool_calls": []})
        self.model_calls.append(record)
        action = self._respond(response)
        if closing and action.kind is not ActionKind.REPLY and response.error is None:
            self.model_calls.append(ModelCallRecord(
                turn=self._turn_index(), purpose="notice", error=NO_REPLY_TEXT.format(n=self._calls_this_turn - 1),
            ))
        return action

    def _next_pending(self) -> AgentAction:
        action = self._pending.popleft()
        call_id = self._pending_ids.popleft()
        if call_id is not None:  # a protocol call: the agent writes its result
            result = self._protocol_calls.pop(call_id)
            self._messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        return action

    _last_seen: Any = None

    # ------------------------------------------------------------------ observing
    def _observe(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        events = observation.get("events") or ()
        turn = info.get("turn")
        new_turn = turn != self._turn if turn is not None else any(e.get("kind") == "message" for e in events)
        self._turn = turn
        if new_turn:
            self._calls_this_turn = 0
        self._ingest(events, same_turn=not new_turn)
        self._context = str(observation.get("context") or "")

    def _ingest(self, events: Any, same_turn: bool = False) -> None:
        for event in events:
            kind = event.get("kind")
            if kind == "tool_result":
                self._tool_result(event)
                continue
            if kind == "message" and same_turn and self._pending:  # an answer inside the turn: calls still to run
                self._held.append(format_line(event))
                continue
            # Anything else means the tool calls still queued will not run in this turn.
            self._close_open_calls()
            self._flush_held()
            if kind == "system":
                self._messages.insert(0, {"role": "system", "content": str(event.get("text", ""))})
            elif kind == "message":
                self._user_line(format_line(event))
            elif kind == "assistant":
                self._messages.append({"role": "assistant", "content": str(event.get("text", ""))})
            elif kind == "notice":
                self._user_line(f"{NOTICE_PREFIX} {event.get('text', '')}")
            elif kind == "revision_request":
                self._revision = str(event.get("text", ""))

    def _flush_held(self) -> None:
        for line in self._held:
            self._user_line(line)
        self._held = []

    def _user_line(self, line: str) -> None:
        last = self._messages[-1] if self._messages else None
        if last is not None and last["role"] == "user":
            last["content"] = f"{last['content']}\n{line}"
        else:
            self._messages.append({"role": "user", "content": line})

    def _tool_result(self, event: dict[str, Any]) -> None:
        text = str(event.get("text", ""))
        if not self._open_call_ids:  # a result nobody asked for (should not happen): show it as a notice
            self._user_line(f"{NOTICE_PREFIX} result of {event.get('tool', '')}: {text}")
            return
        call_id = str(event.get("call_id") or "")
        if call_id in self._open_call_ids:
            self._open_call_ids.remove(call_id)
        else:
            call_id = self._open_call_ids.popleft()
        self._messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def _close_open_calls(self) -> None:
        for call_id in list(self._protocol_calls):
            self._messages.append({"role": "tool", "tool_call_id": call_id, "content": NOT_RUN_TEXT})
        self._protocol_calls.clear()
        self._pending_ids.clear()
        if not self._open_call_ids:
            self._pending.clear()
            return
        self._pending.clear()
        while self._open_call_ids:
            call_id = self._open_call_ids.popleft()
            self._messages.append({"role": "tool", "tool_call_id": call_id, "content": NOT_RUN_TEXT})

    @staticmethod
    def _with_context(messages: list[dict[str, Any]], context: str) -> list[dict[str, Any]]:
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "user":
            return [*messages[:-1], {"role": "user", "content": f"{last['content']}\n\n{context}"}]
        return [*messages, {"role": "user", "content": context}]

    def _turn_index(self) -> int:
        return self._turn if isinstance(self._turn, int) else 0

    async def _revise(self) -> AgentAction:
        """Answer a revision request: the request's text is the whole prompt (it holds what the rewriter may
        read), sent alone to the same model at temperature 0, without tools. The rewrite takes the draft's
        place in the conversation, as the user saw it."""
        prompt, self._revision = self._revision or "", None
        if self.infra_error is not None:
            return end_turn()
        response = await self.client.complete(
            [{"role": "user", "content": prompt}], sample_index=self.sample_index, session_id=self.session_id,
            temperature=0.0,
        )
        record = self._record(response).model_copy(update={"purpose": "rewrite"})
        text = (response.text or "").strip()
        if response.error is None and not text:
            record = record.model_copy(update={"error": "empty rewrite: the model returned no reply text"})
        self.model_calls.append(record)
        if response.error is not None:
            if response.error.kind in INFRASTRUCTURE_ERRORS:
                self.infra_error = f"{response.error.kind.value}: {response.error.message}"
            return end_turn()
        if not text:
            return end_turn()
        last = self._messages[-1] if self._messages else None
        if last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
            last["content"] = text
        else:
            self._messages.append({"role": "assistant", "content": text})
        return reply(text)

    # ------------------------------------------------------------------ answering
    def _record(self, response: ModelResponse) -> ModelCallRecord:
        return call_record(response, self._turn_index(), self._max_argument_bytes)

    def _protocol_action(self, name: str, arguments: dict[str, Any] | None) -> tuple[AgentAction, str] | None:
        """The action and the history result of a call of the protocol's own tools; None for any other call."""
        if name not in self._own_tools:
            return None
        if name == END_TURN_TOOL:
            return end_turn(), ENDED_TEXT
        text = (arguments or {}).get("text")
        if not isinstance(text, str):
            return None  # the environment records it as a tool error
        if not text.strip():
            return end_turn(), ENDED_TEXT
        return reply(text), POSTED_TEXT

    def _respond(self, response: ModelResponse) -> AgentAction:
        if response.error is not None:
            if response.error.kind in INFRASTRUCTURE_ERRORS:
                self.infra_error = f"{response.error.kind.value}: {response.error.message}"
            return end_turn()
        text = response.text or ""
        if response.tool_calls:
            calls = []
            for call in response.tool_calls:
                self._next_call += 1
                call_id = f"call{self._next_call:05d}"
                name = call.name or "unnamed_tool"
                # Arguments over the bound are sent back, recorded and shown to the environment cut short.
                raw = clip(call.arguments_raw, self._max_argument_bytes)
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": _history_arguments(raw, call.arguments)},
                    }
                )
                own = self._protocol_action(name, call.arguments)
                if own is not None:
                    self._pending.append(own[0])
                    self._pending_ids.append(call_id)
                    self._protocol_calls[call_id] = own[1]
                    continue
                if call.over_bound and call.parse_error is not None:  # too large: the client said why
                    self._pending.append(refused_tool_call(name, raw, call.parse_error, call_id))
                else:
                    arguments: dict[str, Any] | str = call.arguments if call.arguments is not None else raw
                    self._pending.append(tool_call(call.name, arguments, call_id))
                self._pending_ids.append(None)
                self._open_call_ids.append(call_id)
            self._messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
            return self._next_pending()
        if not text.strip() and response.refusal:
            text = response.refusal
        if text.strip():
            self._messages.append({"role": "assistant", "content": text})
            return reply(text)
        return end_turn()
