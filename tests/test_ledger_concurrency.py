"""Several processes closing the same occurrence: the compare-and-set must let exactly one advance."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from commitbench.ledger import AuditEventKind, FixedClock, Ledger, NewCommitment, replay

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
FIRST = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

# Each worker waits at a file barrier, then closes occurrences and prints one JSON line per attempt.
WORKER = r"""
import json, sys, time
from datetime import datetime
from pathlib import Path
from commitbench.ledger import FixedClock, Ledger, StaleOccurrence

db, barrier, name, mode, rounds, now = sys.argv[1:7]
ledger = Ledger(db, clock=FixedClock(datetime.fromisoformat(now)), busy_timeout_ms=30000)
Path(barrier, "ready-" + name).touch()
while not Path(barrier, "go").exists():
    time.sleep(0.001)
for _ in range(int(rounds)):
    if mode == "fixed":
        expected = datetime.fromisoformat(sys.argv[7])
    else:
        expected = ledger.get(1).bookmark  # this worker's (possibly stale by now) view of the live one
    try:
        result = ledger.satisfy(1, expected, name)
        print(json.dumps({"outcome": result.outcome.value, "occurrence": expected.isoformat()}))
    except StaleOccurrence:
        print(json.dumps({"outcome": "stale", "occurrence": expected.isoformat()}))
    sys.stdout.flush()
ledger.close()
"""


def run_workers(db: Path, barrier: Path, count: int, mode: str, rounds: int, *extra: str) -> list[list[dict]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(barrier), f"w{i}", mode, str(rounds), T0.isoformat(), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    deadline = time.monotonic() + 60
    while len(list(barrier.glob("ready-*"))) < count:
        assert time.monotonic() < deadline, "workers did not start"
        assert all(p.poll() is None for p in procs), [p.communicate()[1] for p in procs if p.poll() is not None]
        time.sleep(0.01)
    (barrier / "go").touch()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append([json.loads(line) for line in out.splitlines()])
    return outputs


def make_duty(db: Path) -> None:
    with Ledger(db, clock=FixedClock(T0)) as ledger:
        ledger.add(
            NewCommitment(
                debtor="bot",
                creditor="clinton",
                action="daily check",
                rrule="FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
                starts_at=T0,
            ),
            "bot",
        )


@pytest.mark.slow
def test_two_processes_closing_the_same_occurrence(tmp_path: Path) -> None:
    db, barrier = tmp_path / "ledger.db", tmp_path / "barrier"
    barrier.mkdir()
    make_duty(db)
    outputs = run_workers(db, barrier, 2, "fixed", 1, FIRST.isoformat())
    outcomes = sorted(result["outcome"] for output in outputs for result in output)
    assert outcomes == ["advanced", "retry_noop"]
    with Ledger(db, clock=FixedClock(T0)) as ledger:
        duty = ledger.get(1)
        history = ledger.history(1)
    assert duty.bookmark == FIRST + timedelta(days=1) and duty.last_closed == FIRST
    assert [e.kind for e in history] == [AuditEventKind.CREATED, AuditEventKind.SATISFIED]
    assert replay(history) == duty


@pytest.mark.slow
def test_racing_processes_never_lose_or_double_an_advance(tmp_path: Path) -> None:
    db, barrier = tmp_path / "ledger.db", tmp_path / "barrier"
    barrier.mkdir()
    make_duty(db)
    rounds = 15
    outputs = run_workers(db, barrier, 3, "read-then-close", rounds)
    results = [result for output in outputs for result in output]
    assert len(results) == 3 * rounds
    advanced = [r["occurrence"] for r in results if r["outcome"] == "advanced"]
    assert len(advanced) == len(set(advanced)), "an occurrence was advanced twice"
    assert {r["outcome"] for r in results} <= {"advanced", "retry_noop", "stale"}
    with Ledger(db, clock=FixedClock(T0)) as ledger:
        duty = ledger.get(1)
        history = ledger.history(1)
    satisfied = [e for e in history if e.kind is AuditEventKind.SATISFIED]
    assert len(satisfied) == len(advanced) == duty.version - 1
    assert sorted(e.details["occurrence"] for e in satisfied) == sorted(advanced)
    assert duty.bookmark == FIRST + timedelta(days=len(advanced))
    assert replay(history) == duty
