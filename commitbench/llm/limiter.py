"""The adaptive concurrency limit of a client or a replica: halved on a 429, raised slot by slot on success (AIMD)."""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["AdaptiveLimiter"]


class AdaptiveLimiter:
    """An asyncio concurrency limit that adapts: AIMD on rate-limit signals.

    ``acquire`` returns the limiter's epoch; pass it to :meth:`on_rate_limited` so that a burst of
    429s from requests sent under the same limit halves it once, not once per request.
    """

    def __init__(self, max_limit: int, *, min_limit: int = 1, decrease_factor: float = 0.5) -> None:
        if max_limit < 1 or not 1 <= min_limit <= max_limit:
            raise ValueError(f"need 1 <= min_limit <= max_limit, got {min_limit}, {max_limit}")
        self.max_limit = max_limit
        self.min_limit = min_limit
        self._factor = decrease_factor
        self._limit = float(max_limit)
        self._in_flight = 0
        self._epoch = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return int(self._limit)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Acquirers waiting for a slot."""
        return len(self._waiters)

    async def acquire(self) -> int:
        if not self._waiters and self._in_flight < int(self._limit):
            self._in_flight += 1
            return self._epoch
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            raise
        return self._epoch

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._in_flight < int(self._limit):
            future = self._waiters.popleft()
            if not future.done():
                self._in_flight += 1
                future.set_result(None)

    def on_success(self) -> None:
        """Additive increase: one more slot per window of successes."""
        if self._limit < self.max_limit:
            self._limit = min(float(self.max_limit), self._limit + 1.0 / self._limit)
            self._wake()

    def on_rate_limited(self, epoch: int) -> None:
        """Multiplicative decrease, once per epoch."""
        if epoch != self._epoch:
            return
        self._epoch += 1
        self._limit = max(float(self.min_limit), self._limit * self._factor)


# Failures after which a replica counts as unreachable (it refused the connection or never answered).
