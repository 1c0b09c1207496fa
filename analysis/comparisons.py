"""Paired model comparisons: model a minus model b on the same episodes, with cost beside the effect.

A comparison names two *sides*, each a player (``chat:qwen-on``) in an intervention arm. It keeps the
runs both sides played (the same episode and sample: ``pair_key``), computes a metric on each side's
runs and the difference ``a - b`` with a 95% paired cluster bootstrap (both sides resampled with the
same cluster draws: commitment types in the standing suite, requests in the follow-up suite). Each
suite supplies its metrics as :class:`PairedMetric` (a function of a frame to value columns and
clusters, and the statistic of their totals), so the engine is the same for both.

Three kinds: ``explicit`` (asked for with ``report --compare A B``), ``thinking`` (found without
being asked: two models of one run whose settings differ only in the thinking switch and what thinking
needs) and ``language`` (found: a player's Turkish side minus its English side, paired by twin
episode). A thinking pair whose "on" side returned no reasoning text is flagged, because the server may
have ignored the switch: its numbers are shown with the flag, never silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.bootstrap import StatFn, paired_bootstrap
from commitbench.analysis.cost import CostRow
from commitbench.analysis.tables import TableView, interval_text, percent

ValuesFn = Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray, int]]  # rows -> values, clusters, excluded


class ComparisonKind(str, Enum):
    THINKING = "thinking"  # found: the two settings differ only in the thinking switch
    EXPLICIT = "explicit"  # asked for with --compare
    LANGUAGE = "language"  # found: one player's runs in another language minus its English twins
    PARTIES = "parties"  # found: an arm played with live parties minus the same arm with the scripted ones


@dataclass(frozen=True)
class PairedMetric:
    """A metric as the comparison engine needs it."""

    name: str
    values: ValuesFn
    stat: StatFn | None = None


class Side(BaseModel):
    """One side of a comparison: a player, in one intervention arm (None: every arm both sides played)."""

    model: str = Field(description="Player name as in the report's rows (e.g. chat:qwen3-8b).")
    arm: str | None = Field(default=None, description="Intervention arm label, or null for each shared arm.")

    def label(self) -> str:
        return self.model if self.arm is None else f"{self.model}@{self.arm}"


class ModelPair(BaseModel):
    """Two sides to compare, a minus b."""

    a: Side
    b: Side
    kind: ComparisonKind

    @staticmethod
    def parse(a: str, b: str, players: Sequence[str], arms: Sequence[str]) -> ModelPair:
        """``--compare A B``: each a model label (``qwen3-8b`` or ``chat:qwen3-8b``), optionally ``@arm``."""
        return ModelPair(a=_side(a, players, arms), b=_side(b, players, arms), kind=ComparisonKind.EXPLICIT)


def _side(text: str, players: Sequence[str], arms: Sequence[str]) -> Side:
    name, _, arm = text.partition("@")
    matches = [p for p in players if name in (p, f"chat:{p}") or p == f"chat:{name}"]
    if not matches:
        raise ValueError(f"--compare: no player {name!r} in this run; players: {', '.join(players)}")
    if arm and arm not in arms:
        raise ValueError(f"--compare: no arm {arm!r} in this run; arms: {', '.join(arms)}")
    return Side(model=matches[0], arm=arm or None)


class Comparison(BaseModel):
    """metric(a) - metric(b) on the runs both sides played, in one group."""

    a: str = Field(description="Side a: player, or player@arm.")
    b: str = Field(description="Side b.")
    kind: ComparisonKind = Field(description="thinking (found) or explicit (asked for).")
    metric: str = Field(description="Metric name.")
    group: dict[str, str] = Field(description="The group the metric is computed in (policy; setup x variant ...).")
    estimate: float | None = Field(description="a minus b (null when the metric is undefined on either side).")
    low: float | None = Field(description="Lower end of the 95% paired cluster-bootstrap interval.")
    high: float | None = Field(description="Upper end of the interval.")
    n_pairs: int = Field(description="Runs (episode x sample) both sides played in the group.")
    a_value: float | None = Field(default=None, description="The metric on side a's paired runs.")
    b_value: float | None = Field(default=None, description="The metric on side b's paired runs.")
    token_ratio: float | None = Field(default=None, description="Tokens per run, a over b (prompt + completion).")
    time_ratio: float | None = Field(default=None, description="Median model time per run, a over b.")
    flag: str | None = Field(default=None, description="Why the comparison needs care (e.g. no reasoning returned).")


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def concrete_sides(pair: ModelPair, arms_of: Mapping[str, set[str]]) -> list[tuple[Side, Side]]:
    """The (a, b) sides of a pair with their arms filled in: one per arm both play when none is named."""
    a_arms = arms_of.get(pair.a.model, set())
    b_arms = arms_of.get(pair.b.model, set())
    if pair.a.arm is not None or pair.b.arm is not None:
        a_arm = pair.a.arm or pair.b.arm
        b_arm = pair.b.arm or pair.a.arm
        return [(Side(model=pair.a.model, arm=a_arm), Side(model=pair.b.model, arm=b_arm))]
    return [(Side(model=pair.a.model, arm=arm), Side(model=pair.b.model, arm=arm)) for arm in sorted(a_arms & b_arms)]


def compare_pair(
    rows: pd.DataFrame,
    a: Side,
    b: Side,
    kind: ComparisonKind,
    metrics: Sequence[PairedMetric],
    *,
    model_column: str,
    arm_column: str,
    group_by: Sequence[str],
    pair_key: Sequence[str],
    costs: Mapping[tuple[str, str], CostRow] | None = None,
    flag: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[Comparison]:
    """Every metric, a minus b, per group of ``group_by``, on the runs whose ``pair_key`` both sides have."""
    side_a = rows[(rows[model_column] == a.model) & (rows[arm_column] == a.arm)]
    side_b = rows[(rows[model_column] == b.model) & (rows[arm_column] == b.arm)]
    cost_a = (costs or {}).get((a.model, a.arm or ""))
    cost_b = (costs or {}).get((b.model, b.arm or ""))
    token_ratio = _ratio(cost_a.tokens_per_run, cost_b.tokens_per_run) if cost_a and cost_b else None
    time_ratio = (_ratio(cost_a.model_time_median_s, cost_b.model_time_median_s) if cost_a and cost_b else None)
    out: list[Comparison] = []
    if side_a.empty or side_b.empty:
        return out
    key = list(pair_key)
    keys_b = set(map(tuple, side_b[key].astype(str).to_numpy()))
    keep_a = side_a[[k in keys_b for k in map(tuple, side_a[key].astype(str).to_numpy())]]
    keys_a = set(map(tuple, keep_a[key].astype(str).to_numpy()))
    keep_b = side_b[[k in keys_a for k in map(tuple, side_b[key].astype(str).to_numpy())]]
    groups = sorted(set(map(tuple, keep_a[list(group_by)].astype(str).to_numpy()))) if group_by else [()]
    for group in groups:
        if group_by:
            in_a = (keep_a[list(group_by)].astype(str) == list(group)).all(axis=1)
            in_b = (keep_b[list(group_by)].astype(str) == list(group)).all(axis=1)
            part_a, part_b = keep_a[in_a], keep_b[in_b]
        else:
            part_a, part_b = keep_a, keep_b
        for metric in metrics:
            estimate = low = high = a_value = b_value = None
            values_a, clusters_a, _ = metric.values(part_a)
            values_b, clusters_b, _ = metric.values(part_b)
            if len(values_a) and len(values_b):
                result = paired_bootstrap(values_a, clusters_a, values_b, clusters_b, stat=metric.stat,
                                          n_boot=n_boot, seed=seed)
                estimate, low, high = _finite(result.estimate), _finite(result.low), _finite(result.high)
                a_value = _finite(_point(values_a, metric.stat))
                b_value = _finite(_point(values_b, metric.stat))
            out.append(Comparison(
                a=a.label(), b=b.label(), kind=kind, metric=metric.name,
                group=dict(zip(group_by, group, strict=True)), estimate=estimate, low=low, high=high,
                n_pairs=len(part_a), a_value=a_value, b_value=b_value, token_ratio=token_ratio,
                time_ratio=time_ratio, flag=flag,
            ))
    return out


def _point(values: np.ndarray, stat: StatFn | None) -> float:
    matrix = np.asarray(values, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[:, None]
    sums = matrix.sum(axis=0)
    n = np.asarray(float(matrix.shape[0]))
    if stat is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(sums[0] / n)
    return float(np.asarray(stat(sums, n)))


def no_reasoning_flag(costs: Mapping[tuple[str, str], CostRow], side: Side) -> str | None:
    """The flag for a thinking pair whose "on" side never returned reasoning text (None when it did)."""
    cost = costs.get((side.model, side.arm or ""))
    if cost is None or cost.reasoning_calls > 0:
        return None
    return (f"{side.label()} is the thinking side but returned no reasoning text in {cost.model_calls} calls: "
            "the server may have ignored the switch")


def compare_all(
    rows: pd.DataFrame,
    pairs: Sequence[ModelPair],
    metrics: Sequence[PairedMetric],
    cost: Sequence[CostRow],
    *,
    model_column: str,
    arm_column: str,
    group_by: Sequence[str],
    pair_key: Sequence[str],
    n_boot: int = 1000,
    seed: int = 0,
) -> list[Comparison]:
    """Every pair (each arm both sides played, unless one is named), every metric, per group."""
    costs = {(c.group[model_column], c.group[arm_column]): c for c in cost}
    arms_of: dict[str, set[str]] = {}
    # Each (model, arm) once, in the order first played: not a Python text per row of both columns (at 100,000 runs,
    # about 18 MB held while they were read).
    for model, arm in rows[[model_column, arm_column]].drop_duplicates().itertuples(index=False, name=None):
        arms_of.setdefault(str(model), set()).add(str(arm))
    out: list[Comparison] = []
    for pair in pairs:
        for a, b in concrete_sides(pair, arms_of):
            flag = no_reasoning_flag(costs, a) if pair.kind is ComparisonKind.THINKING else None
            out.extend(compare_pair(
                rows, a, b, pair.kind, metrics, model_column=model_column, arm_column=arm_column,
                group_by=group_by, pair_key=pair_key, costs=costs, flag=flag, n_boot=n_boot, seed=seed,
            ))
    return out


def comparison_frame(values: Sequence[Comparison]) -> pd.DataFrame:
    """One row per comparison, for CSV."""
    return pd.DataFrame.from_records([
        {"a": c.a, "b": c.b, "kind": c.kind.value, "metric": c.metric, **c.group, "a_value": c.a_value,
         "b_value": c.b_value, "difference": c.estimate, "low": c.low, "high": c.high, "n_pairs": c.n_pairs,
         "token_ratio": c.token_ratio, "time_ratio": c.time_ratio, "flag": c.flag or ""}
        for c in values
    ])


# What the cost table shows for a player whose model calls the harness cannot see.
UNRECORDED = "unrecorded"


def comparison_views(comparisons: list[Comparison], cost: list[CostRow], cost_keys: tuple[str, ...]) -> list[TableView]:
    """The comparison table (difference, both values, pairs, cost ratios, flag) and the cost table."""
    views: list[TableView] = []
    if comparisons:
        body = [
            [c.a, c.b, c.kind.value, ", ".join(c.group.values()), c.metric,
             interval_text(c.estimate, c.low, c.high, signed=True), percent(c.a_value), percent(c.b_value),
             str(c.n_pairs),
             "-" if c.token_ratio is None else f"{c.token_ratio:.2g}x",
             "-" if c.time_ratio is None else f"{c.time_ratio:.2g}x", "!" if c.flag else ""]
            for c in comparisons
        ]
        views.append(TableView(
            title="Model comparisons: a minus b on the same runs (a language pair: on twin episodes) (pp, 95% paired "
            "interval); cost ratio a/b; "
            "! see the flags below",
            columns=["a", "b", "kind", "group", "metric", "a - b", "a", "b", "pairs", "tokens", "time", "flag"],
            rows=body, numeric=[False, False, False, False, False, True, True, True, True, True, True, False],
        ))
    if cost:
        body = [
            [*(c.group[k] for k in cost_keys), str(c.runs), *(
                [UNRECORDED] * 6 if c.calls_unrecorded and not c.model_calls else
                [f"{c.calls_per_run:.1f}", str(c.cache_hits), f"{c.tokens_per_run:.0f}",
                 f"{c.reasoning_tokens}" + ("~" if c.reasoning_estimated else ""),
                 "-" if c.model_time_median_s is None else f"{c.model_time_median_s:.2f}",
                 "-" if c.model_time_p95_s is None else f"{c.model_time_p95_s:.2f}"])]
            for c in cost
        ]
        unrecorded = any(c.calls_unrecorded for c in cost)
        views.append(TableView(
            title="Cost per run (calls and tokens per run, cache hits in all; model time: the original calls', cache "
            "hits included; ~ reasoning estimated)",
            note=("unrecorded: a player of your own that calls models with a client of its own; the harness sees "
                  "none of those calls (declare uses_model = True to call through it: docs/agents.md)")
            if unrecorded else "",
            columns=[*cost_keys, "runs", "calls", "cache hits", "tokens", "reasoning tok", "time p50 s", "time p95 s"],
            rows=body, numeric=[*(False for _ in cost_keys), True, True, True, True, True, True, True],
        ))
    return views


def comparison_flags(comparisons: Sequence[Comparison]) -> list[str]:
    """Each distinct flag once, for the lines under the tables."""
    seen: list[str] = []
    for c in comparisons:
        if c.flag and c.flag not in seen:
            seen.append(c.flag)
    return seen
