"""What the commitment gateway costs: latency and throughput direct to the mock server and through the gateway.

Run::

    .venv/bin/python benchmarks/gateway.py [--requests 400] [--concurrent-requests 1280]

The mock server and the gateway (offline checks, observe mode, a log) each run in a process of their own; the
client is one ``httpx2.AsyncClient`` in this process. For upstream latencies of 0 and 50 ms and for one client and
64 concurrent clients it sends the same requests direct and through the gateway, and prints the median and p99
latency, the throughput, and the ratios. Every request carries tools, a turn with a tool call and its result,
and a reply (the mock echoes the user's message) that the detectors read: a promise and a claim.

Targets, with the offline checks: for one client, under 2 ms added at the median and under 10 ms at p99; at 64
concurrent clients and 50 ms upstream latency, at least 0.9 of the direct throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from commitbench.gateway.server import GatewayProcess
from commitbench.mockserver import MockServerProcess

TOOLS = [{"type": "function", "function": {"name": name, "description": f"The {name} tool.",
                                            "parameters": {"type": "object", "properties": {}}}}
         for name in ("get_current_time", "search_docs", "create_reminder", "create_ticket", "create_post")]


def request_body(i: int) -> dict[str, Any]:
    return {
        "model": "mock-model", "user": f"user-{i % 50}", "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "You are the support assistant of an energy supplier. " * 10},
            {"role": "user", "content": "Can you check my last bill?"},
            {"role": "assistant", "content": "Your last bill was 84 GBP, due on the 3rd."},
            {"role": "user", "content": f"Request {i}. I'll remind you tomorrow at 9 about the report, and I have "
                                        "created the ticket for the meter reading."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function", "function": {
                "name": "search_docs", "arguments": '{"query": "meter reading"}'}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "Meter readings are taken every quarter."},
        ],
    }


async def run(base_url: str, requests: int, concurrency: int) -> tuple[list[float], float]:
    """Per-request latencies (ms) and the throughput (requests per second)."""
    latencies: list[float] = []
    queue = iter(range(requests))
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as client:

        async def worker() -> None:
            for i in queue:
                started = time.perf_counter()
                response = await client.post(base_url + "/chat/completions", json=request_body(i))
                response.raise_for_status()
                latencies.append((time.perf_counter() - started) * 1000)

        for i in range(20):  # warm the connections and both servers
            (await client.post(base_url + "/chat/completions", json=request_body(i))).raise_for_status()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return latencies, requests / elapsed


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per one-client measurement")
    parser.add_argument("--concurrent-requests", type=int, default=1280, help="requests per 64-client measurement")
    args = parser.parse_args()
    print(f"{'upstream':>8} {'clients':>7} {'path':<8} {'median ms':>9} {'p99 ms':>8} {'req/s':>8}   "
          "added median / p99, throughput ratio")
    with tempfile.TemporaryDirectory() as folder:
        for latency in (0.0, 50.0):
            with MockServerProcess(latency_ms=latency) as upstream, GatewayProcess(
                ["--upstream", upstream.base_url, "--log", str(Path(folder) / f"gateway-{latency:g}.jsonl")]
            ) as gateway:
                for clients, requests in ((1, args.requests), (64, args.concurrent_requests)):
                    direct, direct_rate = asyncio.run(run(upstream.base_url, requests, clients))
                    through, through_rate = asyncio.run(run(gateway.base_url, requests, clients))
                    for name, values, rate in (("direct", direct, direct_rate), ("gateway", through, through_rate)):
                        print(f"{latency:>6g}ms {clients:>7} {name:<8} {statistics.median(values):>9.2f} "
                              f"{p99(values):>8.2f} {rate:>8.0f}", end="")
                        if name == "gateway":
                            print(f"   +{statistics.median(values) - statistics.median(direct):.2f} ms / "
                                  f"+{p99(values) - p99(direct):.2f} ms, {rate / direct_rate:.2f}", end="")
                        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
