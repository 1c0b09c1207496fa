"""The gateway in operation: which paths reach the upstream, who may read the ledger, and its metrics.

* **Exposure.** Only the chat route is checked; besides it, only the OpenAI paths a client needs reach the
  upstream unchecked (:data:`DEFAULT_PASS_PATHS`: models, completions, embeddings), plus the prefixes a
  deployment adds (``--pass-path``). Anything else is a 404 with an OpenAI-style error, so an upstream's
  admin routes (a mock server's ``/faults``, a server's own management paths) are not reachable through
  the gateway. ``/v1/commitments`` answers only when the gateway was given a token, and then only to a
  request that carries it (``Authorization: Bearer TOKEN``, compared in constant time).
* **Metrics.** :class:`GatewayMetrics` keeps Prometheus counters and histograms in a registry of its own,
  served as text at ``GET /metrics``: requests by route and status, verdicts by label, actions, upstream
  errors by status, the checks' time and the latency the gateway adds to the upstream's.
"""

from __future__ import annotations

import hmac
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = [
    "DEFAULT_PASS_PATHS",
    "METRICS_CONTENT_TYPE",
    "CountRequests",
    "GatewayMetrics",
    "bearer_matches",
    "passes",
    "route_of",
]

# Paths passed to the upstream unchecked, with or without the /v1 prefix (and everything below them).
DEFAULT_PASS_PATHS: tuple[str, ...] = ("/v1/models", "/v1/completions", "/v1/embeddings")
METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST
# Seconds: the checks of one reply, and what the gateway adds to the upstream's time.
_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _under(path: str, prefix: str) -> bool:
    prefix = "/" + prefix.strip("/")
    return path == prefix or path.startswith(prefix + "/")


def passes(path: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether a path other than the chat route goes to the upstream: a default pass path (with or without
    ``/v1``) or below a prefix the deployment added."""
    for prefix in DEFAULT_PASS_PATHS:
        if _under(path, prefix) or _under(path, prefix.removeprefix("/v1")):
            return True
    return any(_under(path, prefix) for prefix in extra)


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries ``Bearer TOKEN`` (constant-time comparison)."""
    if not header or not token:
        return False
    scheme, _, given = header.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


class GatewayMetrics:
    """The gateway's Prometheus metrics, in a registry of its own (one per gateway)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("commitbench_gateway_requests", "Requests served, by route and status.",
                                ["route", "status"], registry=self.registry)
        self.verdicts = Counter("commitbench_gateway_verdicts", "Checked replies (choices), by label.", ["label"],
                                registry=self.registry)
        self.actions = Counter("commitbench_gateway_actions", "What the gateway did with a checked reply.",
                               ["action"], registry=self.registry)
        self.upstream_errors = Counter("commitbench_gateway_upstream_errors",
                                       "Chat requests the upstream failed (its error status, 502 or 504).",
                                       ["status"], registry=self.registry)
        self.check_seconds = Histogram("commitbench_gateway_check_seconds", "Time of one request's checks.",
                                       buckets=_BUCKETS, registry=self.registry)
        self.added_seconds = Histogram("commitbench_gateway_added_seconds",
                                       "Latency the gateway added to the upstream's, per checked request.",
                                       buckets=_BUCKETS, registry=self.registry)

    def served(self, route: str, status: int) -> None:
        self.requests.labels(route=route, status=str(status)).inc()

    def checked(self, labels: list[str], actions: list[str], check_s: float, added_s: float) -> None:
        for label in labels:
            self.verdicts.labels(label=label).inc()
        for action in actions:
            self.actions.labels(action=action).inc()
        self.check_seconds.observe(max(check_s, 0.0))
        self.added_seconds.observe(max(added_s, 0.0))

    def upstream_failed(self, status: int) -> None:
        self.upstream_errors.labels(status=str(status)).inc()

    def text(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


def route_of(path: str) -> str:
    """The route a path belongs to, as the request counter names it."""
    if path in ("/v1/chat/completions", "/chat/completions"):
        return "chat"
    if path in ("/v1/commitments", "/health", "/metrics"):
        return path.rsplit("/", 1)[-1]
    return "pass" if passes(path) else "other"


class CountRequests:
    """ASGI middleware: every HTTP request counted by route and status in the gateway's metrics."""

    def __init__(self, app: Any, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        route = route_of(str(scope.get("path", "")))

        async def counted(message: Any) -> None:
            if message.get("type") == "http.response.start":
                self.metrics.served(route, int(message.get("status", 0)))
            await send(message)

        await self.app(scope, receive, counted)
