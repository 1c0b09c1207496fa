"""Storage of the ledger: migrations, persistence, the due list, replay of the audit trail."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from commitbench.ledger import (
    AuditEvent,
    AuditEventKind,
    CommitmentStatus,
    DueGroup,
    FixedClock,
    InvalidCommitment,
    Ledger,
    ManualClock,
    NewCommitment,
    ReplayError,
    SchemaTooNew,
    replay,
)
from commitbench.ledger.store import MIGRATIONS, Migration, migrate, schema_version

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def fixed_now() -> datetime:
    return NOW


def test_migrations_run_once_in_order_and_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    Ledger(path, clock=FixedClock(NOW)).close()
    Ledger(path, clock=FixedClock(NOW)).close()  # reopening applies nothing twice
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT version, description, applied_at FROM schema_version ORDER BY version").fetchall()
    assert [r[0] for r in rows] == [m.version for m in MIGRATIONS]
    assert all(r[2].startswith("2025-06-02T12:00:00") for r in rows)  # stamped by the injected clock
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "commitments_open_due" in indexes


def test_a_later_migration_is_applied_to_an_older_file() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    assert migrate(conn, fixed_now, MIGRATIONS[:1]) == 1
    extra = Migration(len(MIGRATIONS) + 1, "a note column", lambda c: c.execute("ALTER TABLE events ADD note TEXT"))
    assert migrate(conn, fixed_now, (*MIGRATIONS, extra)) == len(MIGRATIONS) + 1
    assert schema_version(conn) == len(MIGRATIONS) + 1
    assert "note" in {r[1] for r in conn.execute("PRAGMA table_info(events)")}


def test_a_failed_migration_leaves_the_old_schema() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn, fixed_now, MIGRATIONS[:1])

    def broken(c: sqlite3.Connection) -> None:
        c.execute("CREATE INDEX half_done ON commitments(scope)")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        migrate(conn, fixed_now, (MIGRATIONS[0], Migration(2, "broken", broken)))
    assert schema_version(conn) == 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None


def test_migrations_must_be_numbered_in_order() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    with pytest.raises(ValueError, match=r"numbered 1\.\.n"):
        migrate(conn, fixed_now, (MIGRATIONS[1], MIGRATIONS[0]))


def test_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    Ledger(path, clock=FixedClock(NOW)).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (99, 'from the future', '2030-01-01')")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew, match="99"):
        Ledger(path, clock=FixedClock(NOW))


def test_state_and_history_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger(path, clock=FixedClock(NOW)) as ledger:
        c = ledger.add(NewCommitment(debtor="bot", creditor="sarah", action="send", due_at=NOW), "bot")
        ledger.acknowledge(c.id, "bot")
        before = ledger.get(c.id)
    with Ledger(path, clock=FixedClock(NOW)) as ledger:
        assert ledger.get(c.id) == before
        assert [e.kind for e in ledger.history(c.id)] == [AuditEventKind.CREATED, AuditEventKind.ACKNOWLEDGED]


# ------------------------------------------------------------------ due list

# (name, due offset from now in hours or None, how the commitment ends up) -> expected group
DUE_CASES = [
    ("overdue-2d", -48, "open", DueGroup.OVERDUE),
    ("overdue-1h", -1, "open", DueGroup.OVERDUE),
    ("overdue-1h-acknowledged", -1, "ack", DueGroup.OVERDUE),
    ("soon-now", 0, "open", DueGroup.DUE_SOON),
    ("soon-3h", 3, "open", DueGroup.DUE_SOON),
    ("later-30h", 30, "open", DueGroup.SCHEDULED),
    ("later-24h", 24, "open", DueGroup.SCHEDULED),  # the window is half-open: now <= due < now + 24h
    ("done", -5, "complete", None),
    ("cancelled", 5, "release", None),
    ("no-date", None, "open", DueGroup.UNSCHEDULED),
    ("condition", None, "condition", DueGroup.UNSCHEDULED),
]


def build_due_ledger() -> Ledger:
    ledger = Ledger(":memory:", clock=FixedClock(NOW))
    for name, hours, how, _ in DUE_CASES:
        due = NOW + timedelta(hours=hours) if hours is not None else None
        condition = "the numbers land" if how == "condition" else None
        c = ledger.add(
            NewCommitment(debtor="bot", creditor="sarah", action=name, due_at=due, condition=condition), "bot"
        )
        if how == "ack":
            ledger.acknowledge(c.id, "bot")
        elif how == "complete":
            ledger.complete(c.id, "bot")
        elif how == "release":
            ledger.release(c.id, "sarah")
    return ledger


def test_due_list_groups_and_order() -> None:
    with build_due_ledger() as ledger:
        items = ledger.due(timedelta(hours=24))
    got = [(item.group, item.commitment.action) for item in items]
    expected = [
        (DueGroup.OVERDUE, "overdue-2d"),
        (DueGroup.OVERDUE, "overdue-1h"),
        (DueGroup.OVERDUE, "overdue-1h-acknowledged"),  # same due time: creation order
        (DueGroup.DUE_SOON, "soon-now"),
        (DueGroup.DUE_SOON, "soon-3h"),
        (DueGroup.SCHEDULED, "later-24h"),
        (DueGroup.SCHEDULED, "later-30h"),
        (DueGroup.UNSCHEDULED, "no-date"),
        (DueGroup.UNSCHEDULED, "condition"),
    ]
    assert got == expected
    assert {group for _, _, _, group in DUE_CASES} - {None} == {g for g, _ in got}


def test_due_list_window_limit_and_filters() -> None:
    with build_due_ledger() as ledger:
        wide = ledger.due(timedelta(hours=48))
        assert [i.commitment.action for i in wide if i.group is DueGroup.DUE_SOON][-1] == "later-30h"
        assert [i.commitment.action for i in ledger.due(limit=4)] == [
            "overdue-2d",
            "overdue-1h",
            "overdue-1h-acknowledged",
            "soon-now",
        ]
        assert ledger.due(limit=0) == []
        assert ledger.due(debtor="nobody") == []
        assert len(ledger.due(creditor="sarah")) == 9
        with pytest.raises(InvalidCommitment, match="negative"):
            ledger.due(timedelta(hours=-1))


def test_list_filters() -> None:
    with build_due_ledger() as ledger:
        assert len(ledger.list()) == len(DUE_CASES)
        assert [c.action for c in ledger.list(status=CommitmentStatus.COMPLETED)] == ["done"]
        assert len(ledger.list(status=[CommitmentStatus.CANCELLED, CommitmentStatus.UNSCHEDULED])) == 2
        assert [c.id for c in ledger.list(limit=2, offset=1)] == [2, 3]


def test_a_recurring_duty_is_listed_at_its_bookmark() -> None:
    clock = ManualClock(NOW)
    with Ledger(":memory:", clock=clock) as ledger:
        c = ledger.add(
            NewCommitment(
                debtor="bot", creditor="me", action="daily digest", rrule="FREQ=DAILY;BYHOUR=18", starts_at=NOW
            ),
            "bot",
        )
        first = ledger.due()[0]
        assert (first.group, first.due_at) == (DueGroup.DUE_SOON, c.bookmark)
        ledger.retire(c.id, "me")
        assert ledger.due() == []


# ------------------------------------------------------------------ replay


def history_of_one() -> list[AuditEvent]:
    with Ledger(":memory:", clock=FixedClock(NOW)) as ledger:
        c = ledger.add(NewCommitment(debtor="bot", creditor="sarah", action="send"), "bot")
        ledger.schedule(c.id, NOW + timedelta(days=1), "bot")
        ledger.acknowledge(c.id, "bot")
        with pytest.raises(Exception, match="standing"):
            ledger.release(c.id, "dave")
        ledger.complete(c.id, "bot")
        events = ledger.history(c.id)
        assert replay(events) == ledger.get(c.id)
        return events


def test_replay_rebuilds_each_prefix() -> None:
    events = history_of_one()
    statuses = [replay(events[: n + 1]).status.value for n in range(len(events))]
    assert statuses == ["unscheduled", "pending", "acknowledged", "acknowledged", "completed"]


REPLAY_ERRORS = [
    ("empty", lambda ev: [], "no events"),
    ("no creation", lambda ev: ev[1:], "start with a 'created'"),
    ("out of order", lambda ev: [ev[0], ev[1].model_copy(update={"seq": 0})], "in order"),
    ("gap", lambda ev: [ev[0], ev[2]], "starts from"),
    ("twice created", lambda ev: [ev[0], ev[0].model_copy(update={"seq": 99})], "second 'created'"),
    ("foreign", lambda ev: [ev[0], ev[1].model_copy(update={"commitment_id": 7})], "belongs to commitment 7"),
    (
        "garbled",
        lambda ev: [ev[0], ev[1].model_copy(update={"changes": {"status": "teleported"}})],
        "not describe a valid commitment",
    ),
]


@pytest.mark.parametrize(("name", "mangle", "message"), REPLAY_ERRORS, ids=[c[0] for c in REPLAY_ERRORS])
def test_replay_rejects_inconsistent_histories(name: str, mangle, message: str) -> None:
    with pytest.raises(ReplayError, match=message):
        replay(mangle(history_of_one()))
