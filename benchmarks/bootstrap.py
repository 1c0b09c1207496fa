"""Benchmark: cluster and paired bootstrap, 1,000 replicates over 50,000 rows (target: at most 1 s).

Run: .venv/bin/python benchmarks/bootstrap.py [--repeats 5]

Three cluster layouts are timed: 300 clusters (the request set's size), 5,000, and 50,000 singleton
clusters (the worst case). Each figure is the best of several runs, with the ratio to the 1 s target.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from commitbench.analysis.bootstrap import cluster_bootstrap, paired_bootstrap, ratio_stat

TARGET_SECONDS = 1.0
N_ROWS = 50_000
N_BOOT = 1_000


def best_of(repeats: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    success = (rng.random(N_ROWS) < 0.3).astype(float)
    ratio_values = np.column_stack([success, (rng.random(N_ROWS) < 0.8).astype(float)])
    worst = 0.0
    print(f"{'case':<44}{'seconds':>9}{'of target':>11}")
    for n_clusters in (300, 5_000, N_ROWS):
        clusters = np.arange(N_ROWS) if n_clusters == N_ROWS else rng.integers(0, n_clusters, N_ROWS)
        cases: list[tuple[str, Callable[[], object]]] = [
            (f"mean, {n_clusters} clusters", lambda c=clusters: cluster_bootstrap(success, c, n_boot=N_BOOT)),
            (
                f"ratio, {n_clusters} clusters",
                lambda c=clusters: cluster_bootstrap(ratio_values, c, ratio_stat, n_boot=N_BOOT),
            ),
            (
                f"paired ratio, {n_clusters} clusters (2 x 50k rows)",
                lambda c=clusters: paired_bootstrap(ratio_values, c, ratio_values[::-1], c, ratio_stat, n_boot=N_BOOT),
            ),
        ]
        for name, work in cases:
            seconds = best_of(args.repeats, work)
            worst = max(worst, seconds)
            print(f"{name:<44}{seconds:>9.3f}{seconds / TARGET_SECONDS:>10.2f}x")
    verdict = "meets" if worst <= TARGET_SECONDS else "misses"
    print(f"slowest case {worst:.3f} s: {verdict} the {TARGET_SECONDS:.0f} s target")
    return 0 if worst <= TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
