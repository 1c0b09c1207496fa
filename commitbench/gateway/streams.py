"""Server-sent events of a streamed completion: split as they arrive, assembled into a completion, written.

The upstream's bytes are split into events (a blank line ends each); the ``data:`` payload of each is a
chunk whose ``choices[].delta`` pieces are put together per choice (content, tool calls by their index,
finish reason), up to a bound on the text kept: past it the assembler stops keeping text and says so, and
the reply is marked ``check_error`` instead of being checked. ``[DONE]`` ends the stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

DONE = b"data: [DONE]\n\n"
# One event larger than this (no blank line within it) is passed on without being read.
MAX_EVENT_BYTES = 1 << 20


class EventSplitter:
    """Bytes in, whole events out (each with its blank-line terminator)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        events = []
        while True:
            ends = [i for i in (self._buffer.find(b"\n\n"), self._buffer.find(b"\r\n\r\n")) if i >= 0]
            if not ends:
                break
            end = min(ends)
            size = 4 if self._buffer.startswith(b"\r\n\r\n", end) else 2
            events.append(self._buffer[: end + size])
            self._buffer = self._buffer[end + size :]
        if len(self._buffer) > MAX_EVENT_BYTES:  # no terminator in sight: pass the bytes on as they are
            events.append(self._buffer)
            self._buffer = b""
        return events

    def rest(self) -> bytes:
        """What is left when the stream ends (an event without its terminator)."""
        rest, self._buffer = self._buffer, b""
        return rest


def event_data(event: bytes) -> str | None:
    """The ``data:`` payload of an event (several data lines joined by newlines), or None."""
    try:
        text = event.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = [line[5:].removeprefix(" ") for line in text.splitlines() if line.startswith("data:")]
    return "\n".join(lines) if lines else None


class Assembler:
    """Puts a completion together from its chunks (bounded)."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.kept = 0
        self.overflow = False
        self.head: dict[str, Any] = {}
        self.usage: Any = None
        self._content: dict[int, list[str]] = {}
        self._calls: dict[int, dict[int, dict[str, Any]]] = {}
        self._finish: dict[int, Any] = {}
        self._roles: dict[int, str] = {}
        self._seen: set[int] = set()

    def feed(self, chunk: Any) -> None:
        if not isinstance(chunk, Mapping):
            return
        for key in ("id", "model", "created", "system_fingerprint"):
            if key in chunk and key not in self.head:
                self.head[key] = chunk[key]
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if isinstance(choice, Mapping):
                self._feed_choice(choice)

    def _keep(self, text: str) -> bool:
        if self.kept + len(text) > self.max_chars:
            self.overflow = True
            return False
        self.kept += len(text)
        return True

    def _feed_choice(self, choice: Mapping[str, Any]) -> None:
        index = choice.get("index", 0)
        index = index if isinstance(index, int) and not isinstance(index, bool) else 0
        self._seen.add(index)
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            if isinstance(delta.get("role"), str):
                self._roles[index] = delta["role"]
            content = delta.get("content")
            if isinstance(content, str) and content and self._keep(content):
                self._content.setdefault(index, []).append(content)
            for call in delta.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    self._feed_call(index, call)
        if choice.get("finish_reason") is not None:
            self._finish[index] = choice["finish_reason"]

    def _feed_call(self, index: int, call: Mapping[str, Any]) -> None:
        position = call.get("index", 0)
        position = position if isinstance(position, int) and not isinstance(position, bool) else 0
        calls = self._calls.setdefault(index, {})
        entry = calls.setdefault(position, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        if isinstance(call.get("id"), str) and call["id"]:
            entry["id"] = call["id"]
        function = call.get("function")
        if isinstance(function, Mapping):
            for key in ("name", "arguments"):
                piece = function.get(key)
                if isinstance(piece, str) and piece and self._keep(piece):
                    entry["function"][key] += piece

    def completion(self) -> dict[str, Any]:
        """The completion the chunks make (``object: chat.completion``)."""
        indexes = sorted(self._seen)
        choices = []
        for index in indexes:
            message: dict[str, Any] = {"role": self._roles.get(index, "assistant"),
                                       "content": "".join(self._content.get(index, []))}
            calls = self._calls.get(index)
            if calls:
                message["tool_calls"] = [calls[k] for k in sorted(calls)]
            choices.append({"index": index, "message": message, "finish_reason": self._finish.get(index)})
        body: dict[str, Any] = {**self.head, "object": "chat.completion", "choices": choices}
        if self.usage is not None:
            body["usage"] = self.usage
        return body


def _event(payload: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


def completion_events(completion: Mapping[str, Any]) -> list[bytes]:
    """A completion as stream events: per choice one chunk with its whole message, then one with its finish
    reason; the usage (when there is one) in a last chunk with no choices. ``[DONE]`` is not included."""
    head = {k: completion[k] for k in ("id", "model", "created", "system_fingerprint") if k in completion}
    head["object"] = "chat.completion.chunk"
    events = []
    for choice in completion.get("choices") or []:
        if not isinstance(choice, Mapping):
            continue
        found = choice.get("message")
        message: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        delta: dict[str, Any] = {"role": message.get("role", "assistant"), "content": message.get("content") or ""}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])
                                   if isinstance(call, Mapping)]
        index = choice.get("index", 0)
        events.append(_event({**head, "choices": [{"index": index, "delta": delta, "finish_reason": None}]}))
        events.append(_event({**head, "choices": [{"index": index, "delta": {},
                                                   "finish_reason": choice.get("finish_reason") or "stop"}]}))
    if completion.get("usage") is not None:
        events.append(_event({**head, "choices": [], "usage": completion["usage"]}))
    return events


def verdict_event(completion_head: Mapping[str, Any], report: Mapping[str, Any]) -> bytes:
    """The last event before ``[DONE]``: a chunk with no choices (as a usage chunk is) that carries the
    gateway's verdicts in a top-level ``commitbench`` object."""
    head = {k: completion_head[k] for k in ("id", "model", "created") if k in completion_head}
    return _event({**head, "object": "chat.completion.chunk", "choices": [], "commitbench": dict(report)})
