"""Catch-up of a long-missed recurring duty: how long satisfying it takes, and how long it blocks other writers.

    .venv/bin/python benchmarks/ledger_catchup.py [--limit 60]

Each case records a duty whose first occurrence is long past, then satisfies that occurrence "now", so
catch-up has to pass over every occurrence in between. Meanwhile a second process adds a commitment to
the same file every 20 ms and reports its slowest write (a write lock held by the catch-up shows up
there). Prints, per case: the time to satisfy, how many occurrences were skipped (and whether that is
exact or a lower bound), and the other process's slowest write. A case still running after ``--limit``
seconds is reported as such.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import tempfile
import time
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

from commitbench.ledger import FixedClock, Ledger, NewCommitment, SystemClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CASES = (
    ("FREQ=MINUTELY, ten years missed", "FREQ=MINUTELY", NOW - timedelta(days=3652)),
    ("FREQ=SECONDLY, missed since 1900", "FREQ=SECONDLY", datetime(1900, 1, 1, tzinfo=UTC)),
    ("FREQ=HOURLY;BYMINUTE=0,30, since 1900", "FREQ=HOURLY;BYMINUTE=0,30", datetime(1900, 1, 1, tzinfo=UTC)),
)


def _satisfy(db: str, rule: str, start: datetime, go: Event, out: Queue) -> None:  # type: ignore[type-arg]
    with Ledger(db, clock=FixedClock(NOW)) as ledger:
        duty = ledger.add(NewCommitment(debtor="bot", creditor="me", action="tick", rrule=rule, starts_at=start), "bot")
        assert duty.bookmark is not None
        go.wait()  # the other writer has its connection open and is writing
        time.sleep(0.2)
        started = time.perf_counter()
        result = ledger.satisfy(duty.id, duty.bookmark, actor="bot")
        exact = getattr(result, "skipped_count_exact", True)
        out.put((time.perf_counter() - started, result.skipped_count, exact))


def _writer(db: str, go: Event, stop: Event, out: Queue) -> None:  # type: ignore[type-arg]
    slowest = 0.0
    with Ledger(db, clock=SystemClock(), busy_timeout_ms=300_000) as ledger:
        go.set()
        while not stop.is_set():
            started = time.perf_counter()
            ledger.add(NewCommitment(debtor="other", creditor="me", action="write"), "other")
            slowest = max(slowest, time.perf_counter() - started)
            time.sleep(0.02)
    out.put(slowest)


def run_case(rule: str, start: datetime, limit: float) -> tuple[str, str, str]:
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "ledger.db")
        Ledger(db, clock=FixedClock(NOW)).close()  # create the file before two processes open it
        results, slowest_queue, go, stop = context.Queue(), context.Queue(), context.Event(), context.Event()
        satisfier = context.Process(target=_satisfy, args=(db, rule, start, go, results))
        writer = context.Process(target=_writer, args=(db, go, stop, slowest_queue))
        satisfier.start()
        writer.start()
        try:
            seconds, count, exact = results.get(timeout=limit + 30)
            took = f"{seconds:.3f} s"
            skipped = f"{count:,}" if exact else f"at least {count:,}"
        except queue.Empty:
            took, skipped = f"> {limit:.0f} s (stopped)", "?"
            satisfier.kill()
        time.sleep(0.2)
        stop.set()
        writer.join(timeout=limit + 60)
        slowest = f"{slowest_queue.get(timeout=5) * 1000:.0f} ms" if writer.exitcode == 0 else "writer failed"
        satisfier.join(timeout=5)
    return took, skipped, slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds before a case is stopped")
    args = parser.parse_args()
    print(f"{'case':<40} {'satisfy':>20} {'skipped':>24} {'slowest other write':>20}")
    for name, rule, start in CASES:
        took, skipped, slowest = run_case(rule, start, args.limit)
        print(f"{name:<40} {took:>20} {skipped:>24} {slowest:>20}", flush=True)


if __name__ == "__main__":
    main()
