"""Seeded, vectorised cluster and paired bootstrap (numpy only).

Rows are grouped into clusters (in this project: requests, or commitment types); a replicate draws
clusters with replacement and keeps all rows of each drawn cluster, so rows of one cluster are never
treated as independent. Every statistic here is a function of per-column totals, which is what makes the
computation vectorised: the rows are summed once per cluster, and a block of replicates is one array of
drawn cluster indices from which every column's replicate totals are gathered and summed at once.

A statistic is a callable ``stat(sums, n)``: ``sums`` has shape ``(..., k)`` (the totals of the k value
columns) and ``n`` shape ``(...)`` (the number of rows), and it returns shape ``(...)``. ``mean_stat``
(the default for one column) and ``ratio_stat`` (column 0 total over column 1 total) cover rates; any
difference of rates on the same rows is a one-line statistic of the same form. A replicate whose
statistic is undefined (0/0) is NaN and is left out of the interval; ``n_valid`` says how many remain.

The interval is the percentile interval of the replicate statistics (:func:`percentile_interval`, also
used by the prevalence estimate, which combines strata replicate by replicate). With fewer than
:data:`MIN_CLUSTERS` clusters resampling them says little about the spread, so no interval is
given: ``low`` and ``high`` are NaN (null in reports) and ``n_clusters`` says why; tables write
:func:`interval_note` (``n/a (2 clusters)``) in its place (through
:func:`commitbench.analysis.tables.interval_text`). Both suites' reports go through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

StatFn = Callable[[np.ndarray, np.ndarray], np.ndarray]

# Fewest clusters for which an interval is given (commitment types in standing, requests in follow-up).
MIN_CLUSTERS = 6
# Bootstrap replicates, at most: intervals stop moving long before; past it a report would run for days.
MAX_N_BOOT = 100_000

# Upper bound on the entries of one (replicates x clusters) multiplicity block, to bound memory.
_BLOCK_ENTRIES = 500_000


def mean_stat(sums: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Mean of the first value column."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums[..., 0] / n


def ratio_stat(sums: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Total of column 0 over total of column 1 (a rate with its own denominator)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums[..., 0] / sums[..., 1]


class BootstrapResult(BaseModel):
    """A point estimate with its bootstrap percentile interval."""

    model_config = ConfigDict(frozen=True)

    estimate: float = Field(description="The statistic on the original rows (NaN when undefined).")
    low: float = Field(description="Lower end of the percentile interval (NaN when no replicate is defined).")
    high: float = Field(description="Upper end of the percentile interval.")
    confidence: float = Field(description="Coverage of the interval, e.g. 0.95.")
    n_boot: int = Field(description="Replicates drawn.")
    n_valid: int = Field(description="Replicates whose statistic was defined.")
    n_clusters: int = Field(description="Distinct clusters resampled.")
    n_rows: int = Field(description="Rows in the input (both arms together for a paired bootstrap).")
    seed: int = Field(description="Seed of the random generator.")


def interval_withheld(n_clusters: int | None, min_clusters: int = MIN_CLUSTERS) -> bool:
    """True when an estimate over ``n_clusters`` clusters gets no interval."""
    return n_clusters is not None and n_clusters < min_clusters


def interval_note(n_clusters: int | None, min_clusters: int = MIN_CLUSTERS) -> str:
    """What a table shows instead of a withheld interval (``n/a (2 clusters)``); '' when one is given."""
    if not interval_withheld(n_clusters, min_clusters):
        return ""
    return f"n/a ({n_clusters} cluster{'' if n_clusters == 1 else 's'})"


def _as_matrix(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name} must be one- or two-dimensional, got shape {array.shape}")
    return array


def _check_args(n_boot: int, confidence: float) -> None:
    if not 1 <= n_boot <= MAX_N_BOOT:
        raise ValueError(f"n_boot must be from 1 to {MAX_N_BOOT:,}, got {n_boot}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def _cluster_totals(values: np.ndarray, codes: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per-cluster column totals with the row count appended as the last column: shape (C, k + 1)."""
    totals = np.empty((n_clusters, values.shape[1] + 1))
    for column in range(values.shape[1]):
        totals[:, column] = np.bincount(codes, weights=values[:, column], minlength=n_clusters)
    totals[:, -1] = np.bincount(codes, minlength=n_clusters)
    return totals


def _replicate_totals(
    cluster_totals: list[np.ndarray], n_boot: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Totals of every replicate for each table in ``cluster_totals`` (all resampled with the same draws).

    Each block of replicates draws its cluster indices once and gathers every column with them; blocks are
    kept small enough to stay in cache, which matters more than the number of numpy calls.
    """
    n_clusters = cluster_totals[0].shape[0]
    block = max(1, min(n_boot, _BLOCK_ENTRIES // max(n_clusters, 1)))
    outputs = [np.empty((n_boot, t.shape[1])) for t in cluster_totals]
    columns = [[np.ascontiguousarray(t[:, j]) for j in range(t.shape[1])] for t in cluster_totals]
    for start in range(0, n_boot, block):
        size = min(block, n_boot - start)
        draws = rng.integers(0, n_clusters, size=(size, n_clusters))
        for out, table_columns in zip(outputs, columns, strict=True):
            for j, column in enumerate(table_columns):
                out[start : start + size, j] = np.take(column, draws).sum(axis=1)
    return outputs


def _apply(stat: StatFn, totals: np.ndarray) -> np.ndarray:
    return np.asarray(stat(totals[..., :-1], totals[..., -1]), dtype=float)


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float, int]:
    """The percentile interval of the defined (finite) replicates, and how many there were.

    NaN ends when no replicate is defined. Every bootstrap of the project takes its interval here.
    """
    valid = replicates[np.isfinite(replicates)]
    if valid.size == 0:
        return float("nan"), float("nan"), 0
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(valid, [tail, 100.0 - tail])
    return float(low), float(high), int(valid.size)


def cluster_codes(clusters: Any) -> tuple[np.ndarray, int]:
    """Each row's cluster as a code from 0, the codes in the sorted order of the ids (as ``np.unique`` gives
    them), and the number of clusters. A pandas categorical whose categories are sorted is coded from its
    integer codes, which gives the same codes without sorting every row's text."""
    cat = getattr(clusters, "cat", None)
    if cat is not None and cat.categories.is_monotonic_increasing and bool((cat.codes.to_numpy() >= 0).all()):
        _, codes = np.unique(cat.codes.to_numpy(), return_inverse=True)
    else:
        _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    return codes, (int(codes.max()) + 1 if len(codes) else 0)


def _replicates(
    values: Any, clusters: Any, stat: StatFn | None, n_boot: int, seed: int
) -> tuple[float, np.ndarray, int, int]:
    """The point estimate, the replicate statistics, the number of clusters and of rows."""
    matrix = _as_matrix(values, "values")
    shape = (len(clusters),) if hasattr(clusters, "cat") else np.shape(clusters)
    if shape != (matrix.shape[0],):
        raise ValueError(f"clusters must have one id per row: {shape} ids for {matrix.shape[0]} rows")
    if matrix.shape[0] == 0:
        raise ValueError("cannot bootstrap zero rows")
    function = stat or mean_stat
    codes, n_clusters = cluster_codes(clusters)
    totals = _cluster_totals(matrix, codes, n_clusters)
    estimate = float(_apply(function, totals.sum(axis=0)))
    rng = np.random.default_rng(seed)
    (replicate_totals,) = _replicate_totals([totals], n_boot, rng)
    return estimate, _apply(function, replicate_totals), n_clusters, matrix.shape[0]


def cluster_bootstrap_replicates(
    values: Any, clusters: Any, stat: StatFn | None = None, n_boot: int = 1000, seed: int = 0
) -> tuple[float, np.ndarray]:
    """The point estimate and the ``n_boot`` replicate statistics (NaN where undefined)."""
    estimate, replicates, _, _ = _replicates(values, clusters, stat, n_boot, seed)
    return estimate, replicates


def cluster_bootstrap(
    values: Any,
    clusters: Any,
    stat: StatFn | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> BootstrapResult:
    """Cluster bootstrap of ``stat`` over rows ``values`` (shape (n,) or (n, k)) grouped by ``clusters`` (an
    id per row: an array, a list, or a pandas series, categorical or not).

    With fewer than ``min_clusters`` clusters the interval is withheld (NaN).
    """
    _check_args(n_boot, confidence)
    estimate, replicates, n_clusters, n_rows = _replicates(values, clusters, stat, n_boot, seed)
    low, high, n_valid = percentile_interval(replicates, confidence)
    if interval_withheld(n_clusters, min_clusters):
        low = high = float("nan")
    return BootstrapResult(
        estimate=estimate,
        low=low,
        high=high,
        confidence=confidence,
        n_boot=n_boot,
        n_valid=n_valid,
        n_clusters=n_clusters,
        n_rows=n_rows,
        seed=seed,
    )


def paired_bootstrap(
    values_a: Any,
    clusters_a: Any,
    values_b: Any,
    clusters_b: Any,
    stat: StatFn | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> BootstrapResult:
    """Paired bootstrap of ``stat(a) - stat(b)``: each replicate draws clusters once for both arms.

    A cluster that appears in only one arm contributes nothing to the other arm's totals when drawn.
    With fewer than ``min_clusters`` clusters the interval is withheld (NaN).
    """
    _check_args(n_boot, confidence)
    matrix_a = _as_matrix(values_a, "values_a")
    matrix_b = _as_matrix(values_b, "values_b")
    if matrix_a.shape[1] != matrix_b.shape[1]:
        raise ValueError(f"both arms need the same value columns: {matrix_a.shape[1]} vs {matrix_b.shape[1]}")
    ids_a = np.asarray(clusters_a)
    ids_b = np.asarray(clusters_b)
    if ids_a.shape != (matrix_a.shape[0],) or ids_b.shape != (matrix_b.shape[0],):
        raise ValueError("clusters_a and clusters_b must have one id per row of their arm")
    if matrix_a.shape[0] == 0 or matrix_b.shape[0] == 0:
        raise ValueError("cannot bootstrap an arm with zero rows")
    function = stat or mean_stat
    _, codes = np.unique(np.concatenate([ids_a, ids_b]), return_inverse=True)
    n_clusters = int(codes.max()) + 1
    totals_a = _cluster_totals(matrix_a, codes[: len(ids_a)], n_clusters)
    totals_b = _cluster_totals(matrix_b, codes[len(ids_a) :], n_clusters)
    estimate = float(_apply(function, totals_a.sum(axis=0)) - _apply(function, totals_b.sum(axis=0)))
    rng = np.random.default_rng(seed)
    rep_a, rep_b = _replicate_totals([totals_a, totals_b], n_boot, rng)
    replicates = _apply(function, rep_a) - _apply(function, rep_b)
    low, high, n_valid = percentile_interval(replicates, confidence)
    if interval_withheld(n_clusters, min_clusters):
        low = high = float("nan")
    return BootstrapResult(
        estimate=estimate,
        low=low,
        high=high,
        confidence=confidence,
        n_boot=n_boot,
        n_valid=n_valid,
        n_clusters=n_clusters,
        n_rows=len(ids_a) + len(ids_b),
        seed=seed,
    )
