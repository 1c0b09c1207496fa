"""The ledger refuses what it cannot keep, and one bad row, a foreign file or a hostile string never ends in a
traceback: dates outside the supported range, rows stored in a bad form, files that are not ledgers, huge
ids, control characters in stored text."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.ledger import EARLIEST_TIME, LATEST_TIME, FixedClock, InvalidCommitment, Ledger, NewCommitment
from commitbench.ledger.store import to_db_time

NOW = "2025-03-26T08:00:00Z"


def ledger(db: Path, *args: str, now: str = NOW) -> list[str]:
    return ["ledger", "--db", str(db), "--now", now, *args]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def add(capsys: pytest.CaptureFixture[str], db: Path, *fields: str) -> tuple[int, str, str]:
    return run(capsys, ledger(db, "add", "--debtor", "molty", "--creditor", "sarah", *fields))


# ------------------------------------------------------------------------------------------ dates
@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--action", "x", "--due", "0999-06-01T00:00:00Z"], "--due"),
        (["--action", "x", "--due", "9999-12-31T23:59:59Z"], "--due"),
        (["--action", "x", "--rrule", "FREQ=DAILY", "--starts", "0100-01-01T00:00:00Z"], "--starts"),
    ],
)
def test_dates_outside_the_range_are_refused_at_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], flag: str
) -> None:
    db = tmp_path / "l.db"
    code, _, err = add(capsys, db, *args)
    assert code == 2 and flag in err and "1900-01-01" in err and "2999-12-31" in err, err
    code, out, _ = run(capsys, ledger(db, "list"))
    assert code == 0 and out.strip() == "(no commitments)"


@pytest.mark.parametrize("now", ["9999-12-31T23:00:00Z", "0001-01-01T00:00:00Z"])
def test_a_now_outside_the_range_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], now: str) -> None:
    code, _, err = run(capsys, ledger(tmp_path / "l.db", "due", now=now))
    assert code == 2 and "--now" in err and "1900-01-01" in err


def test_the_range_is_the_documented_one() -> None:
    assert datetime(1900, 1, 1, tzinfo=UTC) == EARLIEST_TIME
    assert datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) == LATEST_TIME
    with pytest.raises(ValueError, match="due_at"):
        NewCommitment(debtor="a", creditor="b", action="x", due_at=datetime(999, 6, 1, tzinfo=UTC))
    with Ledger(":memory:", clock=FixedClock(datetime(2025, 1, 1, tzinfo=UTC))) as book:
        promise = book.add(NewCommitment(debtor="a", creditor="b", action="x"), "a")
        with pytest.raises(InvalidCommitment, match="outside the ledger's range"):
            book.schedule(promise.id, datetime(3000, 1, 1, tzinfo=UTC), "a")


def test_a_due_list_near_the_end_of_time_does_not_overflow() -> None:
    with Ledger(":memory:", clock=FixedClock(datetime(9999, 12, 31, 23, tzinfo=UTC))) as book:
        assert book.due() == []
        assert book.due(timedelta(days=3650)) == []


@pytest.mark.parametrize("window", ["99999999999w", "1e9d"])
def test_an_absurd_window_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], window: str) -> None:
    code, _, err = run(capsys, ledger(tmp_path / "l.db", "due", "--window", window))
    assert code == 2 and "duration" in err


def test_stored_times_are_padded_so_text_order_is_time_order() -> None:
    moments = [datetime(year, 6, 1, tzinfo=UTC) for year in (5, 99, 999, 1000, 2025, 9999)]
    stored = [to_db_time(moment) for moment in moments]
    assert stored[2] == "0999-06-01T00:00:00.000000+00:00"
    assert sorted(stored) == stored and len({len(text) for text in stored}) == 1


def _insert_raw(db: Path, **overrides: object) -> None:
    """A row written behind the ledger's back (an older version, a bug, another tool)."""
    conn = sqlite3.connect(db)
    columns = {
        "id": 2, "kind": "one_shot", "status": "pending", "is_open": 1, "due_key": "2025-03-27T00:00:00.000000+00:00",
        "debtor": "molty", "creditor": "ali", "delegates": "[]", "action": "legacy row", "condition": None,
        "due_at": "2025-03-27T00:00:00.000000+00:00", "rrule": None, "starts_at": None, "timezone": None,
        "bookmark": None, "last_closed": None, "scope": "default", "created_at": "2025-03-01T00:00:00.000000+00:00",
        "updated_at": "2025-03-01T00:00:00.000000+00:00", "version": 1,
    }  # fmt: skip
    columns.update(overrides)
    conn.execute(
        f"INSERT INTO commitments ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
        tuple(columns.values()),
    )
    conn.commit()
    conn.close()


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "l.db"
    code, _, err = add(capsys, path, "--action", "send the plan", "--due", "2025-03-26T17:00:00Z")
    assert code == 0, err
    return path


def test_an_unpadded_year_written_by_an_older_version_is_repaired_on_open(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _insert_raw(db, due_at="999-06-01T00:00:00.000000+00:00", due_key="999-06-01T00:00:00.000000+00:00")
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM schema_version WHERE version > 2")  # the file as that version left it
    conn.commit()
    conn.close()
    code, out, err = run(capsys, ledger(db, "list"))
    assert code == 0, err
    assert "due 0999-06-01 00:00Z" in out.splitlines()[1]
    code, out, _ = run(capsys, ledger(db, "due"))
    lines = out.splitlines()
    assert lines[0] == "overdue:" and lines[1].split()[0] == "#2"  # the year 999 sorts first again


@pytest.mark.parametrize(
    "overrides",
    [
        {"due_at": "not a time", "due_key": "not a time"},
        {"status": "mislaid"},
        {"delegates": "{broken json"},
    ],
    ids=["bad time", "unknown status", "broken json"],
)
def test_a_bad_row_is_reported_by_id_and_the_rest_is_listed(
    db: Path, capsys: pytest.CaptureFixture[str], overrides: dict[str, object]
) -> None:
    _insert_raw(db, **overrides)
    code, _, err = add(capsys, db, "--action", "after the bad one")
    assert code == 0, err
    for command in (["list"], ["due"], ["list", "--json"], ["due", "--json"]):
        code, out, err = run(capsys, ledger(db, *command))
        assert code == 1, (command, err)
        assert "commitment 2" in err and "cannot be read" in err, (command, err)
        assert "send the plan" in out and "after the bad one" in out and "legacy row" not in out, (command, out)
    code, out, err = run(capsys, ledger(db, "show", "2"))
    assert code == 1 and "commitment 2" in err and "cannot be read" in err
    code, out, _ = run(capsys, ledger(db, "show", "3"))
    assert code == 0 and "after the bad one" in out


# ------------------------------------------------------------------------------------------ files
def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes, not a database\n" * 100)
    before = path.read_bytes()
    code, _, err = run(capsys, ledger(path, "list"))
    assert code == 2 and str(path) in err and "not a SQLite database" in err, err
    assert path.read_bytes() == before


def _foreign_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.commit()
    conn.close()


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    return names


def test_another_applications_database_is_refused_unless_asked_to_initialise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    _foreign_database(path)
    for command in (["list"], ["due"], ["add", "--debtor", "a", "--creditor", "b", "--action", "x"]):
        code, _, err = run(capsys, ledger(path, *command))
        assert code == 2 and "not a ledger" in err and "--init" in err, err
        assert _tables(path) == {"notes"}
    code, _, err = run(capsys, ["ledger", "--db", str(path), "--now", NOW, "--init", "list"])
    assert code == 0, err
    assert {"notes", "commitments", "events", "schema_version"} <= _tables(path)
    code, _, err = run(capsys, ledger(path, "list"))  # now it is one
    assert code == 0, err


def test_a_missing_file_is_created_and_a_ledger_from_before_the_marker_still_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sub" / "new.db"
    code, _, err = add(capsys, path, "--action", "x")
    assert code == 0, err
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 0")  # as written before the marker existed
    conn.commit()
    conn.close()
    code, out, err = run(capsys, ledger(path, "list"))
    assert code == 0 and "#1" in out, err


def test_an_empty_file_is_initialised_like_a_missing_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    code, _, err = add(capsys, path, "--action", "x")
    assert code == 0, err


# ------------------------------------------------------------------------------------------ ids
@pytest.mark.parametrize(
    "args",
    [
        ["show", str(10**23)],
        ["ack", str(10**23), "--actor", "x"],
        ["show", "-5"],
        ["list", "--limit", str(10**23)],
        ["due", "--limit", "-1"],
    ],
)
def test_huge_or_negative_numbers_are_clear_errors(
    db: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    code, _, err = run(capsys, ledger(db, *args))
    assert code == 2 and "whole number" in err, err


def test_the_engine_answers_not_found_for_an_id_sqlite_cannot_hold() -> None:
    from commitbench.ledger import CommitmentNotFound

    with Ledger(":memory:", clock=FixedClock(datetime(2025, 1, 1, tzinfo=UTC))) as book:
        with pytest.raises(CommitmentNotFound):
            book.get(10**23)
        with pytest.raises(CommitmentNotFound):
            book.acknowledge(10**23, "x")


# ------------------------------------------------------------------------------------ terminals
HOSTILE = "pay\x1b[2J\x1b[31m now\nFAKE LINE\r\x07\x9b31m\u202eevil"


def test_stored_control_characters_are_escaped_when_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.db"
    code, out, err = add(
        capsys, db, "--action", HOSTILE, "--condition", HOSTILE, "--delegate", HOSTILE, "--reason", HOSTILE
    )
    assert code == 0, err
    for command in (["list"], ["due"], ["show", "1"], ["ack", "1", "--actor", HOSTILE, "--reason", HOSTILE]):
        code, out, err = run(capsys, ledger(db, *command))
        assert code == 0, err
        for text in (out, err):
            assert not any(ch in text for ch in "\x1b\r\x07\x9b\u202e"), (command, text)
        assert "FAKE LINE" not in [line.strip() for line in out.splitlines()]
        assert "\\x1b[2J" in out and "\\n" in out
    code, out, _ = run(capsys, ledger(db, "show", "1", "--json"))
    assert json.loads(out)["commitment"]["action"] == HOSTILE  # JSON keeps the value, escaped by JSON itself
    assert not any(ch in out for ch in "\x1b\r\x07\x9b\u202e")
