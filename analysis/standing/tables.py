"""The tables of a standing report, as pure functions of the run rows.

* :func:`main_table`: every metric per model x intervention x policy (the paper's headline
  tables: override, net unauthorized release, strict accuracy, reinstatement obedience with the
  share before the trigger, consultation after relays, verification after claims);
* :func:`gap_table`: the same per gap as well (1 vs 20 filler steps);
* :func:`cell_table`: strict accuracy per cell, with intervals;
* :func:`paired_table`: differences between each intervention and a baseline intervention on the
  same episodes, per model and policy (paired cluster bootstrap);
* :func:`policy_table`: the policy's effect, explicit minus silent, per model and intervention
  (the two policies of an episode share its chat, so commitment types are resampled jointly);
* :func:`long_frame` / :func:`wide_frame`: the forms written to CSV and Markdown (the text of every
  number is :func:`commitbench.analysis.tables.interval_text`, as in every other table).

Every interval is a 95% bootstrap interval clustered by commitment type; every table counts the
runs left out because a judge label was missing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.bootstrap import paired_bootstrap
from commitbench.analysis.groups import group_positions
from commitbench.analysis.standing.metrics import (
    METRIC_NAMES,
    METRICS,
    MetricValue,
    compute_metrics,
    countable,
    paired_difference,
)
from commitbench.analysis.tables import interval_text

GROUP: tuple[str, ...] = ("agent", "interventions", "policy")
CELL_ORDER: tuple[str, ...] = ("BASE", "CRED", "DELEG", "PEER", "MGR", "RELAY", "FACT", "REINSTATE")
# The order in which metrics appear in tables.
MAIN_METRICS: tuple[str, ...] = (
    "override",
    "premature_execution",
    "net_unauthorized_release",
    "base_drop_rate",
    "strict_accuracy",
    "reinstatement_obedience",
    "reinstatement_before_trigger",
    "consultation_after_relays",
    "verification_after_claims",
    "executions_with_other_arguments",
    "duplicate_execution",
)

# In the JSON and the paper tables, not in the printed tables (the gross rate behind net unauthorized release).
DETAIL_METRICS: tuple[str, ...] = ("unauthorized_drop_rate",)
# Shown only when a run has a ledger arm (it is undefined elsewhere).
LEDGER_METRICS: tuple[str, ...] = ("ledger_recorded_unauthorized_release",)
assert set(MAIN_METRICS) | set(LEDGER_METRICS) | set(DETAIL_METRICS) == set(METRIC_NAMES)


def metrics_for(rows: pd.DataFrame) -> tuple[str, ...]:
    """The metrics a report shows for these rows."""
    has_ledger = bool(rows["interventions"].str.contains("ledger").any()) if not rows.empty else False
    return MAIN_METRICS + (LEDGER_METRICS if has_ledger else ())


def cell_sort_key(cell: str) -> tuple[int, str]:
    head = cell.split("-")[0]
    return (CELL_ORDER.index(head) if head in CELL_ORDER else len(CELL_ORDER), cell)


def main_table(rows: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> list[MetricValue]:
    return compute_metrics(rows, GROUP, metrics_for(rows), n_boot=n_boot, seed=seed)


def gap_table(rows: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> list[MetricValue]:
    return compute_metrics(rows, (*GROUP, "gap"), MAIN_METRICS, n_boot=n_boot, seed=seed)


def cell_table(
    rows: pd.DataFrame, n_boot: int = 1000, seed: int = 0, metric: str = "strict_accuracy"
) -> list[MetricValue]:
    """One metric per cell, with intervals (strict accuracy; premature execution in the cells with a release)."""
    values = compute_metrics(rows, (*GROUP, "cell"), (metric,), n_boot=n_boot, seed=seed)
    return [v for v in values if v.n or v.excluded]


# Intervention families whose arms are alternatives to one another: the best of each per model is a paper row.
ARM_FAMILIES: tuple[str, ...] = ("oracle",)


class BestArm(BaseModel):
    """The arm of a family (the oracle stores, say) with the highest strict accuracy for one model and policy."""

    group: dict[str, str] = Field(description="Model (agent) and policy.")
    family: str = Field(description="The family of arms compared (the intervention kind, e.g. oracle).")
    arm: str = Field(description="The best arm of the family (ties: the first by name).")
    metric: str = Field(default="strict_accuracy", description="The metric the arms are ranked by.")
    estimate: float | None = Field(description="Its estimate.")
    low: float | None = Field(description="Lower end of its 95% interval.")
    high: float | None = Field(description="Upper end of its 95% interval.")
    n: int = Field(description="Runs that entered it.")
    arms_compared: list[str] = Field(description="Every arm of the family the model played under this policy.")


def best_arms(rows: pd.DataFrame, n_boot: int = 1000, seed: int = 0,
              families: Sequence[str] = ARM_FAMILIES) -> list[BestArm]:
    """Per model and policy, the arm of each family with the highest strict accuracy (the standing paper's
    "best oracle store" beside the ledger arms), with its interval; none where the model played no such arm."""
    out: list[BestArm] = []
    if rows.empty:
        return out
    arms = rows["interventions"].astype(str)
    for family in families:
        part = rows[arms.str.startswith(f"{family}:") & ~arms.str.contains("+", regex=False)]
        if part.empty:
            continue
        values = compute_metrics(part, GROUP, ("strict_accuracy",), n_boot=n_boot, seed=seed)
        by_group: dict[tuple[str, str], list[MetricValue]] = {}
        for value in values:
            by_group.setdefault((value.group["agent"], value.group["policy"]), []).append(value)
        for (agent, policy), candidates in sorted(by_group.items()):
            ranked = sorted((v for v in candidates if v.estimate is not None),
                            key=lambda v: (-(v.estimate or 0.0), v.group["interventions"]))
            if not ranked:
                continue
            best = ranked[0]
            out.append(BestArm(group={"agent": agent, "policy": policy}, family=family,
                               arm=best.group["interventions"], estimate=best.estimate, low=best.low, high=best.high,
                               n=best.n, arms_compared=sorted(v.group["interventions"] for v in candidates)))
    return out


class PairedValue(BaseModel):
    """metric(arm) - metric(baseline) on the episodes both played, for one model and policy."""

    group: dict[str, str] = Field(description="Model (agent) and policy.")
    metric: str = Field(description="Metric name.")
    arm: str = Field(description="The intervention arm compared.")
    baseline: str = Field(description="The baseline arm.")
    estimate: float | None = Field(description="Difference of the point estimates (None when undefined).")
    low: float | None = Field(description="Lower end of the 95% paired-bootstrap interval.")
    high: float | None = Field(description="Upper end of the interval.")
    episodes: int = Field(description="Episodes both arms played.")
    clusters: int | None = Field(
        default=None, description="Clusters the interval resamples (commitment types); below 6 no interval is given."
    )


def _finite(x: float) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def paired_table(
    rows: pd.DataFrame,
    baseline: str,
    metrics: Sequence[str] = MAIN_METRICS,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[PairedValue]:
    """Each arm against ``baseline`` within each (agent, policy), on shared episodes."""
    out: list[PairedValue] = []
    if rows.empty:
        return out
    for (agent, policy), positions in group_positions(rows, ["agent", "policy"]):
        part = rows.iloc[positions]  # this group's rows only (a groupby copies the whole frame first)
        base = part[part["interventions"] == baseline]
        if base.empty:
            continue
        for arm in sorted(set(part["interventions"]) - {baseline}):
            other = part[part["interventions"] == arm]
            shared = set(other["episode_id"]) & set(base["episode_id"])
            if not shared:
                continue
            for metric in metrics:
                try:
                    result = paired_difference(other, base, metric, n_boot=n_boot, seed=seed)
                    estimate, low, high = _finite(result.estimate), _finite(result.low), _finite(result.high)
                    clusters: int | None = result.n_clusters
                except ValueError:  # the metric has no qualifying rows in one arm
                    estimate = low = high = clusters = None
                out.append(
                    PairedValue(
                        group={"agent": str(agent), "policy": str(policy)},
                        metric=metric,
                        arm=arm,
                        baseline=baseline,
                        estimate=estimate,
                        low=low,
                        high=high,
                        episodes=len(shared),
                        clusters=clusters,
                    )
                )
    return out


TWIN_KEY: tuple[str, ...] = ("commitment_type", "cell", "gap", "variant", "sample")


def policy_table(
    rows: pd.DataFrame, metrics: Sequence[str] = MAIN_METRICS, n_boot: int = 1000, seed: int = 0
) -> list[PairedValue]:
    """metric(explicit) - metric(silent) per model and intervention, on the chats both policies played and
    both count: the silent policy leaves the manager cells out of its metrics, so the explicit side leaves
    them out too (a paired difference compares like with like). Commitment types are resampled jointly."""
    out: list[PairedValue] = []
    if rows.empty:
        return out
    specs = {m.name: m for m in METRICS}
    # Masks over the whole frame, then each group's rows by position: only the rows a pair compares are copied
    # (a copy of each group, then of each policy's part of it, was most of what a standing report held).
    counted = countable(rows).to_numpy(dtype=bool)
    explicit_rows = (rows["policy"] == "explicit").to_numpy(dtype=bool) & counted
    silent_rows = (rows["policy"] == "silent").to_numpy(dtype=bool) & counted
    twin_columns = rows[list(TWIN_KEY)]
    for (agent, arm), positions in group_positions(rows, ["agent", "interventions"]):
        explicit_at, silent_at = _shared_chats(twin_columns, positions[explicit_rows[positions]],
                                               positions[silent_rows[positions]])
        if not len(explicit_at) or not len(silent_at):
            continue
        explicit, silent = rows.iloc[explicit_at], rows.iloc[silent_at]
        twins = len(set(map(tuple, explicit[list(TWIN_KEY)].astype(str).to_numpy())))
        for metric in metrics:
            spec = specs[metric]
            values_a, clusters_a, _ = spec.values(explicit)
            values_b, clusters_b, _ = spec.values(silent)
            try:
                result = paired_bootstrap(
                    values_a, clusters_a, values_b, clusters_b, stat=spec.stat, n_boot=n_boot, seed=seed
                )
                estimate, low, high = _finite(result.estimate), _finite(result.low), _finite(result.high)
                clusters: int | None = result.n_clusters
            except ValueError:
                estimate = low = high = clusters = None
            out.append(
                PairedValue(
                    group={"agent": str(agent), "interventions": str(arm)},
                    metric=metric,
                    arm="explicit",
                    baseline="silent",
                    estimate=estimate,
                    low=low,
                    high=high,
                    episodes=twins,
                    clusters=clusters,
                )
            )
    return out


def _shared_chats(twins: pd.DataFrame, explicit: np.ndarray, silent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the counted rows of each policy (positions in ``twins``, the frame's :data:`TWIN_KEY` columns), those
    whose chat (type, cell, gap, wording, sample) the other policy played and counts (a run left out of the
    silent policy's metrics, a manager cell, is left out of both)."""

    def keys(at: np.ndarray) -> pd.Series:
        parts = twins.iloc[at].astype(str)
        joined = parts[TWIN_KEY[0]]
        for name in TWIN_KEY[1:]:  # column by column: a Python call per row took seconds at 10,000 runs
            joined = joined + "|" + parts[name]
        return joined

    if not len(explicit) or not len(silent):
        return explicit[:0], silent[:0]
    # As plain texts: pandas' ``isin`` of a text column made a pyarrow scalar of every member of the set (about
    # 0.6 s for the twins of 100,000 runs), where a set lookup per row takes milliseconds.
    explicit_keys, silent_keys = keys(explicit).tolist(), keys(silent).tolist()
    shared = set(explicit_keys) & set(silent_keys)

    def kept(texts: list[str]) -> np.ndarray:
        return np.fromiter((text in shared for text in texts), dtype=bool, count=len(texts))

    return explicit[kept(explicit_keys)], silent[kept(silent_keys)]


# ----------------------------------------------------------------------------- table forms
def long_frame(values: Sequence[MetricValue]) -> pd.DataFrame:
    """One row per (group, metric) with estimate, interval, n and exclusions."""
    records = [{**v.group, "metric": v.metric, "estimate": v.estimate, "low": v.low, "high": v.high, "n": v.n,
                "excluded": v.excluded, "clusters": v.clusters} for v in values]
    return pd.DataFrame.from_records(records)


def paired_frame(values: Sequence[PairedValue]) -> pd.DataFrame:
    return pd.DataFrame.from_records(
        [{**v.group, "arm": v.arm, "baseline": v.baseline, "metric": v.metric, "difference": v.estimate,
          "low": v.low, "high": v.high, "episodes": v.episodes} for v in values]
    )


def wide_frame(values: Sequence[MetricValue], group_by: Sequence[str], column: str = "metric") -> pd.DataFrame:
    """Groups as rows, one text column per metric (or per cell): 'estimate [low, high] (n, k excl.)'."""
    records: dict[tuple[str, ...], dict[str, str]] = {}
    columns: list[str] = []
    for v in values:
        key = tuple(v.group.get(g, "") for g in group_by)
        name = v.metric if column == "metric" else v.group[column]
        if name not in columns:
            columns.append(name)
        text = interval_text(v.estimate, v.low, v.high, clusters=v.clusters)
        if v.estimate is not None:
            text += f" (n={v.n}" + (f", {v.excluded} excl.)" if v.excluded else ")")
        elif v.excluded:
            text += f" ({v.excluded} excl.)"
        records.setdefault(key, {})[name] = text
    if column == "cell":
        columns.sort(key=cell_sort_key)
    data = [{**dict(zip(group_by, key, strict=True)), **{c: cells.get(c, "") for c in columns}}
            for key, cells in records.items()]
    return pd.DataFrame.from_records(data, columns=[*group_by, *columns])

