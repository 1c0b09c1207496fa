"""What a model call returns: the parsed completion (text, tool calls, usage), never an exception for bad output."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, Field

from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES, clip
from commitbench.cache import UnusableEntry
from commitbench.callerrors import (
    ModelError,
    ModelErrorKind,
)
from commitbench.protocol import escape_surrogates, parse_json_object

__all__ = [
    "CACHE_ENTRY_FIELDS",
    "CHARS_PER_TOKEN",
    "ModelResponse",
    "ToolCall",
    "Usage",
    "parse_cache_entry",
    "parse_completion",
    "parse_tool_arguments",
    "reasoning_token_count",
    "stored_seconds",
    "text_of",
]


class ToolCall(BaseModel):
    """One tool call as the model emitted it; arguments are parsed but never trusted."""

    id: str = Field(description="Tool-call id from the server.")
    name: str = Field(description="Function name.")
    arguments_raw: str = Field(
        description="Arguments as sent by the model (lone surrogates escaped); arguments over the bound hold only "
        "their beginning and a note of their size (commitbench.bounds.clip)."
    )
    arguments: dict[str, Any] | None = Field(description="Parsed arguments; null when they could not be parsed.")
    parse_error: str | None = Field(default=None, description="Why the arguments could not be used, if so.")
    over_bound: bool = Field(
        default=False, description="The arguments were larger than max_argument_bytes: arguments_raw is cut short."
    )


class Usage(BaseModel):
    """Token counts reported by the server."""

    prompt_tokens: int = Field(default=0, description="Tokens in the prompt.")
    completion_tokens: int = Field(default=0, description="Generated tokens, reasoning included.")
    reasoning_tokens: int = Field(default=0, description="Generated reasoning tokens, when reported.")


class ModelResponse(BaseModel):
    """The outcome of one :meth:`ModelClient.complete` call."""

    model: str = Field(description="Model name (as reported by the server when it answered).")
    text: str | None = Field(default=None, description="Assistant message content.")
    reasoning: str | None = Field(
        default=None, description="Reasoning text (message.reasoning or reasoning_content), kept apart from text."
    )
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls, in order.")
    finish_reason: str | None = Field(default=None, description="Why generation stopped.")
    refusal: str | None = Field(default=None, description="Refusal text, when the model refused.")
    usage: Usage = Field(default_factory=Usage, description="Token counts.")
    latency_s: float = Field(default=0.0, description="Wall time of the call, retries and backoff included.")
    model_time_s: float | None = Field(
        default=None,
        description="Wall time of the server call that produced this completion: this call's for an answered "
        "call, the original call's for a cache hit (kept in the cache entry), null when the entry predates that.",
    )
    attempts: int = Field(default=0, description="HTTP attempts made (0 for a cache hit).")
    cache_hit: bool = Field(default=False, description="Served from the cache.")
    cache_key: str = Field(description="Content address of the call.")
    error: ModelError | None = Field(default=None, description="Set when no usable completion came back.")
    replica: str = Field(
        default="", description="Base URL of the replica that answered, when the model has several ('' otherwise)."
    )
    replica_moves: list[str] = Field(
        default_factory=list,
        description="Moves of the session to another replica during this call ('FROM -> TO: why'), in order.",
    )

    @property
    def ok(self) -> bool:
        return self.error is None

    def cache_payload(self) -> dict[str, Any]:
        """What the cache stores: the completion only (no timing, no per-call bookkeeping).

        A tool call is stored as the run keeps it: arguments over the bound cut short, and the reason its
        arguments could not be used, so that a replay plays the same tool error (:func:`parse_cache_entry`).
        """
        return {
            "model": self.model,
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": [_stored_call(c) for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "refusal": self.refusal,
            "usage": self.usage.model_dump(),
            "latency_s": self.model_time_s if self.model_time_s is not None else self.latency_s,
        }


def _stored_call(call: ToolCall) -> dict[str, Any]:
    item: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments_raw}
    if call.parse_error is not None:
        item["error"] = call.parse_error
    if call.over_bound:
        item["over_bound"] = True
    return item


CHARS_PER_TOKEN = 4  # a rough mean for English text under common BPE vocabularies


def reasoning_token_count(reported: int, reasoning: str | None) -> tuple[int, bool]:
    """Reasoning tokens of a completion and whether the number is estimated.

    The server's count (``completion_tokens_details.reasoning_tokens``) when it gives one; otherwise,
    when reasoning text came back, an estimate of one token per :data:`CHARS_PER_TOKEN` characters.
    """
    if reported > 0 or not reasoning:
        return reported, False
    return math.ceil(len(reasoning) / CHARS_PER_TOKEN), True


def stored_seconds(value: Any) -> float | None:
    """A latency read back from a cache entry: a finite non-negative number, else unknown."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def parse_tool_arguments(
    raw: str, max_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> tuple[dict[str, Any] | None, str | None]:
    """Parse a tool call's argument string; returns ``(arguments, None)`` or ``(None, error)``; never raises.

    An empty string means "no arguments" (some servers send it for parameterless tools). Arguments
    larger than ``max_bytes``, nested deeper than :data:`commitbench.protocol.MAX_JSON_DEPTH` or
    holding a lone surrogate are an error, like text that is not JSON (see
    :func:`commitbench.protocol.parse_json_object`).
    """
    return parse_json_object(raw, max_bytes)


def _text_field(value: Any, limit: int | None = None) -> str:
    text = value if isinstance(value, str) else str(value)
    return escape_surrogates(text if limit is None else text[:limit])


def _tool_calls_from(items: Any, max_argument_bytes: int) -> list[ToolCall]:
    calls: list[ToolCall] = []
    if not isinstance(items, list):
        items = []
    for index, item in enumerate(items):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            calls.append(
                ToolCall(id=f"call_{index}", name="", arguments_raw=_shown(item),
                         arguments=None, parse_error="tool call has no 'function' object")
            )
            continue
        raw = function.get("arguments")
        if raw is None:
            raw = ""
        elif not isinstance(raw, str):  # some servers send an object instead of a string
            raw = _shown(raw, limit=None)
        arguments, error = parse_tool_arguments(raw, max_argument_bytes)
        # Arguments over the bound are kept only as their beginning, here where they come in: what a trace,
        # the conversation sent back and the cache hold is this cut copy, never the whole text.
        clipped = clip(raw, max_argument_bytes)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            name, error = "", error or "tool call has no function name"
        call_id = item.get("id")
        calls.append(
            ToolCall(
                id=_text_field(call_id, 200) if isinstance(call_id, str) and call_id else f"call_{index}",
                name=_text_field(name, 200),
                arguments_raw=escape_surrogates(clipped),
                arguments=arguments if error is None else None,
                parse_error=error,
                over_bound=clipped is not raw,
            )
        )
    return calls


def _shown(value: Any, limit: int | None = 2000) -> str:
    """A JSON value as text (for a malformed tool call); never raises, whatever its depth."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        text = f"<{type(value).__name__} nested too deep to show>"
    return escape_surrogates(text if limit is None else text[:limit])


def text_of(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return escape_surrogates(content)
    if isinstance(content, list):  # content parts
        return escape_surrogates("".join(str(p.get("text", "")) for p in content if isinstance(p, dict)))
    return _shown(content, limit=None)


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
               float: "a number"}
_TEXT_FIELDS = ("content", "reasoning", "reasoning_content", "refusal")


def _message_problem(message: dict[str, Any]) -> str | None:
    """What makes a completion's message no answer at all (a field of a shape no server sends), or None.

    Texts must be text, null, or a list of content parts (objects whose ``text``, if any, is text);
    ``tool_calls`` must be a list or null. (A malformed call inside the list is the model's: it becomes
    a tool error of that call, not of the answer.)
    """
    for name in _TEXT_FIELDS:
        value = message.get(name)
        if value is None or isinstance(value, str):
            continue
        if isinstance(value, list) and all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in value):
            continue
        shape = _JSON_TYPES.get(type(value), "a value")
        if isinstance(value, list):
            shape = "an array of something other than text parts"
        return f"message.{name} is {shape}, not text or a list of text parts"
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        return f"message.tool_calls is {_JSON_TYPES.get(type(calls), 'a value')}, not a list"
    return None


def _count(value: Any) -> int:
    """A token count as the server reported it; 0 when it is missing or not a whole number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value)) if value == value and abs(value) < 1e18 else 0


def parse_completion(
    payload: Any, *, fallback_model: str, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> tuple[dict[str, Any], ModelError | None]:
    """Turn a chat-completion JSON object into ModelResponse fields, or an error. Never raises."""
    if not isinstance(payload, dict):
        return {}, ModelError(kind=ModelErrorKind.INVALID_RESPONSE, message="response body is not a JSON object")
    model = _text_field(payload["model"], 200) if isinstance(payload.get("model"), str) else fallback_model
    choices = payload.get("choices")
    if not choices or not isinstance(choices, list):
        return {"model": model}, ModelError(kind=ModelErrorKind.EMPTY_CHOICES, message="response has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return {"model": model}, ModelError(
            kind=ModelErrorKind.INVALID_RESPONSE, message="first choice has no message object"
        )
    problem = _message_problem(message)
    if problem is not None:
        return {"model": model}, ModelError(kind=ModelErrorKind.INVALID_RESPONSE, message=problem)
    reasoning = message.get("reasoning")
    if reasoning is None:
        reasoning = message.get("reasoning_content")
    usage_value = payload.get("usage")
    usage_raw: dict[str, Any] = usage_value if isinstance(usage_value, dict) else {}
    details = usage_raw.get("completion_tokens_details") or {}
    usage = Usage(
        prompt_tokens=_count(usage_raw.get("prompt_tokens")),
        completion_tokens=_count(usage_raw.get("completion_tokens")),
        reasoning_tokens=_count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0,
    )
    finish = choice.get("finish_reason")
    fields = {
        "model": model,
        "text": text_of(message.get("content")),
        "reasoning": text_of(reasoning),
        "tool_calls": _tool_calls_from(message.get("tool_calls"), max_argument_bytes),
        "finish_reason": None if finish is None else _text_field(finish, 200),
        "refusal": text_of(message.get("refusal")),
        "usage": usage,
    }
    return fields, None


# What every cache entry holds (``ModelResponse.cache_payload``); ``reasoning``, ``refusal`` and ``latency_s``
# may be missing from entries of older versions.
CACHE_ENTRY_FIELDS = ("model", "text", "tool_calls", "finish_reason", "usage")


def _entry_problem(stored: Any) -> str | None:
    """What makes a cache entry no recorded completion (a shape ``cache_payload`` never writes), or None."""
    if isinstance(stored, UnusableEntry):
        return f"{stored.problem}: it is not a recorded completion"
    if not isinstance(stored, dict):
        return f"the entry is {_JSON_TYPES.get(type(stored), 'a value')}, not a recorded completion"
    missing = [name for name in CACHE_ENTRY_FIELDS if name not in stored]
    if missing:
        return f"the entry lacks {', '.join(missing)}: it is not a recorded completion"
    for name in ("model", "finish_reason"):
        if stored[name] is not None and not isinstance(stored[name], str):
            return f"the entry's {name} is {_JSON_TYPES.get(type(stored[name]), 'a value')}, not text"
    if not isinstance(stored["usage"], dict):
        return "the entry's usage is not an object"
    calls = stored["tool_calls"]
    if not isinstance(calls, list):
        return "the entry's tool_calls is not a list"
    for index, item in enumerate(calls):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("id", "name", "arguments")):
            return f"the entry's tool call {index} is not an object with text id, name and arguments"
        if not isinstance(item.get("error", ""), str) or not isinstance(item.get("over_bound", False), bool):
            return f"the entry's tool call {index} has an error that is not text or an over_bound that is no boolean"
    return None


def parse_cache_entry(
    stored: Any, *, fallback_model: str, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> tuple[dict[str, Any], ModelError | None]:
    """A cache entry read back as the server reply it records: ModelResponse fields, or an error. Never raises.

    A cache is a file users copy, merge and share, so an entry is untrusted input: it must have the shape
    :meth:`ModelResponse.cache_payload` writes, and it is then rebuilt into the chat completion it records and
    parsed by :func:`parse_completion`, the parser of every server reply, so an entry no server could have sent
    is refused with the same error kind (``invalid_response``). A tool call stored with the reason its
    arguments could not be used keeps that reason (arguments over the bound are stored cut short).
    """
    problem = _entry_problem(stored)
    if problem is not None:
        return {}, ModelError(kind=ModelErrorKind.INVALID_RESPONSE, message=problem)
    usage = stored["usage"]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": stored["text"],
        "reasoning": stored.get("reasoning"),
        "refusal": stored.get("refusal"),
        "tool_calls": [
            {"id": item["id"], "type": "function", "function": {"name": item["name"], "arguments": item["arguments"]}}
            for item in stored["tool_calls"]
        ] or None,
    }
    payload = {
        "model": stored["model"] or fallback_model,
        "choices": [{"index": 0, "message": message, "finish_reason": stored["finish_reason"]}],
        "usage": {
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens")},
        },
    }
    # Arguments stored cut short are under the bound now: the bound is not what decides them, the stored reason is.
    fields, error = parse_completion(payload, fallback_model=fallback_model, max_argument_bytes=max_argument_bytes)
    if error is not None:
        return {}, error.model_copy(update={"message": f"the entry is no completion a server sends: {error.message}"})
    calls: list[ToolCall] = fields["tool_calls"]
    for index, item in enumerate(stored["tool_calls"]):
        if "error" in item:
            calls[index] = calls[index].model_copy(
                update={"arguments": None, "parse_error": escape_surrogates(item["error"]),
                        "over_bound": item.get("over_bound", False)}
            )
    return fields, None
