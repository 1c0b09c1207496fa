"""A trainer's completion read as one assistant turn: the tool calls it makes and the reply the user sees.

TRL hands a reward function each completion in one of two forms:

* standard: a string, the decoded text;
* conversational: a list of message dicts, ``[{"role": "assistant", "content": ..., "tool_calls"?: [...]}]``;
  when the trainer runs tools itself the list goes on with ``{"role": "tool", ...}`` results and the
  assistant's later messages.

A turn is read from either the way the suite's chat agent reads a served model's answers:

* native tool calls (``tool_calls`` of an assistant message: ``{"type": "function", "function": {"name",
  "arguments"}}`` as OpenAI and TRL write them, or ``{"name", "arguments"}``; arguments a dict or a JSON
  string) are the turn's calls, in order, whatever their arguments hold: the environment records a bad call as
  a failed one, as it does in a run;
* text written by a model without native tool calls is read with the embedded model's parser
  (:func:`commitbench.agents.local_chat.parse_output`): a text that is one JSON object ``{"name": TOOL,
  "arguments": {...}}`` of a tool the setup offers is a call. So is each such object a chat template wraps in
  ``<tool_call>...</tool_call>`` (the text outside the tags stays text); anything else is text;
* the reply is the text of the last assistant message (a call-only last message: no reply), without a
  ``<think>...</think>`` block, which a served model's reasoning never shows the user either;
* the trainer's own ``tool`` results are not read: the calls are run again through the suite's environment,
  whose mocks decide which succeed.

Nothing here raises: a completion of any other shape is a turn with no call and its text, if any, as the reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.agents.local_chat import parse_output
from commitbench.protocol import AgentAction, tool_call

__all__ = ["ParsedTurn", "parse_completion"]

_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)


class ParsedTurn(BaseModel):
    """One completion as the environment receives it: tool calls in order, then the reply ('' for none)."""

    model_config = ConfigDict(frozen=True)

    calls: list[AgentAction] = Field(default_factory=list, description="The turn's tool calls, in order.")
    reply: str = Field(default="", description="The reply the user sees ('' when the turn ends without one).")


def _text(content: Any) -> str:
    """A message's content as text (content parts: their text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type", "text")
                       == "text")
    return ""


def _native_call(raw: Any) -> AgentAction:
    """One entry of ``tool_calls`` as the environment's action (a malformed one becomes a call it will refuse)."""
    entry: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    nested = entry.get("function")
    function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else entry
    name = function.get("name")
    arguments = function.get("arguments")
    if not isinstance(arguments, dict | str) and arguments is not None:
        arguments = json.dumps(arguments, default=str)
    call_id = entry.get("id")
    return tool_call(name if isinstance(name, str) and name.strip() else "unnamed_tool", arguments,
                     call_id if isinstance(call_id, str) else None)


def _text_calls(text: str, tool_names: Collection[str]) -> tuple[list[AgentAction], str]:
    """Calls written as text (the embedded model's form, bare or in ``<tool_call>`` tags) and the text left."""
    names = list(tool_names)
    rest, call = parse_output(text, names)
    if call is not None:
        return [tool_call(call["name"], call["arguments"])], rest
    calls: list[AgentAction] = []

    def take(match: re.Match[str]) -> str:
        _, found = parse_output(match.group(1), names)
        if found is None:
            return match.group(0)
        calls.append(tool_call(found["name"], found["arguments"]))
        return ""

    left = _TOOL_CALL_TAG.sub(take, text)
    return calls, left if calls else text


def _visible(text: str) -> str:
    return _THINK.sub("", text).strip()


def parse_completion(completion: Any, tool_names: Collection[str]) -> ParsedTurn:
    """The turn a completion makes (``tool_names``: the tools the setup offers, for calls written as text)."""
    if isinstance(completion, str):
        calls, text = _text_calls(_visible(completion), tool_names)
        return ParsedTurn(calls=calls, reply=text.strip())
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, Sequence) or isinstance(completion, bytes):
        return ParsedTurn()
    calls = []
    reply = ""
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
            continue
        native = message.get("tool_calls")
        text = _visible(_text(message.get("content")))
        if isinstance(native, Sequence) and not isinstance(native, str) and native:
            calls.extend(_native_call(c) for c in native)
        else:
            written, text = _text_calls(text, tool_names)
            calls.extend(written)
        reply = text.strip()
    return ParsedTurn(calls=calls, reply=reply)
