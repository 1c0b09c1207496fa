"""A client's counters (calls, cache hits, retries, errors, tokens), and several clients' added up."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

__all__ = ["ClientStats", "merge_client_stats"]


class ClientStats(BaseModel):
    """A snapshot of a client's counters, for progress bars and run summaries."""

    calls: int = Field(description="complete() calls started.")
    completed: int = Field(description="complete() calls finished (with or without error).")
    in_flight: int = Field(description="HTTP requests in flight now.")
    http_requests: int = Field(description="HTTP attempts made.")
    retries: int = Field(description="Attempts that were retries.")
    cache_hits: int = Field(description="Calls served from the cache.")
    cache_misses: int = Field(description="Calls that went to the server.")
    cache_replaced: int = Field(
        default=0, description="Cache entries that were no recorded completion: the call was made again and its "
        "answer written over the entry."
    )
    cache_replaced_keys: list[str] = Field(default_factory=list, description="The first few of those entries' keys.")
    prompt_tokens: int = Field(description="Prompt tokens of server-answered calls.")
    completion_tokens: int = Field(description="Completion tokens of server-answered calls.")
    errors: dict[str, int] = Field(description="Recorded errors by kind.")
    concurrency_limit: int = Field(description="Current adaptive concurrency limit.")
    elapsed_s: float = Field(description="Seconds since the first call.")
    calls_per_s: float = Field(description="Completed calls per second since the first call.")
    replica_requests: dict[str, int] = Field(
        default_factory=dict, description="HTTP attempts per replica (base URL), when the model has several."
    )
    replica_moves: int = Field(default=0, description="Calls that moved a session to another replica.")


def merge_client_stats(stats: Sequence[ClientStats]) -> ClientStats:
    """The counters of several clients added up (rates too; the elapsed time is the longest)."""
    errors: Counter[str] = Counter()
    replicas: Counter[str] = Counter()
    for s in stats:
        errors.update(s.errors)
        replicas.update(s.replica_requests)
    return ClientStats(
        calls=sum(s.calls for s in stats),
        completed=sum(s.completed for s in stats),
        in_flight=sum(s.in_flight for s in stats),
        http_requests=sum(s.http_requests for s in stats),
        retries=sum(s.retries for s in stats),
        cache_hits=sum(s.cache_hits for s in stats),
        cache_misses=sum(s.cache_misses for s in stats),
        cache_replaced=sum(s.cache_replaced for s in stats),
        cache_replaced_keys=[key for s in stats for key in s.cache_replaced_keys][:5],
        prompt_tokens=sum(s.prompt_tokens for s in stats),
        completion_tokens=sum(s.completion_tokens for s in stats),
        errors=dict(errors),
        concurrency_limit=sum(s.concurrency_limit for s in stats),
        elapsed_s=max((s.elapsed_s for s in stats), default=0.0),
        calls_per_s=sum(s.calls_per_s for s in stats),
        replica_requests=dict(replicas),
        replica_moves=sum(s.replica_moves for s in stats),
    )
