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
  with ``purpose="notice"`` says so (such records are not model calls).

Every call is recorded as a :class:`commitbench.traces.ModelCallRecord` (reasoning text apart
from the reply). :meth:`ChatAgent.identity` is the run identity: the model identity (name,
sampling, extra_body; never the URL or key), the call cap and the rendering version.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from typing import Any

from commitbench.llm import INFRASTRUCTURE_ERRORS, ModelClient, ModelResponse, ModelSettings, reasoning_token_count
from commitbench.protocol import AgentAction, end_turn, reply, tool_call
from commitbench.traces import AgentIdentity, ModelCallRecord

__all__ = [
    "RENDER_HASH",
    "RENDER_VERSION",
    "ChatAgent",
    "chat_identity",
    "format_line",
]

# Bump when the way conversations are rendered changes (it is part of the run identity).
RENDER_VERSION = 1

NOT_RUN_TEXT = "Not run: the turn ended before this call."
CALL_LIMIT_TEXT = "call_limit: {n} model calls in this turn; the turn was ended without another call"
NOTICE_PREFIX = "[notice]"
UNPARSED_KEY = "unparsed_arguments"

# Every fixed piece of text the rendering adds; hashed into the prompt hashes of a run.
RENDER_HASH = hashlib.sha256(
    json.dumps(
        [RENDER_VERSION, NOT_RUN_TEXT, CALL_LIMIT_TEXT, NOTICE_PREFIX, UNPARSED_KEY, "[{channel}] {sender} ({role}): "]
    ).encode()
).hexdigest()

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


def chat_identity(name: str, settings: ModelSettings, max_model_calls_per_turn: int) -> AgentIdentity:
    """The run identity of a chat agent: model identity (no URL, no key), call cap, rendering version."""
    return AgentIdentity(
        name=name,
        kind="chat",
        settings={
            "model": settings.identity(),
            "max_model_calls_per_turn": max_model_calls_per_turn,
            "render_version": RENDER_VERSION,
        },
    )


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
    ) -> None:
        if max_model_calls_per_turn < 1:
            raise ValueError("max_model_calls_per_turn must be at least 1")
        self.client = client
        self.name = name or f"chat:{client.settings.model}"
        self.sample_index = sample_index
        self.session_id = session_id
        self.max_model_calls_per_turn = max_model_calls_per_turn
        self.model_calls: list[ModelCallRecord] = []
        self.infra_error: str | None = None
        self._messages: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self._pending: deque[AgentAction] = deque()
        self._open_call_ids: deque[str] = deque()
        self._next_call = 0
        self._turn: Any = None
        self._calls_this_turn = 0
        self._context = ""
        self._revision: str | None = None

    # ------------------------------------------------------------------ identity
    def identity(self) -> AgentIdentity:
        return chat_identity(self.name, self.client.settings, self.max_model_calls_per_turn)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (without the dynamic context)."""
        return self._messages

    # ------------------------------------------------------------------ protocol
    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self._messages = []
        self._tools = list(info.get("tools") or [])
        self._pending.clear()
        self._open_call_ids.clear()
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
            return self._pending.popleft()
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
        request = self._messages
        if self._context:
            request = self._with_context(self._messages, self._context)
        response = await self.client.complete(
            request,
            tools=self._tools or None,
            sample_index=self.sample_index,
            session_id=self.session_id,
        )
        self.model_calls.append(self._record(response))
        return self._respond(response)

    _last_seen: Any = None

    # ------------------------------------------------------------------ observing
    def _observe(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        events = observation.get("events") or ()
        turn = info.get("turn")
        new_turn = turn != self._turn if turn is not None else any(e.get("kind") == "message" for e in events)
        self._turn = turn
        if new_turn:
            self._calls_this_turn = 0
        self._ingest(events)
        self._context = str(observation.get("context") or "")

    def _ingest(self, events: Any) -> None:
        for event in events:
            kind = event.get("kind")
            if kind == "tool_result":
                self._tool_result(event)
                continue
            # Anything else means the tool calls still queued will not run in this turn.
            self._close_open_calls()
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
        if not self._open_call_ids:
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
        """Answer a revision request: the same model rewrites its last reply at temperature 0, without tools."""
        instruction, self._revision = self._revision or "", None
        if self.infra_error is not None:
            return end_turn()
        request = [*self._messages, {"role": "user", "content": instruction}]
        response = await self.client.complete(
            request, sample_index=self.sample_index, session_id=self.session_id, temperature=0.0
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
        self._messages.extend([{"role": "user", "content": instruction}, {"role": "assistant", "content": text}])
        return reply(text)

    # ------------------------------------------------------------------ answering
    def _record(self, response: ModelResponse) -> ModelCallRecord:
        if response.error is not None:
            error = f"{response.error.kind.value}: {response.error.message}"
        elif response.refusal:
            error = f"refusal: {response.refusal}"
        else:
            error = ""
        reasoning_tokens, estimated = reasoning_token_count(response.usage.reasoning_tokens, response.reasoning)
        return ModelCallRecord(
            turn=self._turn_index(),
            purpose="agent",
            cache_key=response.cache_key,
            cache_hit=response.cache_hit,
            latency_s=response.latency_s,
            model_time_s=response.model_time_s,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            reasoning_tokens=reasoning_tokens,
            reasoning_tokens_estimated=estimated,
            finish_reason=response.finish_reason or "",
            text=response.text or "",
            reasoning=response.reasoning or "",
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments_raw} for c in response.tool_calls],
            error=error,
            replica_move="; ".join(response.replica_moves),
        )

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
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": _history_arguments(call.arguments_raw, call.arguments)},
                    }
                )
                arguments: dict[str, Any] | str = call.arguments if call.arguments is not None else call.arguments_raw
                self._pending.append(tool_call(call.name, arguments, call_id))
                self._open_call_ids.append(call_id)
            self._messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
            return self._pending.popleft()
        if not text.strip() and response.refusal:
            text = response.refusal
        if text.strip():
            self._messages.append({"role": "assistant", "content": text})
            return reply(text)
        return end_turn()
