"""Reading HTTP response bodies within a size bound (see :mod:`commitbench.bounds`).

:func:`bound_response_bodies` makes an ``httpx`` client stop reading any body past the bound (a
response hook wraps the body's stream, so the bodies the ``openai`` SDK reads itself, those of error
responses, are bounded too); :func:`read_body` reads a streamed body, counting the bytes after
decoding, so a compressed body cannot expand past the bound either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from commitbench.bounds import ResponseTooLarge
from commitbench.sdkhttp import http

__all__ = ["bound_response_bodies", "read_body"]


def _declared_length(response: http.Response) -> int | None:
    value = response.headers.get("content-length", "")
    return int(value) if value.isdigit() and len(value) < 20 else None


class _BoundedStream(http.AsyncByteStream):
    """A response body stream that raises :class:`ResponseTooLarge` once more than ``limit`` bytes came."""

    def __init__(self, inner: http.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def bound_response_bodies(client: http.AsyncClient, limit: int) -> None:
    """Bound every response body ``client`` reads to ``limit`` bytes (on the wire), whoever reads it.

    Installed as a response hook, so it also holds for the bodies the ``openai`` SDK reads itself
    (those of error responses). Calling it again on the same client replaces the bound.
    """

    async def bound(response: http.Response) -> None:
        declared = _declared_length(response)
        if declared is not None and declared > limit:
            raise ResponseTooLarge(limit, declared)
        stream = response.stream
        if isinstance(stream, http.AsyncByteStream):
            response.stream = _BoundedStream(stream, limit)

    bound.commitbench_bound = True  # type: ignore[attr-defined]
    hooks = dict(client.event_hooks)
    kept = [hook for hook in hooks.get("response", []) if not getattr(hook, "commitbench_bound", False)]
    hooks["response"] = [*kept, bound]
    client.event_hooks = hooks


async def read_body(response: http.Response, limit: int) -> bytes:
    """The decoded body of a streamed response, at most ``limit`` bytes (else :class:`ResponseTooLarge`)."""
    declared = _declared_length(response)
    if declared is not None and declared > limit:
        raise ResponseTooLarge(limit, declared)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ResponseTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
