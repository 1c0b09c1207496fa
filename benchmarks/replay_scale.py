"""Replay at scale: call rate and peak memory of a replay-only run at 1,000, 10,000 and 100,000 cells.

    .venv/bin/python benchmarks/replay_scale.py [--sizes 1000 10000 100000] [--episodes 1000] [--concurrency 64]

1. *Fill* (not timed): the runner plays the largest size (``--episodes`` standing episodes x as many
   samples as make up the size) with the chat agent in cache mode ``read_write``, and every call the
   cache lacks is answered by :class:`mock_player.ScriptedBroker`: the mock server's script of tool calls,
   replies and ``end_turn``, parsed as a server's answer and stored through the client's own path, with no
   server. The cache then holds exactly the entries the replays read (a smaller size plays the same
   episodes with fewer samples).
2. *Replay*: for each size, a fresh Python process replays it with cache mode ``replay_only`` and no
   server (a single miss would fail a cell, and the run is checked to have failed none and sent no HTTP
   request) into an empty directory, and reports its call rate (model calls per second of play) and its
   peak resident memory (``resource.getrusage``, the process's own high-water mark, the interpreter and
   imports included).

It prints one line per size with the load average beside it, each call rate as a ratio of the target
(at least 5,000 calls per second), and each peak memory as a ratio of the smallest size's (target: at most
1.3 at 10,000 cells against 1,000). ``--profile FILE`` profiles the largest replay with cProfile.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_player import ScriptedBroker, mock_model

TARGET_CALLS_PER_S = 5000.0
TARGET_RSS_RATIO = 1.3


def load_text() -> str:
    return "load " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def config_data(cache: Path, episodes: int, samples: int, concurrency: int, mode: str) -> dict[str, Any]:
    return {
        "name": "replay-scale",
        "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [mock_model(["http://127.0.0.1:9/v1"])],  # nothing listens there: no call may reach it
        "episodes": {"split": "test", "limit": episodes},
        "samples": samples,
        "concurrency": concurrency,
        "cache": {"path": str(cache), "mode": mode},
    }


def fill(cache: Path, out: Path, episodes: int, samples: int, concurrency: int) -> int:
    """Record every call of the experiment in ``cache``, answered by the script; returns the model calls."""
    from commitbench.cellplayer import CellPlayer
    from commitbench.config import ExperimentConfig
    from commitbench.runner import Runner

    config = ExperimentConfig.model_validate(config_data(cache, episodes, samples, concurrency, "read_write"))
    runner = Runner(config, out, argv=["replay_scale", "fill"])
    runner.player = CellPlayer(config, broker=ScriptedBroker())
    summary = runner.run()
    if summary.cells_remaining or summary.http_requests:
        raise RuntimeError(f"the fill did not finish without a server: {summary.failures[:3]}")
    return summary.model_calls


def replay_child(config_path: Path, out: Path, profile: Path | None) -> None:
    """Run in a fresh process: replay, then print one JSON line with the rate and the peak memory."""
    from commitbench.config import ExperimentConfig
    from commitbench.runner import run_experiment

    config = ExperimentConfig.model_validate_json(config_path.read_text())
    if profile is not None:
        import cProfile

        with cProfile.Profile() as profiler:
            summary = run_experiment(config, out, argv=["replay_scale", "replay"])
        profiler.dump_stats(profile)
    else:
        summary = run_experiment(config, out, argv=["replay_scale", "replay"])
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({
        "cells": summary.cells_total,
        "cells_failed": summary.cells_failed,
        "calls": summary.model_calls,
        "cache_hits": summary.cache_hits,
        "http_requests": summary.http_requests,
        "play_wall_s": summary.play_wall_s,
        "play_cpu_s": summary.play_cpu_s,
        "calls_per_s": summary.model_calls / summary.play_wall_s if summary.play_wall_s else 0.0,
        "peak_rss_mb": peak_kib / 1024.0,
    }))


def replay(tmp: Path, cache: Path, episodes: int, samples: int, concurrency: int,
           profile: Path | None = None) -> dict[str, Any]:
    data = config_data(cache, episodes, samples, concurrency, "replay_only")
    config_path = tmp / f"replay-{episodes}x{samples}.json"
    config_path.write_text(json.dumps(data))
    out = tmp / f"replay-{episodes}x{samples}"
    command = [sys.executable, __file__, "--replay-child", str(config_path), str(out)]
    if profile is not None:
        command += ["--child-profile", str(profile)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the replay process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["cells_failed"] or result["http_requests"] or result["cache_hits"] != result["calls"]:
        raise RuntimeError(f"the replay was not served from the cache alone: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000], help="cells per replay")
    parser.add_argument("--episodes", type=int, default=1000, help="standing episodes (the test split holds 1,080)")
    parser.add_argument("--concurrency", type=int, default=64, help="episodes in flight")
    parser.add_argument("--keep", type=Path, default=None, help="keep the cache and run directories here "
                        "(a cache already there is filled only with what it lacks)")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile the largest replay into this file")
    parser.add_argument("--replay-child", nargs=2, type=Path, metavar=("CONFIG", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay_child:
        replay_child(*args.replay_child, args.child_profile)
        return
    sizes = sorted(args.sizes)
    shapes = []
    for size in sizes:
        episodes = min(args.episodes, size)
        if size % episodes:
            parser.error(f"a size must be a multiple of --episodes ({episodes}): {size}")
        shapes.append((episodes, size // episodes))
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        cache = tmp / "cache.sqlite"
        started = time.perf_counter()
        calls = fill(cache, tmp / f"fill-{sizes[-1]}", *shapes[-1], args.concurrency)
        print(f"filled {cache} for {sizes[-1]:,} cells ({shapes[-1][0]} episodes x {shapes[-1][1]} samples, "
              f"{calls:,} calls) without a server in {time.perf_counter() - started:.0f} s ({load_text()})",
              flush=True)
        print(f"{'cells':>8} {'calls':>10} {'calls/s':>8} {'/ target':>8} {'CPU us/call':>11} {'peak RSS MB':>11}"
              f" {'RSS ratio':>9}   load average (1, 5, 15 min)", flush=True)
        results = []
        for index, (episodes, samples) in enumerate(shapes):
            profile = args.profile if index == len(shapes) - 1 else None
            result = replay(tmp, cache, episodes, samples, args.concurrency, profile)
            results.append(result)
            ratio = result["peak_rss_mb"] / results[0]["peak_rss_mb"]
            print(f"{result['cells']:>8,} {result['calls']:>10,} {result['calls_per_s']:>8.0f}"
                  f" {result['calls_per_s'] / TARGET_CALLS_PER_S:>8.2f}"
                  f" {1e6 * result['play_cpu_s'] / result['calls']:>11.0f} {result['peak_rss_mb']:>11.1f}"
                  f" {ratio:>9.2f}   {load_text()}", flush=True)
        print(f"targets: calls/s >= {TARGET_CALLS_PER_S:,.0f} (ratio >= 1); peak RSS at 10x the cells <= "
              f"{TARGET_RSS_RATIO}x", flush=True)
        for small, large in itertools.pairwise(results):
            if large["cells"] == 10 * small["cells"]:
                rss = large["peak_rss_mb"] / small["peak_rss_mb"]
                verdict = "ok" if rss <= TARGET_RSS_RATIO else "ABOVE TARGET"
                print(f"peak RSS {large['cells']:,} / {small['cells']:,} cells: {rss:.2f} (target <= "
                      f"{TARGET_RSS_RATIO}): {verdict}", flush=True)
        for result in results:
            rate = result["calls_per_s"]
            verdict = "ok" if rate >= TARGET_CALLS_PER_S else "BELOW TARGET"
            print(f"calls/s at {result['cells']:,} cells: {rate:.0f} = {rate / TARGET_CALLS_PER_S:.2f} x the "
                  f"target: {verdict}", flush=True)


if __name__ == "__main__":
    main()
