"""The wire form of the scripted model's answers: completions, streamed events, error bodies.

Pure functions of the request's JSON and a :class:`ReplySpec`; token counts are whitespace-separated
words, a cheap and deterministic stand-in for a tokenizer.
"""

from __future__ import annotations

import json
import time
from typing import Any

from commitbench.mock.specs import DEFAULT_MODEL, ReasoningField, ReplySpec, ToolCallSpec

__all__ = [
    "as_malformed",
    "as_refusal",
    "completion_json",
    "count_prompt_tokens",
    "error_json",
    "json_bytes",
    "last_user_text",
    "stream_events",
    "text_pieces",
    "validate_request",
    "word_count",
]


def json_bytes(obj: Any) -> bytes:
    """``obj`` as compact UTF-8 JSON."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a scripted lone surrogate: send it as a \uXXXX escape, as a server would
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_json(status: int, message: str, kind: str) -> bytes:
    """An OpenAI-style error body."""
    return json_bytes({"error": {"message": message, "type": kind, "code": status}})


def word_count(value: Any) -> int:
    """A cheap, deterministic stand-in for a tokenizer: whitespace-separated words."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(word_count(part.get("text") if isinstance(part, dict) else part) for part in value)
    return 0


def count_prompt_tokens(request: dict[str, Any]) -> int:
    """The prompt's size in :func:`word_count` tokens, one more per message."""
    total = 0
    for message in request.get("messages", []):
        if isinstance(message, dict):
            total += 1 + word_count(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function", {}) if isinstance(call, dict) else {}
                total += word_count(function.get("arguments"))
    return total


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the conversation's last user message (empty when there is none)."""
    for message in reversed(request.get("messages", [])):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def completion_json(request: dict[str, Any], reply: ReplySpec | None, number: int) -> dict[str, Any]:
    """The chat completion that says ``reply`` (numbered ``number``) in answer to ``request``."""
    reply = reply or ReplySpec(text="")
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.refusal is not None:
        message["content"] = None
        message["refusal"] = reply.refusal
    if reply.reasoning is not None:
        if reply.reasoning_field in (ReasoningField.REASONING, ReasoningField.BOTH):
            message["reasoning"] = reply.reasoning
        if reply.reasoning_field in (ReasoningField.REASONING_CONTENT, ReasoningField.BOTH):
            message["reasoning_content"] = reply.reasoning
    completion_tokens = word_count(reply.text) + word_count(reply.reasoning) + word_count(reply.refusal)
    if reply.tool_calls:
        calls = []
        for index, call in enumerate(reply.tool_calls):
            arguments = call.arguments if isinstance(call.arguments, str) else json_bytes(call.arguments).decode()
            completion_tokens += word_count(arguments) + 1
            calls.append(
                {
                    "id": call.id or f"call_{number}_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments},
                }
            )
        message["tool_calls"] = calls
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else count_prompt_tokens(request)
    if reply.completion_tokens is not None:
        completion_tokens = reply.completion_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reply.reasoning and reply.report_reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": word_count(reply.reasoning)}
    n = request.get("n") or 1
    return {
        "id": f"chatcmpl-mock-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", DEFAULT_MODEL),
        "choices": [
            {"index": i, "message": message, "finish_reason": finish, "logprobs": None} for i in range(n)
        ],
        "usage": usage,
    }


def as_refusal(reply: ReplySpec | None) -> ReplySpec:
    """A refusal in place of ``reply`` (its reasoning kept)."""
    return ReplySpec(refusal="I'm sorry, but I can't help with that.", reasoning=reply.reasoning if reply else None)


def as_malformed(reply: ReplySpec | None, request: dict[str, Any]) -> ReplySpec:
    """Spoil the first tool call's arguments (or invent a call) so they are not valid JSON."""
    reply = reply or ReplySpec()
    calls = list(reply.tool_calls)
    if calls:
        first = calls[0]
        good = first.arguments if isinstance(first.arguments, str) else json_bytes(first.arguments).decode()
        calls[0] = ToolCallSpec(name=first.name, id=first.id, arguments=good.rstrip("}") + ', "unterminated')
    else:
        tools = request.get("tools") or []
        name = "unknown_tool"
        if tools and isinstance(tools[0], dict):
            name = tools[0].get("function", {}).get("name", name)
        calls = [ToolCallSpec(name=name, arguments='{"value": "unterminated')]
    return reply.model_copy(update={"tool_calls": calls, "fault": None})


_WORDS_PER_CHUNK = 3


def text_pieces(text: str) -> list[str]:
    """``text`` in pieces of a few words, as a model streams it (joined, the pieces are the text)."""
    words = text.split(" ")
    pieces = [" ".join(words[i : i + _WORDS_PER_CHUNK]) for i in range(0, len(words), _WORDS_PER_CHUNK)]
    return [piece + (" " if index < len(pieces) - 1 else "") for index, piece in enumerate(pieces)]


def stream_events(completion: dict[str, Any], request: dict[str, Any]) -> list[bytes]:
    """A completion as the server-sent events of a streamed reply: a role chunk, the content a few words at a
    time, each tool call (name, then its arguments in two halves), a finish chunk per choice, the usage when
    ``stream_options.include_usage`` asks for it, and ``[DONE]``."""
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    chunks: list[dict[str, Any]] = []

    def delta(index: int, body: dict[str, Any], finish: str | None = None) -> None:
        chunks.append({**base, "choices": [{"index": index, "delta": body, "finish_reason": finish,
                                            "logprobs": None}]})

    for choice in completion["choices"]:
        index, message = choice["index"], choice["message"]
        delta(index, {"role": "assistant", "content": ""})
        for piece in text_pieces(message.get("content") or ""):
            if piece:
                delta(index, {"content": piece})
        if message.get("refusal"):
            delta(index, {"refusal": message["refusal"]})
        for number, call in enumerate(message.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            delta(index, {"tool_calls": [{"index": number, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]})
            for part in (arguments[:half], arguments[half:]):
                if part:
                    delta(index, {"tool_calls": [{"index": number, "function": {"arguments": part}}]})
        delta(index, {}, choice["finish_reason"])
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return [b"data: " + json_bytes(chunk) + b"\n\n" for chunk in chunks] + [b"data: [DONE]\n\n"]


def validate_request(request: Any, streaming: bool = False) -> str | None:
    """What is wrong with a chat request's JSON, in a sentence for the 400 reply, or None."""
    if not isinstance(request, dict):
        return "the request body must be a JSON object"
    if request.get("stream") and not streaming:
        return "streaming ('stream': true) is not supported by the mock server; send a non-streaming request"
    if not isinstance(request.get("model"), str) or not request["model"]:
        return "'model' must be a non-empty string"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"messages[{i}] must be an object with a string 'role'"
    n = request.get("n", 1)
    if n is not None and (not isinstance(n, int) or not 1 <= n <= 16):
        return "'n' must be an integer between 1 and 16"
    return None
