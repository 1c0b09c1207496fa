"""What playing a run cost, from its traces: model calls, tokens (reasoning apart) and model time.

Model time is the server time of the call that produced each completion. A cache hit carries the
original call's time (kept in the cache entry), so a resumed or replayed run reports what its calls
cost, not how long the lookups took; a call whose original time is unknown (a cache entry written
before times were kept) is counted in ``model_time_unknown_calls`` and left out of the time figures.
Reasoning tokens are the server's count where it reports one, otherwise estimated from the reasoning
text (``reasoning_estimated``). The calls of live parties (the party model and its manipulation check) voice
the environment, not the tested model: they are counted apart (``party_calls``, ``party_tokens``) and left out
of the player's own columns, so a live arm's cost compares with its scripted twin's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.groups import group_positions
from commitbench.analysis.rowstore import RowStore
from commitbench.oracles.standing.parties import CHECK_PURPOSE, PARTY_PURPOSE
from commitbench.traces import EpisodeTrace

# The columns :func:`run_cost` adds to a run's row.
COST_COLUMNS: tuple[str, ...] = (
    "model_calls", "prompt_tokens", "completion_tokens", "reasoning_tokens", "reasoning_estimated",
    "model_time_s", "model_time_unknown_calls", "reasoning_calls", "reasoning_returned", "calls_unrecorded",
    "cache_hits", "party_calls", "party_tokens",
)
# The purposes of the calls live parties make: the environment's calls, not the player's.
PARTY_PURPOSES = frozenset({PARTY_PURPOSE, CHECK_PURPOSE})
# Players whose model calls the harness sees: the chat agent (its calls), the reference rules (none).
_RECORDED_KINDS = frozenset({"chat", "reference"})


def calls_unrecorded(trace: EpisodeTrace) -> bool:
    """Whether the run's player may call models the harness never sees: a class of the user's own that does
    not take the harness's model (``uses_model``), so its zero calls mean unknown, not none."""
    agent = trace.agent
    return agent is not None and agent.kind not in _RECORDED_KINDS and "model" not in agent.settings


def run_cost(trace: EpisodeTrace) -> dict[str, Any]:
    """The cost columns of one run (model calls that reached a model or the cache; notices left out)."""
    calls = [c for c in trace.model_calls if c.purpose != "notice" and c.purpose not in PARTY_PURPOSES]
    party = [c for c in trace.model_calls if c.purpose in PARTY_PURPOSES]
    known = [c.model_time_s for c in calls if c.model_time_s is not None]
    reasoning_calls = sum(1 for c in calls if c.reasoning)
    return {
        "model_calls": len(calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "reasoning_tokens": sum(c.reasoning_tokens for c in calls),
        "reasoning_estimated": any(c.reasoning_tokens_estimated for c in calls),
        "model_time_s": float(sum(known)),
        "model_time_unknown_calls": len(calls) - len(known),
        "reasoning_calls": reasoning_calls,
        "reasoning_returned": reasoning_calls > 0,
        "calls_unrecorded": calls_unrecorded(trace),
        "cache_hits": sum(1 for c in calls if c.cache_hit),
        "party_calls": len(party),
        "party_tokens": sum(c.prompt_tokens + c.completion_tokens for c in party),
    }


class CostRow(BaseModel):
    """What one model (and arm) cost over the runs of a report."""

    group: dict[str, str] = Field(description="The model (player) and the intervention arm.")
    runs: int = Field(description="Runs (episodes x samples) played.")
    model_calls: int = Field(description="Model calls, cache hits included.")
    cache_hits: int = Field(default=0, description="Of those, calls answered from the cache.")
    calls_per_run: float = Field(description="Mean model calls per run.")
    prompt_tokens: int = Field(description="Prompt tokens in all.")
    completion_tokens: int = Field(description="Completion tokens in all (reasoning included, as servers count).")
    reasoning_tokens: int = Field(description="Reasoning tokens in all.")
    reasoning_estimated: bool = Field(description="Some reasoning counts were estimated from the text.")
    tokens_per_run: float = Field(description="Mean prompt + completion tokens per run.")
    model_time_median_s: float | None = Field(description="Median model time per run (null: unknown).")
    model_time_p95_s: float | None = Field(description="95th percentile of model time per run.")
    model_time_unknown_calls: int = Field(description="Calls whose original time is unknown (left out of times).")
    reasoning_calls: int = Field(description="Calls that returned reasoning text.")
    calls_unrecorded: bool = Field(
        default=False, description="Some runs were played by a class of the user's own with a model client of its "
        "own: the harness saw none of those calls, so the counts here are not its cost.",
    )


def cost_table(rows: pd.DataFrame, by: Sequence[str]) -> list[CostRow]:
    """Per group of ``by`` (e.g. model and arm), the cost of its runs (rows carrying :data:`COST_COLUMNS`)."""
    out: list[CostRow] = []
    if rows.empty or "model_calls" not in rows.columns:
        return out
    columns = rows[[c for c in COST_COLUMNS if c in rows.columns]]  # only what a cost row reads, then by group
    for keys, positions in group_positions(rows, by):
        part = columns.iloc[positions]
        times = part.loc[part["model_calls"] > part["model_time_unknown_calls"], "model_time_s"].to_numpy(float)
        n = len(part)
        prompt, completion = int(part["prompt_tokens"].sum()), int(part["completion_tokens"].sum())
        out.append(CostRow(
            group={col: str(val) for col, val in zip(by, keys, strict=True)},
            runs=n,
            model_calls=int(part["model_calls"].sum()),
            cache_hits=int(part["cache_hits"].sum()) if "cache_hits" in part else 0,
            calls_per_run=float(part["model_calls"].mean()),
            prompt_tokens=prompt,
            completion_tokens=completion,
            reasoning_tokens=int(part["reasoning_tokens"].sum()),
            reasoning_estimated=bool(part["reasoning_estimated"].any()),
            tokens_per_run=(prompt + completion) / n,
            model_time_median_s=float(np.median(times)) if times.size else None,
            model_time_p95_s=float(np.percentile(times, 95)) if times.size else None,
            model_time_unknown_calls=int(part["model_time_unknown_calls"].sum()),
            reasoning_calls=int(part["reasoning_calls"].sum()),
            calls_unrecorded=bool(part["calls_unrecorded"].any()) if "calls_unrecorded" in part else False,
        ))
    return out


def cost_frame(traces: Iterable[EpisodeTrace], keys: Mapping[str, Any]) -> pd.DataFrame:
    """One row of cost columns per trace, with the identifying columns ``keys`` computes from it
    (``{"model": callable(trace) -> str, ...}``)."""
    store = RowStore()
    for trace in traces:
        store.add(cost_row(trace, keys))
    return cost_frame_of(store, keys)


def cost_row(trace: EpisodeTrace, keys: Mapping[str, Any]) -> dict[str, Any]:
    """The cost row of one trace (see :func:`cost_frame`), for a pass over the traces that does more."""
    return {**{name: fn(trace) for name, fn in keys.items()}, **run_cost(trace)}


def cost_frame_of(store: RowStore, keys: Mapping[str, Any]) -> pd.DataFrame:
    """The frame of cost rows gathered in ``store`` (see :func:`cost_frame`)."""
    rows = store.frame(categorical=True)
    return rows if len(rows.columns) else pd.DataFrame(columns=[*keys, *COST_COLUMNS])
