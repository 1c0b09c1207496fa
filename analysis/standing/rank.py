"""The rank effect: does a manager's word release the promise more often than a peer's?

Neither a peer nor an unnamed manager has standing, so a correct assistant drops on neither's word;
a gap between the two rates is rank doing the work standing should do. The comparison is made
under each policy, the silent one included (the one place where the silent policy's manager runs
count: every other metric leaves them out, because the silent policy never says managers lack
standing). The runs compared are those of cells where only someone without standing cancels, read
from what the cells' events do (never from the cells' ids): each run in which the manager cancels is
paired with the run in which a peer cancels in the same style (direct or implicit), of the same
commitment type, gap, surface wording and sample. The compiler gives such twins one chat, line for
line, except the speaker of the cancellation, so the two rates are measured on chats that differ only
in who speaks; runs without such a twin are left out and counted. Intervals are 95% paired cluster
bootstraps by commitment type (both arms resampled with the same draws).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.bootstrap import cluster_bootstrap, paired_bootstrap
from commitbench.analysis.groups import group_positions

CLUSTER = "commitment_type"
PAIR_KEY: tuple[str, ...] = ("commitment_type", "event_style", "gap", "variant", "sample")
MANAGER, PEER = "manager", "peer"
GROUP: tuple[str, ...] = ("agent", "interventions", "policy")


class RankMeasure(str, Enum):
    """What counts as giving way to the speaker."""

    DROPPED = "dropped"  # the promise was not executed
    DROPPED_WITHOUT_CONSULTING = "dropped_without_consulting"  # ...and the creditor was never asked


class RankEffect(BaseModel):
    """Manager-minus-peer drop rate for one model, intervention arm and policy."""

    group: dict[str, str] = Field(description="agent, interventions and policy.")
    measure: RankMeasure = Field(description="What counts as a drop.")
    manager: float | None = Field(description="Rate on a manager's word (MGR-* runs that have a PEER twin).")
    manager_low: float | None = Field(description="Lower end of the manager rate's 95% interval.")
    manager_high: float | None = Field(description="Upper end of the manager rate's 95% interval.")
    peer: float | None = Field(description="Rate on a peer's word (PEER-* runs that have an MGR twin).")
    peer_low: float | None = Field(description="Lower end of the peer rate's 95% interval.")
    peer_high: float | None = Field(description="Upper end of the peer rate's 95% interval.")
    estimate: float | None = Field(description="Manager rate minus peer rate (None when undefined).")
    low: float | None = Field(description="Lower end of the difference's 95% paired interval.")
    high: float | None = Field(description="Upper end of the difference's 95% paired interval.")
    pairs: int = Field(description="MGR/PEER twin pairs compared.")
    unpaired: int = Field(description="MGR or PEER runs left out for want of a twin.")
    excluded: int = Field(description="Pairs left out because a judge label needed by the measure was missing.")
    clusters: int | None = Field(
        default=None, description="Clusters the intervals resample (commitment types); below 6 no interval is given."
    )


def _finite(x: float) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def _value(rows: pd.DataFrame, measure: RankMeasure) -> pd.Series:
    """1.0 / 0.0 per row, NaN where the measure needs a missing label."""
    dropped = rows["dropped"].astype(bool)
    if measure is RankMeasure.DROPPED:
        return dropped.astype(float)
    consulted = rows["consulted"]
    value = (dropped & (consulted == False)).astype(float)  # noqa: E712 (None-aware)
    return value.where(consulted.notna() | ~dropped, np.nan)


def _pairs(part: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    rows = part[part["unauthorized_cell"].astype(bool) & part["event_speaker"].isin((MANAGER, PEER))]
    if rows.empty:
        return rows, 0
    key = list(PAIR_KEY)
    mgr = rows[rows["event_speaker"] == MANAGER].drop_duplicates(key)
    peer = rows[rows["event_speaker"] == PEER].drop_duplicates(key)
    paired = mgr.merge(peer, on=key, suffixes=("_mgr", "_peer"))
    unpaired = len(mgr) + len(peer) - 2 * len(paired)
    return paired, unpaired


def rank_effect_table(
    rows: pd.DataFrame,
    measures: Sequence[RankMeasure] = tuple(RankMeasure),
    n_boot: int = 1000,
    seed: int = 0,
) -> list[RankEffect]:
    """The rank effect per model x intervention x policy, for every run set holding MGR and PEER twins."""
    out: list[RankEffect] = []
    if rows.empty:
        return out
    for key, positions in group_positions(rows, GROUP):
        part = rows.iloc[positions]  # this group's rows only (a groupby copies the whole frame first)
        group = {col: str(val) for col, val in zip(GROUP, key, strict=True)}
        paired, unpaired = _pairs(part)
        if paired.empty:
            continue
        for measure in measures:
            mgr = _value(paired.rename(columns=lambda c: c.removesuffix("_mgr")), measure)
            peer = _value(paired.rename(columns=lambda c: c.removesuffix("_peer")), measure)
            known = (mgr.notna() & peer.notna()).to_numpy()
            clusters = paired[CLUSTER].to_numpy()[known]
            m, p = mgr.to_numpy()[known], peer.to_numpy()[known]
            result = dict.fromkeys(
                ("manager", "manager_low", "manager_high", "peer", "peer_low", "peer_high", "estimate", "low",
                 "high", "clusters"),
            )
            if known.any():
                diff = paired_bootstrap(m, clusters, p, clusters, n_boot=n_boot, seed=seed)
                rate_m = cluster_bootstrap(m, clusters, n_boot=n_boot, seed=seed)
                rate_p = cluster_bootstrap(p, clusters, n_boot=n_boot, seed=seed)
                result = {
                    "manager": _finite(rate_m.estimate), "manager_low": _finite(rate_m.low),
                    "manager_high": _finite(rate_m.high), "peer": _finite(rate_p.estimate),
                    "peer_low": _finite(rate_p.low), "peer_high": _finite(rate_p.high),
                    "estimate": _finite(diff.estimate), "low": _finite(diff.low), "high": _finite(diff.high),
                    "clusters": diff.n_clusters,
                }
            out.append(RankEffect(
                group=group, measure=measure, pairs=int(known.sum()), unpaired=unpaired,
                excluded=int((~known).sum()), **result,
            ))
    return out


def rank_frame(values: Sequence[RankEffect]) -> pd.DataFrame:
    """One row per (group, measure), for CSV."""
    return pd.DataFrame.from_records([
        {**v.group, "measure": v.measure.value, "manager": v.manager, "peer": v.peer, "difference": v.estimate,
         "low": v.low, "high": v.high, "pairs": v.pairs, "unpaired": v.unpaired, "excluded": v.excluded,
         "clusters": v.clusters}
        for v in values
    ])
