"""What the commitment gateway costs: latency and throughput direct to the mock server and through the gateway.

Run::

    .venv/bin/python benchmarks/gateway.py [--runs 3] [--requests 400] [--concurrent-requests 1280]
    .venv/bin/python benchmarks/gateway.py --large [--runs 3] [--requests 400] [--large-requests 5]

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

``--large`` measures instead what one large request does to the small ones: a gateway in front of the bare
proxy's canned upstream (which never parses a body, so an upstream's own parse holds nothing up), small
requests sent one after another, ``--requests`` of them alone and then as many as fit while
``--large-requests`` requests of about 12 MB (1,000 tools) go through back to back; per run, the small
requests' median and p99 quiet and beside the large ones, and the p99 ratio (target at most 2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_player import cpu_seconds, load_text

from commitbench.gateway.server import GatewayProcess
from commitbench.mock import MockServerProcess
from commitbench.processes import die_with_parent, wait_for_line


class BareProxy:
    """``benchmarks/bare_proxy.py`` in front of an upstream (None: its canned upstream), as a child process (dies
    with its parent)."""

    def __init__(self, upstream: str | None) -> None:
        where = ["--upstream", upstream] if upstream is not None else ["--canned"]
        self._args = [sys.executable, str(Path(__file__).resolve().parent / "bare_proxy.py"), *where]
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


def large_body(tools: int = 1000, description_chars: int = 12_000) -> bytes:
    """A request of about 12 MB: a short conversation offering ``tools`` tools with long descriptions."""
    offered = [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Tool {i}: " + "x" * description_chars,
        "parameters": {"type": "object", "properties": {}}}} for i in range(tools)]
    return json.dumps({"model": "mock-model", "messages": [{"role": "user", "content": "What is on at 3pm?"}],
                       "tools": offered}).encode()


async def beside_large(base_url: str, small: bytes, big: bytes, quiet_requests: int, large_requests: int,
                       ) -> tuple[list[float], list[float], list[float]]:
    """Small requests one after another, first alone, then while ``large_requests`` large ones are sent back to
    back on a connection of their own: the small latencies quiet and beside them, and the large ones' (ms)."""
    url = base_url + "/chat/completions"
    headers = {"content-type": "application/json"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:

        async def timed(body: bytes) -> float:
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{url} answered {response.status}")
            return (time.perf_counter() - started) * 1000

        for _ in range(20):  # warm: connections, caches, and the worker process that reads large requests
            await timed(small)
        await timed(big)  # the gateway's worker starts at its first large request
        quiet = [await timed(small) for _ in range(quiet_requests)]
        # The large requests go from a process of their own: sending 12 MB would hold this loop up too.
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            pool.submit(time.sleep, 0).result()  # started before the clock runs
            sent = asyncio.get_running_loop().run_in_executor(pool, send_large, url, big, large_requests)
            busy: list[float] = []
            while not sent.done():
                busy.append(await timed(small))
            large = await sent
    return quiet, busy, large


def send_large(url: str, body: bytes, count: int) -> list[float]:
    """Send ``body`` ``count`` times, one after another (in a process of its own); the latencies (ms)."""
    latencies = []
    with httpx2.Client(timeout=300) as client:
        for _ in range(count):
            started = time.perf_counter()
            response = client.post(url, content=body, headers={"content-type": "application/json"})
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}")
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def measure_large(runs: int, quiet_requests: int, large_requests: int) -> None:
    """In front of the canned upstream, the bare proxy and the gateway: small requests' p99 beside 12 MB requests
    over their quiet p99 (the bare proxy's row shows what moving the large bodies through any Python proxy
    costs the small requests)."""
    big = large_body()
    small = json.dumps({"model": "mock-model", "messages": [{"role": "user", "content": "What is on at 3pm?"}],
                        "tools": TOOLS}).encode()
    print(f"large request: {len(big) / 1e6:.1f} MB, {runs} runs; small requests one at a time, quiet and while "
          f"{large_requests} large ones are sent back to back")
    print(f"{'path':<8} {'run':>3} {'quiet median':>12} {'quiet p99':>9} {'beside median':>13} {'beside p99':>10} "
          f"{'small sent':>10} {'large ms':>9}   p99 beside / quiet")
    ratios: dict[str, list[float]] = {"bare": [], "gateway": []}
    with BareProxy(None) as upstream, BareProxy(upstream.base_url) as bare, \
            GatewayProcess(["--upstream", upstream.base_url]) as gateway:
        for index in range(runs):
            for name, url in (("bare", bare.base_url), ("gateway", gateway.base_url)):
                quiet, busy, large = asyncio.run(beside_large(url, small, big, quiet_requests, large_requests))
                ratio = p99(busy) / p99(quiet)
                ratios[name].append(ratio)
                print(f"{name:<8} {index + 1:>3} {statistics.median(quiet):>12.2f} {p99(quiet):>9.2f} "
                      f"{statistics.median(busy):>13.2f} {p99(busy):>10.2f} {len(busy):>10} "
                      f"{statistics.median(large):>9.0f}   {ratio:.2f}   {load_text()}", flush=True)
    print(f"median p99 ratio over the runs: bare proxy {statistics.median(ratios['bare']):.2f}, gateway "
          f"{statistics.median(ratios['gateway']):.2f} (target <= 2)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measurements per row; the table shows their medians")
    parser.add_argument("--requests", type=int, default=400, help="requests per one-client measurement")
    parser.add_argument("--concurrent-requests", type=int, default=1280, help="requests per 64-client measurement")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 50.0], help="upstream latencies (ms)")
    parser.add_argument("--large", action="store_true", help="instead: small requests beside 12 MB ones (the "
                        "gateway in front of an upstream that never parses a body)")
    parser.add_argument("--large-requests", type=int, default=5, help="large requests per --large run")
    args = parser.parse_args()
    if args.large:
        print(f"{load_text()}, {os.cpu_count()} cores")
        measure_large(args.runs, args.requests, args.large_requests)
        print(load_text())
        return 0
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
