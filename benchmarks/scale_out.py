"""Scale-out: episodes/s of one run over 1, 2 and 4 model replicas, and a local Ray run against one process.

Every replica is a mock server in its own process with a fixed service capacity (``--capacity``
requests served at once, each taking ``--latency-ms``), so the servers, not the harness, bound the
throughput: one replica answers at most capacity / latency requests per second. Run::

    .venv/bin/python benchmarks/scale_out.py [--capacity 4] [--latency-ms 200] [--episodes-per-replica 12]

Part 1 plays standing episodes with the chat agent on 1, 2 and 4 replicas (``base_urls``; each run
gets episodes-per-replica x replicas episodes, and twice as many episodes in flight as the replicas
have slots) and prints episodes/s, calls/s against the servers' bound, and the efficiency against
one replica (episodes/s per replica over the one-replica figure; 1.00 is linear). The cache is off,
so every call reaches a server. Part 2 (needs the ``ray`` extra) plays one config on 2 replicas
in one process and then on a local Ray with ``--workers`` actors (each with the same concurrency
divided by the workers, so both have the same episodes in flight), with a fresh cache each (so
the shared-cache leases are exercised), and prints both rates and their ratio. The local Ray's
start is timed apart; the Ray figure includes starting the actors.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_player import mock_model, scripted_replies

from commitbench.config import ExperimentConfig
from commitbench.mock import MockServerProcess
from commitbench.runner import RunSummary, run_experiment

REPLICAS = (1, 2, 4)


def config_for(urls: list[str], episodes: int, concurrency: int, cache: dict[str, Any]) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "scale-out",
            "env": "commitbench/Standing-v0", "agents": ["chat"],
            "models": [mock_model(urls, timeout=120.0)],
            "episodes": {"split": "test", "limit": episodes},
            "concurrency": concurrency,
            "cache": cache,
        }
    )


def prime(servers: list[MockServerProcess], episodes: int) -> None:
    for server in servers:
        server.reset()
        server.script(*scripted_replies(40 * episodes))


def checked(summary: RunSummary, episodes: int) -> RunSummary:
    if summary.cells_done != episodes or summary.errors:
        raise RuntimeError(f"the run did not finish cleanly: {summary.model_dump_json()}")
    return summary


def replicas_part(servers: list[MockServerProcess], args: argparse.Namespace) -> None:
    bound_one = args.capacity / (args.latency_ms / 1000.0)
    print(f"part 1: replicas of capacity {args.capacity} at {args.latency_ms:.0f} ms "
          f"(one replica answers at most {bound_one:.0f} calls/s); cache off", flush=True)
    print(f"{'replicas':>8} {'episodes':>8} {'in flight':>9} {'calls':>6} {'wall s':>7} {'episodes/s':>10} "
          f"{'calls/s':>8} {'of bound':>8} {'efficiency':>10}", flush=True)
    base: float | None = None
    for n in REPLICAS:
        episodes = args.episodes_per_replica * n
        concurrency = 2 * args.capacity * n
        prime(servers[:n], episodes)
        config = config_for([s.base_url for s in servers[:n]], episodes, concurrency, {"mode": "off"})
        with tempfile.TemporaryDirectory() as tmp:
            summary = checked(run_experiment(config, Path(tmp) / "run", argv=["scale_out"]), episodes)
        rate = summary.cells_done / summary.play_wall_s
        calls_rate = summary.http_requests / summary.play_wall_s
        base = base or rate
        print(f"{n:>8} {episodes:>8} {concurrency:>9} {summary.http_requests:>6} {summary.play_wall_s:>7.1f} "
              f"{rate:>10.2f} {calls_rate:>8.1f} {calls_rate / (bound_one * n):>8.0%} {rate / (n * base):>10.2f}",
              flush=True)


def ray_part(servers: list[MockServerProcess], args: argparse.Namespace) -> None:
    try:
        import ray
    except ImportError:
        print("part 2 skipped: the ray extra is not installed", flush=True)
        return
    from commitbench.cluster import RayOptions, run_on_ray

    n = 2
    episodes = args.episodes_per_replica * n * 2
    concurrency = 2 * args.capacity * n
    urls = [s.base_url for s in servers[:n]]
    print(f"\npart 2: {episodes} episodes on {n} replicas, {concurrency} in flight in all, fresh cache each",
          flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        prime(servers[:n], episodes)
        config = config_for(urls, episodes, concurrency, {"path": str(Path(tmp) / "one.sqlite")})
        one = checked(run_experiment(config, Path(tmp) / "one", argv=["scale_out"]), episodes)
        rows.append(("one process", one))
        started = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, _node_ip_address="127.0.0.1",
                 namespace="commitbench", logging_level="WARNING")
        init_s = time.perf_counter() - started
        try:
            prime(servers[:n], episodes)
            per_worker = -(-concurrency // args.workers)
            config = config_for(urls, episodes, per_worker, {"path": str(Path(tmp) / "ray.sqlite")})
            summary = run_on_ray(config, Path(tmp) / "ray", options=RayOptions(workers=args.workers),
                                 argv=["scale_out"])
            rows.append((f"ray, {args.workers} workers", checked(summary, episodes)))
        finally:
            ray.shutdown()
    print(f"{'how':<16} {'calls':>6} {'wall s':>7} {'episodes/s':>10} {'calls/s':>8}", flush=True)
    for name, summary in rows:
        print(f"{name:<16} {summary.model_calls:>6} {summary.play_wall_s:>7.1f} "
              f"{summary.cells_done / summary.play_wall_s:>10.2f} {summary.model_calls / summary.play_wall_s:>8.1f}",
              flush=True)
    ratio = (rows[1][1].cells_done / rows[1][1].play_wall_s) / (rows[0][1].cells_done / rows[0][1].play_wall_s)
    print(f"ray / one process: {ratio:.2f} (local Ray start {init_s:.1f} s, not counted; actor start counted)",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=int, default=4, help="requests each replica serves at once")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="time each request takes to serve")
    parser.add_argument("--episodes-per-replica", type=int, default=12, help="episodes per replica in part 1")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors in part 2")
    parser.add_argument("--skip-ray", action="store_true", help="part 1 only")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(MockServerProcess(latency_ms=args.latency_ms, capacity=args.capacity))
            for _ in range(max(REPLICAS))
        ]
        replicas_part(servers, args)
        if not args.skip_ray:
            ray_part(servers, args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
