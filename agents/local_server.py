"""``python -m commitbench.agents.local_server ARGS``: llama.cpp's OpenAI-compatible server with commitbench's
chat handlers registered (``--chat_format commitbench-chatml`` or ``commitbench-gemma``; see
:mod:`commitbench.agents.local_chat`). Every other argument is llama-cpp-python's server's own.

Two requests the OpenAI API and vLLM accept are refused by llama-cpp-python's request model: an
assistant message whose ``content`` is ``null`` beside its ``tool_calls``, and a ``json_schema``
response format. :class:`RequestFix` rewrites them before the request is validated (``content: ""``;
``{"type": "json_object", "schema": ...}``, which the commitbench handler constrains to the schema).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# A chat request larger than this is passed on untouched (the server refuses it anyway: the context is small).
MAX_BODY = 16 * 1024 * 1024


def fix_request(body: bytes) -> bytes:
    """A chat request body as llama-cpp-python's server accepts it (see the module docstring); else unchanged."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if not isinstance(data, dict):
        return body
    changed = False
    messages = data.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("content", "") is None:
            message["content"] = ""
            changed = True
    response_format = data.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        data["response_format"] = {"type": "json_object", "schema": schema if isinstance(schema, dict) else {}}
        changed = True
    return json.dumps(data, ensure_ascii=False).encode("utf-8") if changed else body


class RequestFix:
    """ASGI middleware applying :func:`fix_request` to ``POST .../chat/completions`` bodies."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or not str(scope.get("path", "")).endswith(
            "/chat/completions"
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if not message.get("more_body") or size > MAX_BODY:
                break
        body = b"".join(chunks)
        if size <= MAX_BODY:
            body = fix_request(body)
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await self.app({**scope, "headers": headers}, _replay([{"type": "http.request", "body": body}], receive), send)


def _replay(messages: list[Message], then: Receive) -> Receive:
    """A receive channel that hands out ``messages`` first, then whatever ``then`` receives (a disconnect)."""
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        return await then()

    return receive


def main() -> None:
    import llama_cpp.server.__main__ as server

    from commitbench.agents.local_chat import register_handlers

    register_handlers()
    create_app = server.create_app
    server.create_app = lambda **kwargs: RequestFix(create_app(**kwargs))
    server.main()


if __name__ == "__main__":
    main()
