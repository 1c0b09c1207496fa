"""What ``inspect view`` shows of an episode: the chat as messages, the environment's tool calls as tool events.

Two views of one trace. :class:`ToolEventRecorder`, a pass-through wrapper outside the interventions,
writes an inspect tool event for every tool call the environment ran (or rejected) at the step it
happened, so the transcript interleaves the model calls and the tools they led to. The events carry
:data:`EXECUTED_BY` in their metadata: the environment ran the tool, never inspect (a test checks that
every tool event of a log carries it). :func:`trace_messages` turns the finished trace into the sample's
messages: every person's message a user message with the speaker's name, title and channel in its
metadata (and in its text, as the agent read it), the assistant's posts, its tool calls and their results.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, SupportsFloat

import gymnasium as gym
from inspect_ai.event import ToolEvent
from inspect_ai.log import transcript
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
)
from inspect_ai.tool import ToolCall, ToolCallError

from commitbench.agents.chat import format_line
from commitbench.protocol import Event, EventKind, ToolCallRecord
from commitbench.traces import EpisodeTrace

__all__ = ["EXECUTED_BY", "ToolEventRecorder", "tool_event", "trace_messages"]

# The metadata every tool event of these tasks carries: who ran the tool.
EXECUTED_BY = {"executed_by": "commitbench environment (env.step)"}


def tool_event(call: ToolCallRecord) -> ToolEvent:
    """An inspect tool event for a call the environment handled (its result, or its error)."""
    error = None if call.ok else ToolCallError(type="unknown", message=f"{call.error_kind}: {call.result}")
    return ToolEvent(
        id=call.call_id or f"turn{call.turn}-{call.tool}", function=call.tool,
        arguments=call.arguments if call.arguments is not None else {"raw_arguments": call.raw_arguments or ""},
        result=call.result if call.ok else "", error=error, completed=datetime.now(UTC),
        metadata={**EXECUTED_BY, "turn": call.turn, "step": call.step, "is_write": call.is_write},
    )


def _calls(trace: EpisodeTrace | None) -> list[ToolCallRecord]:
    return [call for turn in trace.turns for call in turn.calls] if trace is not None else []


class ToolEventRecorder(gym.Wrapper[Any, Any, Any, Any]):
    """Records an inspect tool event for each tool call the environment handled in a step; changes nothing."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.recorded = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.recorded = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        calls = _calls(getattr(self.env.unwrapped, "trace", None))
        for call in calls[self.recorded:]:
            # inspect offers no public call to add an event; its own bridges record synthesised tool events so.
            transcript()._event(tool_event(call))
        self.recorded = len(calls)
        return result


def _speaker(event: Event) -> dict[str, Any]:
    return {"sender": event.sender, "role": event.role, "channel": event.channel, "step": event.step}


def trace_messages(trace: EpisodeTrace) -> list[ChatMessage]:
    """The episode as chat messages, in the order things happened (see the module doc). Tool results come
    in the order of the calls they answer, so the n-th result is the n-th call's."""
    pending = iter(_calls(trace))
    messages: list[ChatMessage] = []
    for event in trace.events:
        if event.kind is EventKind.SYSTEM:
            messages.append(ChatMessageSystem(content=event.text))
        elif event.kind is EventKind.MESSAGE:
            messages.append(ChatMessageUser(content=format_line(event.model_dump()), metadata=_speaker(event)))
        elif event.kind is EventKind.NOTICE:
            messages.append(ChatMessageUser(content=f"[notice] {event.text}", metadata={"notice": True}))
        elif event.kind is EventKind.ASSISTANT:
            messages.append(ChatMessageAssistant(content=event.text, metadata=_speaker(event)))
        elif event.kind is EventKind.TOOL_RESULT:
            call = next(pending, None)
            call_id = event.call_id or (call.call_id if call is not None else "") or f"result{len(messages)}"
            name = call.tool if call is not None else event.tool
            arguments: dict[str, Any] = {}
            if call is not None:
                arguments = call.arguments if call.arguments is not None else {"raw_arguments": call.raw_arguments}
            messages.append(ChatMessageAssistant(content="", tool_calls=[
                ToolCall(id=call_id, function=name, arguments=arguments)]))
            failed = not event.ok
            messages.append(ChatMessageTool(
                content=event.text, tool_call_id=call_id, function=name,
                error=ToolCallError(type="unknown", message=event.text[:200]) if failed else None,
            ))
    return messages
