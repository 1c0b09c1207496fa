"""A model served by several servers: one session per replica by rendezvous hashing, with bounded loads and health."""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Sequence

from commitbench.callerrors import (
    FirstCallsGuard,
    ModelError,
    ModelErrorKind,
)
from commitbench.llm.limiter import AdaptiveLimiter
from commitbench.llm.settings import ReplicaPolicy
from commitbench.secrets import redact_credentials, split_credentials, split_query

__all__ = ["BOUNDED_LOAD", "Replica", "ReplicaPool"]


_UNREACHABLE = frozenset({ModelErrorKind.CONNECTION, ModelErrorKind.TIMEOUT})
# Sessions whose replica the pool remembers, at most (far more than episodes in flight).
_PLACEMENTS = 100_000
# A new session skips a replica whose load (requests in flight and waiting) is at least this many
# times its share (consistent hashing with bounded loads).
BOUNDED_LOAD = 1.25


def _load(replica: Replica) -> int:
    return replica.limiter.in_flight + replica.limiter.waiting


class Replica:
    """One server of a model: its URL, its own concurrency limit and its health."""

    __slots__ = ("credentials", "failures", "index", "label", "last_error", "limiter", "out_until", "query", "url")

    def __init__(self, index: int, url: str, limit: int, min_limit: int) -> None:
        self.index = index
        # Credentials go as basic authentication, query parameters as the query of each request: the URL the
        # SDK and the HTTP client see, and the replica's label, hold neither.
        url, self.credentials = split_credentials(url)
        self.url, self.query = split_query(url)
        self.label = self.url
        self.limiter = AdaptiveLimiter(limit, min_limit=min(min_limit, limit))
        self.failures = 0  # refused connections / timeouts in a row
        self.out_until = 0.0  # monotonic time it comes back; 0: in rotation
        self.last_error = ""


class ReplicaPool:
    """The replicas of one model, shared by the clients (shards) of one event loop.

    :meth:`place` picks the replica of a session: the one that served its previous call while it
    is in rotation. A new session goes to the first replica in its rendezvous-hash order (which
    depends on the session id and the replica URLs only) that is in rotation and not already
    loaded beyond :data:`BOUNDED_LOAD` times its share of the requests in flight and waiting
    (consistent hashing with bounded loads: hashing alone piles a few too many sessions on some
    replica, which then bounds the run). When a replica goes out, only its sessions move, each to
    the next replica in its own order, and the move is reported once.
    """

    def __init__(
        self, base_urls: Sequence[str], *, max_concurrency: int = 64, min_concurrency: int = 1,
        policy: ReplicaPolicy | None = None,
    ) -> None:
        if not base_urls:
            raise ValueError("a replica pool needs at least one base URL")
        self.policy = policy or ReplicaPolicy()
        limit = self.policy.max_concurrency or max_concurrency
        self.replicas = [Replica(i, url, limit, min_concurrency) for i, url in enumerate(base_urls)]
        labels = [r.label for r in self.replicas]
        if len(set(labels)) != len(labels):
            raise ValueError(f"replica base URLs must differ, got {labels}")
        self._placements: OrderedDict[str, int] = OrderedDict()
        # How the model's first calls ended (every client of the model shares it): a server that answers
        # none of them usably stops the run.
        self.first_calls = FirstCallsGuard()

    def __len__(self) -> int:
        return len(self.replicas)

    def order(self, session: str) -> list[Replica]:
        """The replicas in the session's preference order (rendezvous hashing on session and URL)."""
        def weight(replica: Replica) -> bytes:
            return hashlib.blake2b(f"{session}\x00{replica.label}".encode(), digest_size=8).digest()

        return sorted(self.replicas, key=weight, reverse=True)

    def is_in(self, replica: Replica, now: float) -> bool:
        return replica.out_until <= now

    def place(self, session: str) -> tuple[Replica, str | None]:
        """The replica for the next attempt of ``session``'s call, and a description of the move when the
        session leaves the replica it was on (or, on its first call, its home replica)."""
        if len(self.replicas) == 1:
            return self.replicas[0], None
        now = time.monotonic()
        index = self._placements.get(session)
        current = self.replicas[index] if index is not None else None
        if current is not None and self.is_in(current, now):
            self._placements.move_to_end(session)
            return current, None
        order = self.order(session)
        candidates = [r for r in order if self.is_in(r, now)]
        if current is None:
            current = order[0]
            # A new session goes to the first replica in its order that is not already busier than its share
            # (consistent hashing with bounded loads): a few hashes must not pile sessions on one replica.
            bound = math.ceil(BOUNDED_LOAD * (sum(_load(r) for r in candidates) + 1) / max(1, len(candidates)))
            chosen = next((r for r in candidates if _load(r) < bound), candidates[0] if candidates else None)
        else:
            chosen = candidates[0] if candidates else None
        if chosen is None:  # every replica is out: the one back soonest
            chosen = min(self.replicas, key=lambda r: r.out_until)
        self._placements[session] = chosen.index
        self._placements.move_to_end(session)
        if len(self._placements) > _PLACEMENTS:
            self._placements.popitem(last=False)
        if chosen is current or self.is_in(current, now):  # the home replica was only busy: a placement, no move
            return chosen, None
        why = current.last_error or "out of rotation"
        return chosen, f"{current.label} -> {chosen.label}: {current.label} is out of rotation ({why})"

    def on_success(self, replica: Replica) -> None:
        replica.failures = 0

    def on_failure(self, replica: Replica, error: ModelError) -> None:
        """Count a refused connection or a timeout; enough in a row take the replica out for a while."""
        if error.kind not in _UNREACHABLE or len(self.replicas) == 1:
            return
        replica.failures += 1
        if replica.failures >= self.policy.failures_to_eject and replica.out_until <= time.monotonic():
            replica.out_until = time.monotonic() + self.policy.eject_s
            replica.last_error = (
                f"{replica.failures} {error.kind.value} failures in a row, out for {self.policy.eject_s:g}s; "
                f"last: {redact_credentials(error.message)[:200]}"
            )
            # Back in rotation on probation: one more failure takes it out again.
            replica.failures = self.policy.failures_to_eject - 1

    def out_of_rotation(self) -> list[str]:
        """Labels of the replicas out of rotation now."""
        now = time.monotonic()
        return [r.label for r in self.replicas if not self.is_in(r, now)]
