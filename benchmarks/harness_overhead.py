"""Harness overhead: the runner playing standing episodes versus a bare AsyncOpenAI loop.

Both talk to the same mock server, started in a separate process (so its CPU is not counted and
it does not share this process's GIL), in the same run::

    .venv/bin/python benchmarks/harness_overhead.py [--episodes 400] [--calls 3000] [--profile]

For each latency (0 and 50 ms) and concurrency (64 and 256) it measures

(a) ``bare_loop`` from ``benchmarks/bare_client.py``: a semaphore over ``chat.completions.create``;
(b) the runner playing real standing episodes with the chat agent, the concurrency being episodes
    in flight: env steps, rendering, cache lookups and writes (the cache starts empty), traces
    written to disk, all included. The mock answers from a queue of scripted replies mixing
    ``lookup`` tool calls, ``end_turn`` and plain text, so the tool path is exercised too.

and prints calls/s and CPU ms per call of each, and the ratio b/a of the call rates. Targets
(SPEC section 8): b/a >= 0.8 at concurrency 64, and at most 2 ms of CPU per call for (b).
``--profile`` runs (b) once more under cProfile and prints the functions that take the most time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_client import bare_loop
from mock_player import mock_model, scripted_replies

from commitbench.config import ExperimentConfig
from commitbench.mock import MockServerProcess
from commitbench.runner import run_experiment

TARGET_RATIO = 0.8
TARGET_CPU_MS = 2.0


def runner_config(base_url: str, concurrency: int, n_episodes: int) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "harness-overhead",
            "env": "commitbench/Standing-v0", "agents": ["chat"],
            "models": [mock_model([base_url])],
            "episodes": {"split": "test", "limit": n_episodes},
            "concurrency": concurrency,
        }
    )


def runner_loop(server: MockServerProcess, concurrency: int, n_episodes: int, profile: bool = False) -> dict[str, Any]:
    """Play ``n_episodes`` through the runner into a fresh directory (empty cache)."""
    server.reset()
    server.script(*scripted_replies(40 * n_episodes))
    with tempfile.TemporaryDirectory() as tmp:
        config = runner_config(server.base_url, concurrency, n_episodes)
        profiler = cProfile.Profile() if profile else None
        if profiler is not None:
            profiler.enable()
        summary = run_experiment(config, Path(tmp) / "run", argv=["harness_overhead"])
        if profiler is not None:
            profiler.disable()
    if summary.cells_done != n_episodes or summary.errors:
        raise RuntimeError(f"runner did not finish cleanly: {summary.model_dump_json()}")
    calls = summary.model_calls
    result = {
        "calls": calls,
        "episodes": summary.cells_done,
        "calls_per_s": calls / summary.play_wall_s,
        "cpu_ms_per_call": 1000.0 * summary.play_cpu_s / calls,
        "cache_writes_expected": calls - summary.cache_hits,
    }
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        result["profile"] = out.getvalue()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=400, help="standing episodes per runner measurement")
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per bare-loop measurement")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 50.0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--profile", action="store_true", help="profile the runner at the first setting")
    args = parser.parse_args()
    print(
        f"{'latency':>8} {'conc':>5} | {'bare calls/s':>12} {'cpu ms':>7} | {'runner calls/s':>14} {'cpu ms':>7}"
        f" {'calls':>6} | {'b/a':>5}  targets: b/a >= {TARGET_RATIO} at 64, cpu <= {TARGET_CPU_MS} ms",
        flush=True,
    )
    profiled = False
    for latency in args.latencies:
        with MockServerProcess(latency_ms=latency) as server:
            for concurrency in args.concurrency:
                bare = bare_loop(server.base_url, args.calls, concurrency)
                ours = runner_loop(server, concurrency, args.episodes)
                ratio = ours["calls_per_s"] / bare["calls_per_s"]
                verdict = []
                if concurrency == 64:
                    verdict.append("rate ok" if ratio >= TARGET_RATIO else "RATE BELOW TARGET")
                verdict.append("cpu ok" if ours["cpu_ms_per_call"] <= TARGET_CPU_MS else "CPU ABOVE TARGET")
                print(
                    f"{latency:>6.0f}ms {concurrency:>5} | {bare['calls_per_s']:>12.0f} {bare['cpu_ms_per_call']:>7.2f}"
                    f" | {ours['calls_per_s']:>14.0f} {ours['cpu_ms_per_call']:>7.2f} {ours['calls']:>6} |"
                    f" {ratio:>5.2f}  {', '.join(verdict)}",
                    flush=True,
                )
                if args.profile and not profiled:
                    profiled = True
                    print(runner_loop(server, concurrency, args.episodes, profile=True)["profile"], flush=True)


if __name__ == "__main__":
    main()
