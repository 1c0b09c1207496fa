"""Cluster and paired bootstrap: exact small cases, agreement with a plain loop, coverage, errors."""

from __future__ import annotations

import numpy as np
import pytest

from commitbench.analysis.bootstrap import (
    MIN_CLUSTERS,
    cluster_bootstrap,
    cluster_bootstrap_replicates,
    cluster_codes,
    interval_note,
    interval_withheld,
    mean_stat,
    paired_bootstrap,
    ratio_stat,
)


def test_two_cluster_case_by_hand() -> None:
    # Cluster "a" holds two successes, cluster "b" one failure. A replicate draws two clusters:
    # aa -> 4/4 = 1 (p 1/4), ab or ba -> 2/3 (p 1/2), bb -> 0 (p 1/4).
    values = [1.0, 1.0, 0.0]
    clusters = ["a", "a", "b"]
    estimate, replicates = cluster_bootstrap_replicates(values, clusters, n_boot=4000, seed=3)
    assert estimate == pytest.approx(2 / 3)
    rounded = np.round(replicates, 9)
    assert set(rounded) <= {0.0, round(2 / 3, 9), 1.0}
    assert np.mean(rounded == 1.0) == pytest.approx(0.25, abs=0.03)
    assert np.mean(rounded == round(2 / 3, 9)) == pytest.approx(0.5, abs=0.03)
    result = cluster_bootstrap(values, clusters, n_boot=4000, seed=3, min_clusters=1)
    assert (result.low, result.high) == (0.0, 1.0)
    assert result.n_clusters == 2 and result.n_rows == 3 and result.n_valid == 4000


def test_vectorised_replicates_equal_a_plain_loop() -> None:
    rng = np.random.default_rng(7)
    n_rows, n_clusters, n_boot = 200, 17, 50
    values = np.column_stack([rng.random(n_rows), rng.integers(1, 3, n_rows)])
    clusters = rng.integers(0, n_clusters, n_rows)
    _, replicates = cluster_bootstrap_replicates(values, clusters, ratio_stat, n_boot=n_boot, seed=11)
    # The same draws, one replicate at a time.
    codes = np.unique(clusters, return_inverse=True)[1]
    draws = np.random.default_rng(11).integers(0, n_clusters, size=(n_boot, n_clusters))
    expected = []
    for row in draws:
        rows = np.concatenate([np.flatnonzero(codes == c) for c in row])
        expected.append(values[rows, 0].sum() / values[rows, 1].sum())
    np.testing.assert_allclose(replicates, expected, rtol=1e-12)


def test_seeded_and_deterministic() -> None:
    rng = np.random.default_rng(0)
    values, clusters = rng.random(500), rng.integers(0, 40, 500)
    first = cluster_bootstrap(values, clusters, seed=5)
    assert first == cluster_bootstrap(values, clusters, seed=5)
    assert first != cluster_bootstrap(values, clusters, seed=6)
    assert first.low < first.estimate < first.high


def test_singleton_clusters_match_the_row_bootstrap_scale() -> None:
    rng = np.random.default_rng(1)
    values = (rng.random(2000) < 0.3).astype(float)
    result = cluster_bootstrap(values, np.arange(2000), n_boot=1000, seed=0)
    half_width = (result.high - result.low) / 2
    expected = 1.96 * np.sqrt(values.mean() * (1 - values.mean()) / 2000)
    assert half_width == pytest.approx(expected, rel=0.15)


def test_coverage_of_a_clustered_rate() -> None:
    # Requests with their own success probability; 10 responses each. The 95% interval should cover the
    # population rate in roughly 95% of simulated studies.
    rng = np.random.default_rng(2024)
    truth = 0.3
    covered = 0
    studies = 300
    for study in range(studies):
        p = rng.beta(3, 7, size=40)  # mean 0.3
        values = (rng.random((40, 10)) < p[:, None]).astype(float).ravel()
        clusters = np.repeat(np.arange(40), 10)
        result = cluster_bootstrap(values, clusters, n_boot=400, seed=study)
        covered += result.low <= truth <= result.high
    assert 0.88 <= covered / studies <= 0.99


def test_ratio_with_empty_denominators() -> None:
    # Only cluster "x" has a denominator; replicates without it are undefined and left out.
    values = np.array([[1.0, 2.0], [0.0, 0.0], [0.0, 0.0]])
    result = cluster_bootstrap(values, ["x", "y", "z"], ratio_stat, n_boot=500, seed=0, min_clusters=1)
    assert result.estimate == pytest.approx(0.5)
    assert 0 < result.n_valid < 500
    assert result.low == result.high == pytest.approx(0.5)
    none = cluster_bootstrap(np.array([[0.0, 0.0]]), ["x"], ratio_stat, n_boot=10)
    assert np.isnan(none.estimate) and np.isnan(none.low) and none.n_valid == 0


def test_paired_identical_arms_have_zero_difference() -> None:
    rng = np.random.default_rng(3)
    values, clusters = rng.random(300), rng.integers(0, 30, 300)
    result = paired_bootstrap(values, clusters, values, clusters, n_boot=300)
    assert result.estimate == 0.0 and result.low == 0.0 and result.high == 0.0


def test_paired_is_tighter_than_unpaired_for_correlated_arms() -> None:
    rng = np.random.default_rng(4)
    base = np.repeat(rng.random(60), 5)  # strong request effect shared by both arms
    clusters = np.repeat(np.arange(60), 5)
    arm_a = base + 0.1 + rng.normal(0, 0.02, base.size)
    arm_b = base + rng.normal(0, 0.02, base.size)
    paired = paired_bootstrap(arm_a, clusters, arm_b, clusters, n_boot=1000, seed=1)
    assert paired.estimate == pytest.approx(0.1, abs=0.01)
    a = cluster_bootstrap(arm_a, clusters, n_boot=1000, seed=1)
    b = cluster_bootstrap(arm_b, clusters, n_boot=1000, seed=2)
    unpaired_width = np.hypot(a.high - a.low, b.high - b.low)
    assert paired.high - paired.low < unpaired_width / 5


def test_paired_with_a_custom_stat_and_unmatched_clusters() -> None:
    values_a = np.array([[1.0, 1.0], [1.0, 1.0]])
    values_b = np.array([[0.0, 1.0], [1.0, 1.0]])
    result = paired_bootstrap(values_a, ["r1", "r2"], values_b, ["r1", "r3"], ratio_stat, n_boot=200, seed=0)
    assert result.estimate == pytest.approx(0.5)
    assert result.n_clusters == 3 and result.n_rows == 4


def test_input_errors() -> None:
    with pytest.raises(ValueError, match="one id per row"):
        cluster_bootstrap([1.0, 2.0], ["a"])
    with pytest.raises(ValueError, match="zero rows"):
        cluster_bootstrap([], [])
    with pytest.raises(ValueError, match="n_boot"):
        cluster_bootstrap([1.0], ["a"], n_boot=0)
    with pytest.raises(ValueError, match="confidence"):
        cluster_bootstrap([1.0], ["a"], confidence=1.0)
    with pytest.raises(ValueError, match="same value columns"):
        paired_bootstrap(np.ones((2, 2)), [1, 2], np.ones(2), [1, 2], mean_stat)


def test_too_few_clusters_give_no_interval() -> None:
    # Two commitment types (or requests) say nothing about the spread: the estimate stays, the interval goes.
    values = [1.0, 0.0, 1.0, 1.0, 0.0]
    few = cluster_bootstrap(values, ["a", "a", "b", "b", "b"], n_boot=200)
    assert few.estimate == pytest.approx(0.6)
    assert np.isnan(few.low) and np.isnan(few.high) and few.n_clusters == 2
    assert interval_withheld(few.n_clusters) and interval_note(few.n_clusters) == "n/a (2 clusters)"
    assert interval_note(1) == "n/a (1 cluster)"
    paired = paired_bootstrap(values, list("aabbb"), values[::-1], list("aabbb"), n_boot=200)
    assert np.isnan(paired.low) and paired.n_clusters == 2
    enough = cluster_bootstrap(values + values, list("abcdefabcd"), n_boot=200)
    assert enough.n_clusters == MIN_CLUSTERS == 6
    assert np.isfinite(enough.low) and np.isfinite(enough.high) and interval_note(enough.n_clusters) == ""


@pytest.mark.parametrize("categories", [["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "zz"],
                                        ["zz", "r7", "r6", "r5", "r4", "r3", "r2", "r1", "r0"]])
def test_a_categorical_cluster_column_gives_the_result_of_its_texts(categories: list[str]) -> None:
    """A group of a categorical frame (unused categories, sorted or not) bootstraps as its ids as texts do."""
    import pandas as pd

    rng = np.random.default_rng(3)
    ids = [f"r{i}" for i in rng.integers(0, 8, size=60)]
    series = pd.Series(pd.Categorical(ids, categories=categories))[10:50]
    values = rng.integers(0, 2, size=(40, 2)).astype(float) + np.array([0.0, 1.0])
    texts = np.asarray(series.astype(object))
    assert cluster_codes(series)[1] == cluster_codes(texts)[1] == len(set(texts))
    assert (cluster_codes(series)[0] == cluster_codes(texts)[0]).all()
    assert cluster_bootstrap(values, series, ratio_stat, n_boot=200) == cluster_bootstrap(values, texts, ratio_stat,
                                                                                          n_boot=200)
    with pytest.raises(ValueError, match="one id per row"):
        cluster_bootstrap(values, series[:5], ratio_stat)
