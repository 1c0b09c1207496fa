"""Side by side on one mock server: the bare ``openai`` loop, the runner, inspect-ai, and the gateway.

    .venv/bin/python benchmarks/side_by_side.py [--latencies 0 50] [--episodes 400] [--calls 3000]
        [--inspect-samples 2000] [--concurrency 64] [--repeats 1] [--no-inspect] [--no-gateway]
        [--profile-runner FILE]

For each latency one mock server process (:class:`commitbench.mock.MockServerProcess`) answers, in turn:

* ``bare``: the loop of ``benchmarks/bare_client.py``, ``chat.completions.create`` under a semaphore, the
  SDK parsing every response into its pydantic models (``--calls`` timed calls after a warm-up);
* ``runner``: ``run standing --agent chat`` on ``--episodes`` episodes into a fresh directory and cache
  (every call a miss, recorded; traces written), the mock answering from the benchmarks' script of
  ``lookup`` calls, ``end_turn`` and replies; timed over the play phase;
* ``inspect``: inspect-ai on a one-call ``generate()`` task of ``--inspect-samples`` samples (when
  inspect-ai is installed); timed over ``eval()``;
* ``inspect-standing``: the project's own inspect task ``commitbench/standing`` on the same episodes,
  answered from the same script; timed over ``eval()``;

each with ``--concurrency`` requests in flight (the runner's episodes, inspect's connections and samples),
each in a fresh Python process. A side's figures: its calls (HTTP requests it sent in the timed part),
calls per second, and CPU milliseconds per call, the process's own user and system time (all its threads)
in the timed part divided by its calls; the mock server's CPU per call is read from ``/proc`` and shown
apart. Then the ratios against their targets (SPEC section 8): the runner's calls/s at least 1.5 times the
bare loop's and 8 times inspect-ai's, the runner's CPU per call at most 0.7 times the bare loop's; the
runner against the project's inspect task is printed without a target.

Last, the commitment gateway's rows (``benchmarks/gateway.py``, ``measure``) against the same mock server:
its added latency for one client and its throughput at 64, with its targets there.

The load average is printed beside every row: on a shared machine other work shows in every figure, so
compare the ratios of one run (``--repeats`` runs the sides again, interleaved).
``--profile-runner FILE`` plays the runner once more at the first latency under cProfile, into FILE.
"""

from __future__ import annotations

import argparse
import importlib.util
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

from mock_player import cpu_seconds, load_text, mock_model, scripted_replies

from commitbench.mock import MockServerProcess

TARGET_BARE_RATIO = 1.5
TARGET_INSPECT_RATIO = 8.0
TARGET_CPU_RATIO = 0.7
SIDES = ("bare", "runner", "inspect", "inspect-standing")


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------------ the sides (child processes)
def bare_side(url: str, n: int, concurrency: int) -> dict[str, Any]:
    from bare_client import bare_loop

    result = bare_loop(url, n, concurrency)
    wall = n / result["calls_per_s"]
    return {"calls": n, "wall_s": wall, "cpu_s": result["cpu_ms_per_call"] * n / 1000.0}


def runner_side(url: str, n: int, concurrency: int, profile: Path | None) -> dict[str, Any]:
    from commitbench.config import ExperimentConfig
    from commitbench.runner import run_experiment

    config = ExperimentConfig.model_validate({
        "name": "side-by-side",
        "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [mock_model([url])],
        "episodes": {"split": "test", "limit": n},
        "concurrency": concurrency,
    })
    with tempfile.TemporaryDirectory() as tmp:
        if profile is not None:
            import cProfile

            with cProfile.Profile() as profiler:
                summary = run_experiment(config, Path(tmp) / "run", argv=["side_by_side"])
            profiler.dump_stats(profile)
        else:
            summary = run_experiment(config, Path(tmp) / "run", argv=["side_by_side"])
    if summary.cells_done != n or summary.errors:
        raise RuntimeError(f"the runner did not finish cleanly: {summary.model_dump_json()}")
    return {"calls": summary.http_requests, "wall_s": summary.play_wall_s, "cpu_s": summary.play_cpu_s}


def inspect_side(url: str, n: int, concurrency: int, task_name: str | None) -> dict[str, Any]:
    """inspect-ai's ``eval()``: a one-call generate() task of ``n`` samples, or the project's task on ``n``
    episodes (``task_name``); calls are counted by the parent, from the mock server."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    os.environ.setdefault("OPENAI_API_KEY", "side-by-side")  # the mock server reads no key; the provider needs one
    task: Any
    if task_name is None:
        task = Task(
            dataset=[Sample(input=f"Message {i}: please book the room once the agenda is final.") for i in range(n)],
            solver=generate(),
        )
    else:  # the task object, not its name: found by name, it would be the installed package's
        from commitbench.inspecteval.tasks import followup, standing

        task = {"commitbench/standing": standing, "commitbench/followup": followup}[task_name]()
    with tempfile.TemporaryDirectory() as logs:
        wall, cpu = time.perf_counter(), _own_cpu()
        (log,) = inspect_eval(
            task, model="openai/mock-model", model_base_url=url, model_args={"responses_api": False},
            limit=n, max_connections=concurrency, max_samples=concurrency, max_retries=2, display="none",
            log_dir=logs,
        )
        wall, cpu = time.perf_counter() - wall, _own_cpu() - cpu
    if log.status != "success":
        raise RuntimeError(f"inspect's eval ended {log.status}: {log.error}")
    return {"calls": None, "wall_s": wall, "cpu_s": cpu}


def child(side: str, url: str, n: int, concurrency: int, profile: Path | None) -> None:
    if side == "bare":
        result = bare_side(url, n, concurrency)
    elif side == "runner":
        result = runner_side(url, n, concurrency, profile)
    elif side == "inspect":
        result = inspect_side(url, n, concurrency, None)
    else:
        result = inspect_side(url, n, concurrency, "commitbench/standing")
    print(json.dumps(result))


# ------------------------------------------------------------------------------ the parent
def measure(server: MockServerProcess, side: str, n: int, concurrency: int, profile: Path | None) -> dict[str, Any]:
    """Run one side in a fresh process against ``server``; its calls, calls/s and CPU ms per call, and the mock's."""
    server.reset()
    if side in ("runner", "inspect-standing"):
        server.script(*scripted_replies(40 * n))
    command = [sys.executable, __file__, "--child", side, server.base_url, str(n), str(concurrency)]
    if profile is not None:
        command += ["--child-profile", str(profile)]
    mock_before, served_before = cpu_seconds(server.pid), server.stats().chat_completions
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    mock_cpu, served = cpu_seconds(server.pid) - mock_before, server.stats().chat_completions - served_before
    if done.returncode != 0:
        raise RuntimeError(f"side {side} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    calls = result["calls"] if result["calls"] is not None else served
    return {
        "calls": calls,
        "calls_per_s": calls / result["wall_s"],
        "cpu_ms": 1000.0 * result["cpu_s"] / calls,
        "mock_cpu_ms": 1000.0 * mock_cpu / served if served else 0.0,
    }


def verdict(value: float, target: float, at_least: bool) -> str:
    ok = value >= target if at_least else value <= target
    return f"{value:.2f} (target {'>=' if at_least else '<='} {target}): {'ok' if ok else 'MISSED'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 50.0], help="mock latencies (ms)")
    parser.add_argument("--episodes", type=int, default=400, help="standing episodes of the runner and inspect task")
    parser.add_argument("--calls", type=int, default=3000, help="timed calls of the bare loop")
    parser.add_argument("--inspect-samples", type=int, default=2000, help="samples of inspect's generate() task")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight on every side")
    parser.add_argument("--repeats", type=int, default=1, help="times each side is run, interleaved")
    parser.add_argument("--no-inspect", action="store_true", help="leave inspect-ai out")
    parser.add_argument("--no-gateway", action="store_true", help="leave the gateway out")
    parser.add_argument("--gateway-runs", type=int, default=3, help="gateway measurements per row")
    parser.add_argument("--profile-runner", type=Path, default=None, help="cProfile the runner's first play here")
    parser.add_argument("--child", nargs=4, metavar=("SIDE", "URL", "N", "CONCURRENCY"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, url, n, concurrency = args.child
        child(side, url, int(n), int(concurrency), args.child_profile)
        return 0
    with_inspect = not args.no_inspect and importlib.util.find_spec("inspect_ai") is not None
    sides = [s for s in SIDES if with_inspect or not s.startswith("inspect")]
    sizes = {"bare": args.calls, "runner": args.episodes, "inspect": args.inspect_samples,
             "inspect-standing": args.episodes}
    print(f"{load_text()}, {os.cpu_count()} cores; concurrency {args.concurrency}; runner and inspect task on "
          f"{args.episodes} standing episodes" + ("" if with_inspect else "; without inspect-ai"), flush=True)
    print(f"{'latency':>7} {'side':<17} {'calls':>6} {'calls/s':>8} {'CPU ms/call':>11} {'mock CPU ms/call':>16}",
          flush=True)
    profile = args.profile_runner
    with tempfile.TemporaryDirectory() as folder:
        for latency in args.latencies:
            with MockServerProcess(latency_ms=latency) as server:
                for _ in range(args.repeats):
                    rows = {}
                    for side in sides:
                        rows[side] = row = measure(server, side, sizes[side], args.concurrency, None)
                        print(f"{latency:>5g}ms {side:<17} {row['calls']:>6} {row['calls_per_s']:>8.0f}"
                              f" {row['cpu_ms']:>11.2f} {row['mock_cpu_ms']:>16.2f}   {load_text()}", flush=True)
                    runner, bare = rows["runner"], rows["bare"]
                    ratio = runner["calls_per_s"] / bare["calls_per_s"]
                    print(f"{latency:>5g}ms runner / bare calls/s: {verdict(ratio, TARGET_BARE_RATIO, True)}",
                          flush=True)
                    print(f"{latency:>5g}ms runner / bare CPU per call: "
                          f"{verdict(runner['cpu_ms'] / bare['cpu_ms'], TARGET_CPU_RATIO, False)}", flush=True)
                    if with_inspect:
                        ratio = runner["calls_per_s"] / rows["inspect"]["calls_per_s"]
                        print(f"{latency:>5g}ms runner / inspect generate() calls/s: "
                              f"{verdict(ratio, TARGET_INSPECT_RATIO, True)}", flush=True)
                        ratio = runner["calls_per_s"] / rows["inspect-standing"]["calls_per_s"]
                        print(f"{latency:>5g}ms runner / inspect commitbench/standing calls/s: {ratio:.2f}",
                              flush=True)
                if profile is not None:  # a run of its own: the profiler's overhead is in no figure above
                    measure(server, "runner", args.episodes, args.concurrency, profile)
                    print(f"{latency:>5g}ms the runner's play profiled into {profile}", flush=True)
                    profile = None
                if not args.no_gateway:
                    from gateway import HEADER
                    from gateway import measure as measure_gateway

                    print(f"the gateway in front of the same mock server ({args.gateway_runs} runs per row, "
                          "medians; targets: one client under 2 ms added at the median and 10 ms at p99, "
                          "64 clients at 50 ms at least 0.9 of the direct throughput)", flush=True)
                    print(HEADER, flush=True)
                    measure_gateway(server, latency, Path(folder), args.gateway_runs, 400, 1280)
    print(load_text(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
