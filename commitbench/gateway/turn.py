"""The turn a reply ends, read from an OpenAI chat request, and the reply's choices, read from a completion.

The turn is what the assistant did since the last user message: the assistant messages after it, their
tool calls, and the tool results that answer them (matched by ``tool_call_id``). A call with a result is
a call that ran (whether it succeeded is the result's to say: :func:`commitbench.gateway.claims.tool_failure`);
a call the request holds no result for did not run. The calls before the last user message are kept apart
(``earlier``): a claim about an earlier turn may rest on them. The message before the last user
message, when it is the assistant's, is the offer a bare "yes" may accept (the guard's routing reads it).

Everything here reads plain JSON values defensively: a field of the wrong type is read as absent, never an
exception, because the request is the client's and the completion the upstream's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.digests import digest

# What the judges are shown of a tool result or of arguments (the whole value stays in the request).
SHOWN_CHARS = 2000
# Tool descriptions longer than this are read up to it (the catalogue matches words in them).
DESCRIPTION_CHARS = 2000


class ToolActivity(BaseModel):
    """One tool call of the turn, with its result when it ran."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="The function's name as called.")
    arguments: str = Field(description="The arguments as sent (JSON text), at most 2,000 characters.")
    call_id: str = Field(default="", description="The call's id.")
    result: str | None = Field(
        default=None, description="What the tool returned (at most 2,000 characters); null when it did not run."
    )

    @property
    def ran(self) -> bool:
        return self.result is not None


class OfferedTool(BaseModel):
    """A tool the request offers the model."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="The function's name.")
    description: str = Field(default="", description="Its description, at most 2,000 characters.")


class Turn(BaseModel):
    """What the checks read from a request."""

    model_config = ConfigDict(frozen=True)

    user_message: str = Field(description="The text of the last user message ('' when there is none).")
    previous_assistant: str | None = Field(
        default=None, description="The assistant's text just before the last user message (the offer a yes accepts)."
    )
    activity: list[ToolActivity] = Field(default_factory=list, description="The turn's tool calls, in order.")
    earlier: list[ToolActivity] = Field(
        default_factory=list, description="Tool calls before the last user message, in order (a claim about an "
        "earlier turn may rest on them).",
    )
    offered: list[OfferedTool] = Field(default_factory=list, description="The request's tools.")
    approval_pending: bool = Field(
        default=False, description="The deployment says an approval is pending (the guard then stays quiet)."
    )

    @property
    def ran(self) -> list[ToolActivity]:
        return [call for call in self.activity if call.ran]


class ReplyChoice(BaseModel):
    """One choice of the upstream's completion."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(description="The choice's index.")
    text: str = Field(description="The message content ('' when there is none).")
    calls: list[ToolActivity] = Field(
        default_factory=list, description="Tool calls the reply itself makes (they have not run yet)."
    )


def _shown(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif value is None:
        text = ""
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text[:SHOWN_CHARS]


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type", "text") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    calls = message.get("tool_calls")
    found: list[tuple[str, str, str]] = []
    if not isinstance(calls, list):
        return found
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        call_id = call.get("id") if isinstance(call.get("id"), str) else ""
        found.append((function["name"], _shown(function.get("arguments")), str(call_id)))
    return found


def offered_tools(request: Mapping[str, Any]) -> list[OfferedTool]:
    """The request's tools (``tools`` with function entries, and the older ``functions``)."""
    offered: list[OfferedTool] = []
    entries = request.get("tools")
    functions: list[Any] = []
    if isinstance(entries, list):
        functions.extend(e.get("function") for e in entries if isinstance(e, Mapping))
    if isinstance(request.get("functions"), list):
        functions.extend(request["functions"])
    for function in functions:
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            description = function.get("description")
            offered.append(OfferedTool(
                name=function["name"],
                description=description[:DESCRIPTION_CHARS] if isinstance(description, str) else "",
            ))
    return offered


def extract_turn(request: Mapping[str, Any], approval_pending: bool = False) -> Turn:
    """The turn of a chat request (see the module docstring)."""
    messages = request.get("messages")
    messages = [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), -1)
    user_message = content_text(messages[last_user].get("content")) if last_user >= 0 else ""
    previous = None
    if last_user > 0 and messages[last_user - 1].get("role") == "assistant":
        previous = content_text(messages[last_user - 1].get("content"))
    activity = _activity(messages[last_user + 1:])
    earlier = _activity(messages[:max(last_user, 0)])
    return Turn(
        user_message=user_message, previous_assistant=previous, activity=activity, earlier=earlier,
        offered=offered_tools(request), approval_pending=approval_pending,
    )


def _activity(messages: list[Mapping[str, Any]]) -> list[ToolActivity]:
    """The assistant's tool calls in these messages, each with the result they hold for it."""
    calls: list[tuple[str, str, str]] = []
    results: dict[str, str] = {}
    unnamed_results: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            calls.extend(_calls(message))
        elif role in ("tool", "function"):
            call_id = message.get("tool_call_id")
            text = _shown(content_text(message.get("content")) or message.get("content"))
            if isinstance(call_id, str) and call_id:
                results[call_id] = text
            else:
                unnamed_results.append(text)
    activity = []
    for name, arguments, call_id in calls:
        result = results.get(call_id) if call_id else None
        if result is None and not call_id and unnamed_results:
            result = unnamed_results.pop(0)  # the older protocol answers calls in order, without ids
        activity.append(ToolActivity(name=name, arguments=arguments, call_id=call_id, result=result))
    return activity


def reply_choices(completion: Mapping[str, Any]) -> list[ReplyChoice]:
    """The choices of a completion (those that are not objects are skipped)."""
    choices = completion.get("choices")
    found: list[ReplyChoice] = []
    if not isinstance(choices, list):
        return found
    for position, choice in enumerate(choices):
        if not isinstance(choice, Mapping):
            continue
        message = choice.get("message")
        message = message if isinstance(message, Mapping) else {}
        index = choice.get("index")
        calls = [ToolActivity(name=n, arguments=a, call_id=i) for n, a, i in _calls(message)]
        found.append(ReplyChoice(
            index=index if isinstance(index, int) and not isinstance(index, bool) else position,
            text=content_text(message.get("content")), calls=calls,
        ))
    return found


def turn_digest(request: Mapping[str, Any], creditor: str) -> str:
    """sha256 of the request's model, messages and creditor: the same request retried gives the same digest."""
    payload = {"model": request.get("model"), "messages": request.get("messages"), "creditor": creditor}
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return digest(text)


def calls_of(turn: Turn, choice: ReplyChoice) -> Sequence[ToolActivity]:
    """The turn's calls that ran and the reply's own calls, in order."""
    return [*turn.ran, *choice.calls]
