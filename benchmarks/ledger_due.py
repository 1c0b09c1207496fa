"""Due-list query time on a ledger of 100,000 commitments.

    .venv/bin/python benchmarks/ledger_due.py [--count 100000] [--db PATH]

Seeds a ledger (70% open one-shot with due times spread over +-60 days, 10% unscheduled, 10%
recurring duties, 10% settled) in one transaction, then times the due list: the first 50
entries, one debtor's first 50, and the whole list of open commitments. Prints medians.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from commitbench.ledger import FixedClock, Ledger, NewCommitment, Outcome
from commitbench.ledger import transitions as tr

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
RULES = ("FREQ=DAILY;BYHOUR=9", "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9", "FREQ=HOURLY;INTERVAL=4")


def seed(ledger: Ledger, count: int, rng: random.Random) -> None:
    news = []
    for i in range(count):
        roll = rng.random()
        debtor = f"agent-{i % 50}"
        creditor = f"person-{rng.randrange(500)}"
        if roll < 0.1:
            news.append(NewCommitment(debtor=debtor, creditor=creditor, action=f"task {i}"))
        elif roll < 0.2:
            start = NOW - timedelta(days=rng.randrange(0, 30))
            news.append(
                NewCommitment(debtor=debtor, creditor=creditor, action=f"duty {i}", rrule=rng.choice(RULES),
                              starts_at=start)
            )
        else:
            due = NOW + timedelta(minutes=rng.randrange(-60 * 24 * 60, 60 * 24 * 60))
            news.append(NewCommitment(debtor=debtor, creditor=creditor, action=f"task {i}", due_at=due))
    added = ledger.add_many(news, actor="seed")
    # Settle a tenth of the one-shot ones in one transaction, through the same pure transitions.
    store = ledger.store
    with store.write():
        for c in added:
            if c.due_at is not None and rng.random() < 0.125:
                plan = tr.close(c, Outcome.COMPLETED, "seed", "", NOW, ledger.policy)
                store.update(plan.after, c.version)
                store.append(c.id, plan.events)


def median_ms(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    result = fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--db", type=Path, help="ledger file (default: a temporary file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "ledger.db"
        with Ledger(path, clock=FixedClock(NOW)) as ledger:
            started = time.perf_counter()
            seed(ledger, args.count, random.Random(7))
            seeded_s = time.perf_counter() - started
            open_count = len(ledger.due())
            plan = ledger.store.conn.execute(
                "EXPLAIN QUERY PLAN SELECT id FROM commitments INDEXED BY commitments_open_due "
                "WHERE is_open = 1 AND due_key IS NOT NULL AND due_key < ? ORDER BY due_key, id LIMIT 50",
                ("2025-06-01",),
            ).fetchall()
            print(f"ledger: {args.count:,} commitments ({open_count:,} open), seeded in {seeded_s:.1f} s")
            print(f"plan:   {plan[-1][-1]}")
            cases = [
                ("due list, first 50", lambda: ledger.due(timedelta(hours=24), limit=50), 50),
                ("due list, one debtor, first 50", lambda: ledger.due(limit=50, debtor="agent-7"), 50),
                ("due list, all open", lambda: ledger.due(timedelta(hours=24)), 5),
            ]
            for name, fn, repeats in cases:
                ms, result = median_ms(fn, repeats)
                print(f"{name:<34} {ms:9.2f} ms  ({len(result):,} rows)")


if __name__ == "__main__":
    main()
