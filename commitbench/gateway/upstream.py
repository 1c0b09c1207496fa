"""The gateway's side of the upstream: one ``aiohttp`` session, its timeouts and limits, and what its faults become.

One :class:`aiohttp.ClientSession` holds every connection to the upstream (``max_connections`` at most).
``aiohttp`` rather than httpx2 (the project's client elsewhere): a proxy places one upstream request for every
request it serves, and ``aiohttp`` spends a fraction of httpx2's CPU on each (docs/gateway.md, "Speed").

A proxy named by the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) is looked up
once, when the session opens: every request goes to the one upstream host.

Timeouts: ``connect_s`` to open a connection, ``read_s`` of silence while the reply is read (each read, as
httpx2's read timeout) and ``read_s`` in all for one attempt (connect, head and body: a reply that
trickles in is cut there), :data:`POOL_WAIT_S` for a free connection when all are busy. A base URL may carry
a query (``?api-version=...``): it goes with every request, before the client's own query. Nothing else is done to
requests: no redirect is followed, no cookie is kept (a cookie one user's reply sets never goes out with
another user's request), the body goes with the content type the client gave it, and replies are read as they
came (``auto_decompress`` off: a compressed body passed through stays compressed, with its header).
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import aiohttp.payload

from commitbench.llm import redact_credentials

# Headers that belong to one connection, not to the request or reply (and the ones the client library sets).
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length",
})
POOL_WAIT_S = 60.0
# What a failed upstream call raises: connection, protocol and payload errors, and every timeout.
UPSTREAM_ERRORS = (aiohttp.ClientError, TimeoutError)


class ChunksPayload(aiohttp.payload.Payload):
    """A request body held as the chunks it arrived in, written one by one with its length declared.

    Joining a body of several megabytes into one buffer, or writing it in one piece, holds the event loop
    up for milliseconds (the pages of a fresh buffer are faulted in one by one); chunk by chunk, the loop
    serves other requests between them.
    """

    _autoclose = True  # nothing to close: the chunks are in memory

    def __init__(self, chunks: list[bytes]) -> None:
        super().__init__(chunks)
        self._size = sum(len(chunk) for chunk in chunks)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return b"".join(self._value).decode(encoding, errors)

    async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"".join(self._value)

    async def write(self, writer: Any) -> None:
        for chunk in self._value:
            await writer.write(chunk)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        remaining = content_length
        for chunk in self._value:
            if remaining is not None:
                if remaining <= 0:
                    return
                chunk = chunk[:remaining]
                remaining -= len(chunk)
            await writer.write(chunk)


class ReplyTooLarge(ValueError):
    """An upstream reply longer than the gateway reads."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the upstream's reply is larger than the limit of {limit:,} bytes")


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, or None (none named, or ``NO_PROXY`` covers the host)."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class Upstream:
    """The session to the upstream at ``base`` (a base URL, usually ending in ``/v1``); open it with ``async with``."""

    def __init__(self, base: str, *, connect_s: float, read_s: float, max_connections: int,
                 max_reply_bytes: int) -> None:
        parts = urllib.parse.urlsplit(base)
        # Credentials in the base URL are sent as Basic auth when the client sends no Authorization of its own
        # (a client's header wins); they never appear in a URL the gateway builds, logs or reports.
        self._auth = (aiohttp.BasicAuth(urllib.parse.unquote(parts.username or ""),
                                        urllib.parse.unquote(parts.password or ""))
                      if parts.username is not None else None)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port is not None:
            netloc += f":{parts.port}"
        path = parts.path.rstrip("/")
        self.base = urllib.parse.urlunsplit((parts.scheme, netloc, path, "", ""))
        self.origin = self.base[: -len("/v1")] if self.base.endswith("/v1") else self.base
        self.base_query = parts.query  # an Azure-style api-version goes with every request
        self.read_s = read_s
        self.max_reply_bytes = max_reply_bytes
        # One total deadline per attempt (connect, head and body), as the run's model client has, besides the
        # limit on silence between reads: an upstream that trickles cannot hold a client past it.
        self._timeout = aiohttp.ClientTimeout(total=read_s, connect=POOL_WAIT_S + connect_s,
                                              sock_connect=connect_s, sock_read=read_s)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._proxy: str | None = None

    async def __aenter__(self) -> Upstream:
        connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=self._timeout, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
            skip_auto_headers=("Content-Type",),
        )
        self._proxy = environment_proxy(self.base)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def url(self, path: str, query: str = "") -> str:
        """The upstream's URL for a gateway path: ``/v1/...`` under the base URL, anything else under its origin."""
        url = self.base + path[len("/v1"):] if path.startswith("/v1/") else self.origin + path
        joined = "&".join(q for q in (self.base_query, query) if q)
        return f"{url}?{joined}" if joined else url

    async def send(self, method: str, url: str, body: bytes | list[bytes], headers: Mapping[str, str]
                   ) -> aiohttp.ClientResponse:
        """Send a request; the response with its head read (the body still to read). Raises ``UPSTREAM_ERRORS``.

        ``body``: the bytes, or a large body as the chunks it came in (sent one by one, never joined).
        """
        if self._session is None:
            raise aiohttp.ClientConnectionError("the gateway's upstream session is not open")
        own = any(name.lower() == "authorization" for name in headers)
        data = ChunksPayload(body) if isinstance(body, list) else body or None
        return await self._session.request(method, url, data=data, headers=dict(headers),
                                           allow_redirects=False, proxy=self._proxy,
                                           auth=None if own else self._auth)

    async def read(self, response: aiohttp.ClientResponse) -> bytes:
        """The whole body of ``response``, at most ``max_reply_bytes`` of it (:class:`ReplyTooLarge`); closes it."""
        limit = self.max_reply_bytes
        declared = response.content_length
        try:
            if declared is not None and declared > limit:
                raise ReplyTooLarge(limit)
            chunks, size = [], 0
            async for chunk in response.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise ReplyTooLarge(limit)
                chunks.append(chunk)
        except BaseException:
            response.close()
            raise
        response.release()
        return b"".join(chunks)

    @staticmethod
    async def chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        """The body of ``response`` as it comes. Raises ``UPSTREAM_ERRORS`` when the stream breaks off."""
        async for chunk in response.content.iter_any():
            yield chunk

    @staticmethod
    def reply_headers(response: aiohttp.ClientResponse) -> dict[str, str]:
        """The reply's headers to pass on."""
        return {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}

    def failure(self, exc: BaseException) -> tuple[int, str, str]:
        """What a failed call becomes: (status, message, error type); the message holds no credential."""
        if isinstance(exc, TimeoutError):
            return 504, f"the upstream did not answer within {self.read_s:g} s (the deadline of one attempt)", "timeout"
        reason = redact_credentials(f"{type(exc).__name__}: {exc}")[:300]
        return 502, f"the upstream could not be reached ({reason})", "upstream_error"
