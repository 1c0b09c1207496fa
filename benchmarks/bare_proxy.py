"""A bare pass-through proxy: what any proxy in front of the upstream costs, with no check at all.

    python benchmarks/bare_proxy.py --upstream http://127.0.0.1:8000/v1      # prints "listening on URL"
    python benchmarks/bare_proxy.py --canned                                 # an upstream of its own (below)

aiohttp's own server and one aiohttp client session (the gateway's upstream client): each request's body
goes upstream as it came, the reply comes back as it came. ``benchmarks/gateway.py`` runs it beside the
gateway on the same upstream and load, so the gateway's cost is read against a proxy's, not against a
direct call (which no deployment of a proxy can match).

With ``--canned`` it is no proxy but an upstream that answers every chat request with one fixed completion,
reading the body and never parsing it: ``benchmarks/gateway.py --large`` sends its 12 MB requests to a
gateway in front of it, so that what holds the small requests up is the gateway's, not an upstream parsing
the large body on the loop that serves them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket

import aiohttp
from aiohttp import web

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "upgrade"}


def app(upstream: str) -> web.Application:
    base = upstream.rstrip("/")
    session: dict[str, aiohttp.ClientSession] = {}

    async def start(_: web.Application) -> None:
        session["s"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=512, limit_per_host=0),
                                             auto_decompress=False)

    async def stop(_: web.Application) -> None:
        await session["s"].close()

    async def forward(request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with session["s"].post(base + request.path.removeprefix("/v1"), data=body, headers=headers) as reply:
            payload = await reply.read()
            kept = {k: v for k, v in reply.headers.items() if k.lower() not in HOP_BY_HOP}
            return web.Response(body=payload, status=reply.status, headers=kept)

    application = web.Application(client_max_size=64 << 20)
    application.router.add_post("/v1/chat/completions", forward)
    application.on_startup.append(start)
    application.on_cleanup.append(stop)
    return application


CANNED = json.dumps({
    "id": "chatcmpl-canned", "object": "chat.completion", "created": 0, "model": "canned",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Your 3pm is free."}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6},
}).encode()


def canned_app() -> web.Application:
    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=CANNED, content_type="application/json")

    application = web.Application(client_max_size=64 << 20)
    application.router.add_post("/v1/chat/completions", answer)
    return application


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--upstream", help="the upstream's base URL (ends in /v1)")
    where.add_argument("--canned", action="store_true", help="no upstream: answer every chat request with one "
                       "fixed completion, the body read and never parsed")
    args = parser.parse_args()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}/v1", flush=True)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    web.run_app(canned_app() if args.canned else app(args.upstream), sock=listener, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    raise SystemExit(main())
