"""What the commitment gateway costs: latency and throughput direct to the mock server and through the gateway.

Run::

    .venv/bin/python benchmarks/gateway.py [--runs 3] [--requests 400] [--concurrent-requests 1280]

The mock server and the gateway (offline checks, observe mode, a log) each run in a process of their own; the
load comes from this process, one ``aiohttp`` session per measurement with the request bodies serialised
beforehand, so that the load generator costs little CPU of its own (on a 2-core machine a heavier client is
itself the bottleneck). For upstream latencies of 0 and 50 ms and for one client and 64 concurrent clients it
sends the same requests direct and through the gateway, ``--runs`` times each (direct and gateway alternating),
and prints the medians over the runs of the median and p99 latency and the throughput, the ratios, and the CPU
milliseconds per request of the load generator, the mock server and the gateway (from ``/proc``, Linux). The
load average is printed beside every row: other work on the machine shows in every figure.
``benchmarks/side_by_side.py`` prints the same rows against its own mock server (``measure``).

A bare pass-through proxy (``benchmarks/bare_proxy.py``: aiohttp, no checks) runs beside the gateway on the same
upstream and load, and the gateway is read against it: its CPU per request over the bare proxy's (target at most
1.5) and, for one client, the median it adds over the direct call (target at most 2 ms). (The earlier target,
0.9 of the direct throughput at 64 clients, measured two cores shared by upstream, gateway and load generator,
not the gateway, and is retired.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_player import cpu_seconds, load_text

from commitbench.gateway.server import GatewayProcess
from commitbench.mock import MockServerProcess
from commitbench.processes import die_with_parent, wait_for_line


class BareProxy:
    """``benchmarks/bare_proxy.py`` in front of an upstream, as a child process (dies with its parent)."""

    def __init__(self, upstream: str) -> None:
        self._args = [sys.executable, str(Path(__file__).resolve().parent / "bare_proxy.py"), "--upstream", upstream]
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> BareProxy:
        self._proc = subprocess.Popen(self._args, stdout=subprocess.PIPE, text=True, bufsize=1,
                                      preexec_fn=die_with_parent())
        ready = wait_for_line(self._proc, "listening on ", 30)
        if ready.value is None:
            raise RuntimeError(f"the bare proxy did not start: {ready.last_line!r}")
        self.base_url = ready.value
        return self

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)

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


@dataclass
class Measurement:
    """One measurement: its latencies (ms), throughput (requests/s) and CPU ms per request by process."""

    latencies: list[float]
    rate: float
    cpu_ms: dict[str, float]


async def run(base_url: str, bodies: list[bytes], concurrency: int, pids: dict[str, int]) -> Measurement:
    """Send ``bodies`` from ``concurrency`` clients; what it took."""
    latencies: list[float] = []
    queue = iter(bodies)
    url = base_url + "/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer sk-benchmark"}
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:

        async def send(body: bytes) -> None:
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{url} answered {response.status}")

        async def worker() -> None:
            for body in queue:
                started = time.perf_counter()
                await send(body)
                latencies.append((time.perf_counter() - started) * 1000)

        await asyncio.gather(*(send(body) for body in bodies[:concurrency]))  # open the connections, warm both ends
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        client_before = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - client_before
        cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
    cpu["client"] = client_cpu
    return Measurement(latencies, len(bodies) / elapsed, {k: v * 1000 / len(bodies) for k, v in cpu.items()})


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


@dataclass
class Summary:
    """Medians over the runs of one path's measurements."""

    median: float
    p99: float
    rate: float
    cpu_ms: dict[str, float]

    @classmethod
    def of(cls, runs: list[Measurement]) -> Summary:
        return cls(
            median=statistics.median(statistics.median(m.latencies) for m in runs),
            p99=statistics.median(p99(m.latencies) for m in runs),
            rate=statistics.median(m.rate for m in runs),
            cpu_ms={name: statistics.median(m.cpu_ms[name] for m in runs) for name in runs[0].cpu_ms},
        )


HEADER = (f"{'upstream':>8} {'clients':>7} {'path':<8} {'median ms':>9} {'p99 ms':>8} {'req/s':>8}   "
          f"{'CPU ms/req: client':>18} {'mock':>5} {'proxy':>7}   added median / p99, throughput ratio")


def measure(upstream: MockServerProcess, latency: float, folder: Path, runs: int, requests: int,
            concurrent_requests: int) -> None:
    """Start the gateway in front of ``upstream`` (a mock answering after ``latency`` ms) and print its rows:
    one client and 64, direct and through the gateway, ``runs`` times each (alternating)."""
    with GatewayProcess(
        ["--upstream", upstream.base_url, "--log", str(folder / f"gateway-{latency:g}.jsonl")]
    ) as gateway, BareProxy(upstream.base_url) as bare:
        pids = {"mock": upstream.pid, "gateway": gateway.pid, "bare": bare.pid}
        for clients, count in ((1, requests), (64, concurrent_requests)):
            bodies = [json.dumps(request_body(i)).encode() for i in range(count)]
            measured: dict[str, list[Measurement]] = {"direct": [], "bare": [], "gateway": []}
            for _ in range(runs):
                measured["direct"].append(asyncio.run(run(upstream.base_url, bodies, clients, pids)))
                measured["bare"].append(asyncio.run(run(bare.base_url, bodies, clients, pids)))
                measured["gateway"].append(asyncio.run(run(gateway.base_url, bodies, clients, pids)))
            direct, proxy = Summary.of(measured["direct"]), Summary.of(measured["bare"])
            for name in ("direct", "bare", "gateway"):
                row = Summary.of(measured[name])
                cpu = row.cpu_ms
                own = cpu["gateway"] if name == "gateway" else cpu["bare"] if name == "bare" else 0.0
                print(f"{latency:>6g}ms {clients:>7} {name:<8} {row.median:>9.2f} {row.p99:>8.2f} "
                      f"{row.rate:>8.0f}   {cpu['client']:>18.2f} {cpu['mock']:>5.2f} {own:>7.2f}", end="")
                if name != "direct":
                    print(f"   +{row.median - direct.median:.2f} ms / +{row.p99 - direct.p99:.2f} ms, "
                          f"{row.rate / direct.rate:.2f}", end="")
                if name == "gateway":
                    print(f"; CPU/req over the bare proxy's {cpu['gateway'] / max(proxy.cpu_ms['bare'], 1e-9):.2f} "
                          "(target <= 1.5)" + (f", added median {row.median - direct.median:.2f} ms (target <= 2)"
                                               if clients == 1 else ""), end="")
                print(f"   {load_text()}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measurements per row; the table shows their medians")
    parser.add_argument("--requests", type=int, default=400, help="requests per one-client measurement")
    parser.add_argument("--concurrent-requests", type=int, default=1280, help="requests per 64-client measurement")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 50.0], help="upstream latencies (ms)")
    args = parser.parse_args()
    print(f"{load_text()}, {os.cpu_count()} cores, {args.runs} runs")
    print(HEADER)
    with tempfile.TemporaryDirectory() as folder:
        for latency in args.latencies:
            with MockServerProcess(latency_ms=latency) as upstream:
                measure(upstream, latency, Path(folder), args.runs, args.requests, args.concurrent_requests)
    print(load_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
