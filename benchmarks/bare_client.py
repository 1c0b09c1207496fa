"""Client-stack throughput against the mock server: a bare AsyncOpenAI loop and ModelClient.

``bare_loop`` is the reference the harness-overhead targets are stated against: the most calls
per second the ``openai`` client reaches on this machine, and its CPU cost per call. Run::

    .venv/bin/python benchmarks/bare_client.py [--calls 3000]

It starts the mock server in a separate process (so it does not share this process's GIL) and
prints, for latency 0 and 50 ms and concurrency 64 and 256, the bare figures, the ModelClient
figures (cache on, every call a miss, so each call also pays a lookup and a write) and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from commitbench.cache import CallCache
from commitbench.llm import ModelClient, ModelSettings
from commitbench.mock import MockServerProcess

MODEL = "mock-model"
SYSTEM_PROMPT = (
    "You are a workplace assistant. You keep the promises you make, you check who may cancel them, "
    "and you use the tools you are given. " * 8
)


def _messages(i: int) -> list[dict[str, Any]]:
    """A small agent-like prompt; the call number makes every prompt distinct (all cache misses)."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Message {i}: please book the room once the agenda is final."},
        {"role": "assistant", "content": "I'll book the room once the agenda is final."},
        {"role": "user", "content": f"Update {i}: the agenda is final."},
    ]


async def _timed(run_one: Any, n_calls: int, concurrency: int) -> dict[str, float]:
    semaphore = asyncio.Semaphore(concurrency)

    async def guarded(i: int) -> None:
        async with semaphore:
            await run_one(i)

    # Warm up: open the connections and let the server's accept backlog settle.
    await asyncio.gather(*(guarded(-1 - i) for i in range(min(concurrency, n_calls))))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(guarded(i) for i in range(n_calls)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"calls_per_s": n_calls / wall, "cpu_ms_per_call": 1000.0 * cpu / n_calls}


async def bare_loop_async(base_url: str, n_calls: int, concurrency: int) -> dict[str, float]:
    """A bare ``AsyncOpenAI`` loop under a semaphore; returns calls/s and CPU ms per call."""
    client = AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)

    async def one(i: int) -> None:
        response = await client.chat.completions.create(model=MODEL, messages=_messages(i))  # type: ignore[arg-type]
        if not response.choices:
            raise RuntimeError("mock server returned no choices")

    try:
        return await _timed(one, n_calls, concurrency)
    finally:
        await client.close()


def bare_loop(base_url: str, n_calls: int, concurrency: int) -> dict[str, float]:
    """Synchronous wrapper of :func:`bare_loop_async` (runs its own event loop)."""
    return asyncio.run(bare_loop_async(base_url, n_calls, concurrency))


async def model_client_loop_async(
    base_url: str, n_calls: int, concurrency: int, cache_path: str | Path | None = None
) -> dict[str, float]:
    """The same loop through :class:`ModelClient`, with the cache on (every call a miss + write)."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = CallCache(cache_path or Path(tmp) / "bench-cache.sqlite")
        settings = ModelSettings(model=MODEL, base_url=base_url, api_key_env=None)
        client = ModelClient(settings, cache=cache, max_concurrency=concurrency)
        errors = 0
        # Every timed call is new; the warm-up calls use keys of their own (negative indices).
        offset = time.time_ns()

        async def one(i: int) -> None:
            nonlocal errors
            response = await client.complete(_messages(i), sample_index=offset)
            errors += response.error is not None

        try:
            result = await _timed(one, n_calls, concurrency)
        finally:
            await client.aclose()
            cache.close()
        if errors:
            raise RuntimeError(f"{errors} ModelClient calls failed against the mock server")
        return result


def model_client_loop(base_url: str, n_calls: int, concurrency: int) -> dict[str, float]:
    """Synchronous wrapper of :func:`model_client_loop_async`."""
    return asyncio.run(model_client_loop_async(base_url, n_calls, concurrency))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per measurement")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 50.0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    args = parser.parse_args()
    print(f"{'latency':>8} {'conc':>5} | {'bare calls/s':>12} {'cpu ms':>7} | "
          f"{'client calls/s':>14} {'cpu ms':>7} | {'rate ratio':>10}")
    for latency in args.latencies:
        with MockServerProcess(latency_ms=latency) as server:
            for concurrency in args.concurrency:
                bare = bare_loop(server.base_url, args.calls, concurrency)
                ours = model_client_loop(server.base_url, args.calls, concurrency)
                ratio = ours["calls_per_s"] / bare["calls_per_s"]
                print(
                    f"{latency:>6.0f}ms {concurrency:>5} | {bare['calls_per_s']:>12.0f} {bare['cpu_ms_per_call']:>7.2f}"
                    f" | {ours['calls_per_s']:>14.0f} {ours['cpu_ms_per_call']:>7.2f} | {ratio:>10.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
