"""Replay at scale: call rate and peak memory of a replay-only run at 1,000 and 10,000 cells.

    .venv/bin/python benchmarks/replay_scale.py [--episodes 1000] [--samples 10] [--concurrency 64]

1. *Fill*: the chat agent plays ``--episodes`` standing episodes x ``--samples`` samples against the
   mock server (a separate process, answering from a repeating script of tool calls, replies and
   ``end_turn``), which records every call in a fresh cache. This step is not timed.
2. *Replay*: for each size (``--episodes`` x 1 sample, then ``--episodes`` x ``--samples``), a fresh
   Python process replays the run with cache mode ``replay_only`` (the mock server is stopped by
   then, so a single miss would fail a cell) into an empty directory, and reports its call rate
   (model calls per second of play) and its peak resident memory (``resource.getrusage``, the
   process's own high-water mark, the interpreter and imports included).

It prints one line per size and the ratio of the peak memory at the largest size to that at the
smallest. Target: at most 1.3 (memory does not grow with the number of cells).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_player import mock_model, scripted_replies

TARGET_RSS_RATIO = 1.3


def config_data(base_url: str, cache: Path, episodes: int, samples: int, concurrency: int) -> dict[str, Any]:
    return {
        "name": "replay-scale",
        "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [mock_model([base_url])],
        "episodes": {"split": "test", "limit": episodes},
        "samples": samples,
        "concurrency": concurrency,
        "cache": {"path": str(cache), "mode": "read_write"},
    }


def fill(cache: Path, out: Path, episodes: int, samples: int, concurrency: int) -> int:
    """Play every call once against the mock server; returns the number of model calls."""
    from commitbench.config import ExperimentConfig
    from commitbench.mock import MockServerProcess
    from commitbench.runner import run_experiment

    with MockServerProcess(record_requests=0) as server:
        server.script(*scripted_replies(8 * episodes * samples))
        config = ExperimentConfig.model_validate(config_data(server.base_url, cache, episodes, samples, concurrency))
        summary = run_experiment(config, out, argv=["replay_scale", "fill"])
    if summary.cells_remaining:
        raise RuntimeError(f"the fill did not finish: {summary.failures[:3]}")
    return summary.model_calls


def replay_child(config_path: Path, out: Path) -> None:
    """Run in a fresh process: replay, then print one JSON line with the rate and the peak memory."""
    from commitbench.config import ExperimentConfig
    from commitbench.runner import run_experiment

    config = ExperimentConfig.model_validate_json(config_path.read_text())
    summary = run_experiment(config, out, argv=["replay_scale", "replay"])
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({
        "cells": summary.cells_total,
        "cells_done": summary.cells_done,
        "cells_failed": summary.cells_failed,
        "calls": summary.model_calls,
        "http_requests": summary.http_requests,
        "play_wall_s": summary.play_wall_s,
        "calls_per_s": summary.model_calls / summary.play_wall_s if summary.play_wall_s else 0.0,
        "peak_rss_mb": peak_kib / 1024.0,
    }))


def replay(tmp: Path, cache: Path, episodes: int, samples: int, concurrency: int) -> dict[str, Any]:
    data = config_data("http://127.0.0.1:9/v1", cache, episodes, samples, concurrency)
    data["cache"]["mode"] = "replay_only"
    config_path = tmp / f"replay-{episodes}x{samples}.json"
    config_path.write_text(json.dumps(data))
    out = tmp / f"replay-{episodes}x{samples}"
    done = subprocess.run(
        [sys.executable, __file__, "--replay-child", str(config_path), str(out)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the replay process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["cells_failed"] or result["http_requests"]:
        raise RuntimeError(f"the replay was not served from the cache alone: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="standing episodes (test split holds 1,080)")
    parser.add_argument("--samples", type=int, default=10, help="samples per cell at the largest size")
    parser.add_argument("--concurrency", type=int, default=64, help="episodes in flight")
    parser.add_argument("--keep", type=Path, default=None, help="keep the cache and run directories here")
    parser.add_argument("--replay-child", nargs=2, type=Path, metavar=("CONFIG", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay_child:
        replay_child(*args.replay_child)
        return
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        cache = tmp / "cache.sqlite"
        calls = fill(cache, tmp / "fill", args.episodes, args.samples, args.concurrency)
        print(f"filled {cache} with {calls} calls ({args.episodes} episodes x {args.samples} samples)", flush=True)
        print(f"{'cells':>7} {'calls':>8} {'calls/s':>9} {'peak RSS MB':>12}", flush=True)
        results = []
        for samples in (1, args.samples):
            result = replay(tmp, cache, args.episodes, samples, args.concurrency)
            results.append(result)
            print(f"{result['cells']:>7} {result['calls']:>8} {result['calls_per_s']:>9.0f}"
                  f" {result['peak_rss_mb']:>12.1f}", flush=True)
        ratio = results[-1]["peak_rss_mb"] / results[0]["peak_rss_mb"]
        verdict = "ok" if ratio <= TARGET_RSS_RATIO else "ABOVE TARGET"
        print(f"peak RSS ratio {results[-1]['cells']} / {results[0]['cells']} cells: {ratio:.2f}"
              f" (target <= {TARGET_RSS_RATIO}): {verdict}", flush=True)


if __name__ == "__main__":
    main()
