"""An audit trail only moves forward: an event dated before a commitment's latest recorded event is refused.

Two writer processes share one ledger; one of them has a clock that runs backwards (as a wrong ``--now``
would). Whatever interleaving happens, no commitment gets an event earlier than one it already has, the
refused write changes nothing, and every history reads in time order.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from commitbench.ledger import ClockWentBack, FixedClock, Ledger, ManualClock, NewCommitment

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)

# A writer: waits at a file barrier, then adds commitments and acknowledges and releases others' with its own
# clock. "forward" steps one second per write from T0; "backward" starts 30 days later and steps back three
# days per write: its first writes are in the future of the forward writer's, after ten it is in their past,
# and its last are more than a year before T0.
WRITER = r"""
import json, sys, time
from datetime import datetime, timedelta
from pathlib import Path
from commitbench.ledger import ClockWentBack, Ledger, LedgerError, ManualClock, NewCommitment

db, barrier, name, direction, rounds, start = sys.argv[1:7]
clock = ManualClock(datetime.fromisoformat(start))
step = timedelta(seconds=1) if direction == "forward" else timedelta(days=-3)
ledger = Ledger(db, clock=clock, busy_timeout_ms=30000)
Path(barrier, "ready-" + name).touch()
while not Path(barrier, "go").exists():
    time.sleep(0.001)
refused = done = 0
for index in range(int(rounds)):
    clock.set(clock.now() + step)
    try:
        if index % 3 == 0:
            due = datetime(2030, 1, 1).astimezone()
            ledger.add(NewCommitment(debtor=name, creditor="alice", action=f"task {index}", due_at=due), name)
        else:
            ids = [c.id for c in ledger.list(limit=None)]
            target = ids[(index * 7) % len(ids)]
            if index % 3 == 1:
                ledger.acknowledge(target, name)
            else:
                ledger.release(target, "alice", "no longer needed")
        done += 1
    except ClockWentBack:
        refused += 1
    except LedgerError:
        done += 1  # a transition the state does not allow (already released): not what is measured here
print(json.dumps({"refused": refused, "done": done}))
ledger.close()
"""


def test_two_writers_one_with_a_clock_going_backwards_never_rewrite_a_history(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with Ledger(db, clock=FixedClock(T0)) as ledger:
        ledger.add(NewCommitment(debtor="bot", creditor="alice", action="seed"), "bot")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    starts = {"forward": T0, "backward": T0 + timedelta(days=30)}
    procs = {
        direction: subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(barrier), direction, direction, "150", start.isoformat()],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for direction, start in starts.items()
    }
    deadline = time.monotonic() + 60
    while len(list(barrier.glob("ready-*"))) < 2:
        assert time.monotonic() < deadline, "writers did not start"
        assert all(p.poll() is None for p in procs.values()), [p.communicate()[1] for p in procs.values()]
        time.sleep(0.01)
    (barrier / "go").touch()
    results = {}
    for direction, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results[direction] = json.loads(out)
    # The backward writer's writes on commitments with later events were refused; the others went through.
    assert results["backward"]["refused"] > 0 and results["forward"]["done"] > 0, results
    with Ledger(db, clock=FixedClock(T0)) as ledger:
        commitments = list(ledger.list(limit=None))
        assert len(commitments) > 50
        for commitment in commitments:
            history = ledger.history(commitment.id)
            times = [event.at for event in history]
            assert times == sorted(times), (commitment.id, times)
            assert times[0] == commitment.created_at
            assert commitment.updated_at == times[-1] or commitment.updated_at <= times[-1]


def test_an_event_before_the_latest_is_refused_naming_both_times_and_nothing_changes(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    with Ledger(tmp_path / "l.db", clock=clock) as ledger:
        added = ledger.add(NewCommitment(debtor="bot", creditor="alice", action="report",
                                         due_at=T0 + timedelta(days=2)), "bot")
        clock.advance(timedelta(hours=1))
        ledger.acknowledge(added.id, "bot")
        clock.set(T0 - timedelta(days=700))  # a clock set to the year before
        with pytest.raises(ClockWentBack) as caught:
            ledger.release(added.id, "alice", "not needed")
        message = str(caught.value)
        assert (T0 - timedelta(days=700)).isoformat() in message and (T0 + timedelta(hours=1)).isoformat() in message
        after = ledger.get(added.id)
        assert after.status.value == "acknowledged" and after.version == 2
        assert len(ledger.history(added.id)) == 2
        # The same time as the latest event is not earlier: it is recorded.
        clock.set(T0 + timedelta(hours=1))
        assert ledger.release(added.id, "alice", "not needed").status.value == "cancelled"


def test_the_command_line_refuses_a_backwards_now_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    from commitbench.cli import main

    db = str(tmp_path / "l.db")
    assert main(["ledger", "--db", db, "--now", "2026-12-03T10:00:00Z", "add", "--debtor", "bot",
                 "--creditor", "alice", "--action", "send the report"]) == 0
    capsys.readouterr()
    code = main(["ledger", "--db", db, "--now", "2025-01-01T00:00:00Z", "release", "1", "--actor", "alice"])
    err = capsys.readouterr().err
    assert code == 1 and "2025-01-01T00:00:00+00:00" in err and "2026-12-03T10:00:00+00:00" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["ledger", "--db", db, "show", "1"]) == 0
    shown = capsys.readouterr().out
    assert "unscheduled" in shown and "cancelled" not in shown
