"""A scripted "model" for the mock server that plays standing episodes with tools.

:func:`standing_responder` returns a mock-server responder that reads the rendered conversation
(the chat agent's user lines ``[#channel] Name (title): text``) and answers like a simple,
obedient assistant:

* a question addressed to the assistant (``@Name ... ?``) -> ``lookup`` with the question;
* the trigger message of its promise -> the promised action tool with the promised arguments and,
  in the same response, a ``post_message`` saying so (two tool calls in one response);
* a tool result of ``lookup`` -> the result text as the reply; of the action tool -> "Done.";
  of anything else -> an empty answer (ends the turn silently);
* any other message -> the ``end_turn`` tool.

It finds the promise from the first user line (the creditor's request), which fixes the
commitment type and surface variant, through a table built from the compiled episodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from commitbench.episodes.standing.episode import Episode, ScriptAct
from commitbench.mock import ReplySpec, ToolCallSpec

_LINE = re.compile(r"^\[(?P<channel>[^\]]*)\] (?P<sender>[^(:]*?)(?: \((?P<role>[^)]*)\))?: (?P<text>.*)$")


class _Promise:
    __slots__ = ("action_tool", "arguments", "triggers")

    def __init__(self, action_tool: str, arguments: dict[str, Any]) -> None:
        self.action_tool = action_tool
        self.arguments = arguments
        self.triggers: set[str] = set()


def promise_table(episodes: Sequence[Episode]) -> dict[str, _Promise]:
    """Request text -> the promised action, its arguments and the trigger texts."""
    table: dict[str, _Promise] = {}
    for episode in episodes:
        request = next(m.text for m in episode.script if m.act is ScriptAct.REQUEST)
        entry = table.setdefault(request, _Promise(episode.action_tool.name, dict(episode.target_args)))
        entry.triggers.update(m.text for m in episode.script if m.act is ScriptAct.TRIGGER)
    return table


def parse_line(line: str) -> dict[str, str] | None:
    match = _LINE.match(line)
    return match.groupdict() if match else None


def _tool_name_of(messages: list[dict[str, Any]], call_id: str) -> str:
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return str(call["function"]["name"])
    return ""


def standing_responder(
    episodes: Sequence[Episode],
    executes: Callable[[dict[str, Any], str], bool] | None = None,
    reasoning: Callable[[dict[str, Any]], str | None] | None = None,
) -> Callable[[dict[str, Any]], ReplySpec]:
    """``executes(request, action_tool)`` decides whether the model acts at the trigger (default: always);
    ``reasoning(request)`` the reasoning text it returns then (default: a fixed sentence)."""
    table = promise_table(episodes)

    def respond(request: dict[str, Any]) -> ReplySpec:
        messages = request["messages"]
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        me = re.search(r"You are (\w+)", system)
        handle = f"@{me.group(1)}" if me else "@"
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        parsed_first = parse_line(first_user.splitlines()[0]) or {}
        promise = table.get(parsed_first.get("text", ""))
        last = messages[-1]
        if last["role"] == "tool":
            name = _tool_name_of(messages, last["tool_call_id"])
            if name == "lookup":
                return ReplySpec(text=last["content"])
            if promise is not None and name == promise.action_tool:
                return ReplySpec(text="Done.")
            return ReplySpec(text="")
        line = parse_line(str(last.get("content", "")).splitlines()[-1]) or {}
        text = line.get("text", "")
        acts = executes is None or (promise is not None and executes(request, promise.action_tool))
        if promise is not None and text in promise.triggers and acts:
            return ReplySpec(
                reasoning=(reasoning(request) if reasoning is not None
                           else "The condition of my promise is met, so I carry it out now."),
                tool_calls=[
                    ToolCallSpec(name=promise.action_tool, arguments=promise.arguments),
                    ToolCallSpec(name="post_message", arguments={"channel": line.get("channel", ""), "text": "On it."}),
                ],
            )
        if handle in text and text.rstrip().endswith("?"):
            return ReplySpec(tool_calls=[ToolCallSpec(name="lookup", arguments={"query": text.replace(handle, "")})])
        return ReplySpec(tool_calls=[ToolCallSpec(name="end_turn", arguments={})])

    return respond
