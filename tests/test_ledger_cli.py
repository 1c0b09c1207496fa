"""``commitbench ledger`` end to end, through ``commitbench.cli.main`` and once as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from commitbench.cli import main

NOW = "2025-03-26T08:00:00Z"
WEEKLY = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0"


def ledger(db: Path, *args: str, now: str = NOW) -> list[str]:
    return ["ledger", "--db", str(db), "--now", now, *args]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "ledger.db"
    adds = [
        ["--debtor", "molty", "--creditor", "clinton", "--action", "check the order", "--rrule", WEEKLY,
         "--starts", "2025-03-01T00:00:00Z"],
        ["--debtor", "molty", "--creditor", "sarah", "--action", "send the plan", "--due", "2025-03-26T17:00:00Z",
         "--delegate", "tom"],
        ["--debtor", "molty", "--creditor", "ali", "--action", "share the slides"],
    ]
    for fields in adds:
        code, _, err = run(capsys, ledger(path, "add", *fields))
        assert code == 0, err
    return path


def test_add_list_and_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, ledger(db, "list"))
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["#1", "pending"],
        ["#2", "pending"],
        ["#3", "unscheduled"],
    ]
    code, out, _ = run(capsys, ledger(db, "list", "--json", "--status", "unscheduled"))
    rows = json.loads(out)
    assert code == 0 and [r["action"] for r in rows] == ["share the slides"]


def test_due_groups(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, ledger(db, "due", "--window", "12h"))
    assert code == 0
    headings = [line for line in out.splitlines() if not line.startswith(" ")]
    assert headings == ["overdue:", "due soon:", "unscheduled:"]
    code, out, _ = run(capsys, ledger(db, "due", "--json"))
    assert [(i["group"], i["commitment"]["id"]) for i in json.loads(out)] == [
        ("overdue", 1),
        ("due_soon", 2),
        ("unscheduled", 3),
    ]


def test_satisfy_retry_stale_and_show(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, ledger(db, "satisfy", "1", "--occurrence", "2025-03-03T09:00:00Z", "--actor", "molty"))
    assert code == 0 and "skipped 3 missed occurrence(s)" in out and "next 2025-03-31 09:00Z" in out
    code, out, _ = run(capsys, ledger(db, "satisfy", "1", "--occurrence", "2025-03-03T09:00:00Z", "--actor", "molty"))
    assert code == 0 and "already closed; nothing changed" in out
    code, _, err = run(capsys, ledger(db, "waive", "1", "--occurrence", "2025-03-10T09:00:00Z", "--actor", "molty"))
    assert code == 1 and "StaleOccurrence" in err and "2025-03-31T09:00:00+00:00" in err
    code, out, _ = run(capsys, ledger(db, "show", "1", "--json"))
    shown = json.loads(out)
    assert [e["kind"] for e in shown["history"]] == ["created", "satisfied", "occurrences_skipped"]
    assert shown["commitment"]["bookmark"] == "2025-03-31T09:00:00Z"


def test_release_standing_close_and_retire(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, ledger(db, "release", "2", "--actor", "dave", "--reason", "manager says"))
    assert code == 1 and "StandingRefused" in err and "'dave' has no standing" in err
    code, out, _ = run(capsys, ledger(db, "release", "2", "--actor", "tom"))
    assert code == 0 and "cancelled" in out
    code, out, _ = run(capsys, ledger(db, "show", "2"))
    assert "standing_refused" in out and "by dave" in out and '"standing": "delegate"' in out
    code, _, err = run(capsys, ledger(db, "close", "1", "--outcome", "completed", "--actor", "molty"))
    assert code == 1 and "RecurringCloseRefused" in err
    code, out, _ = run(capsys, ledger(db, "retire", "1", "--actor", "clinton"))
    assert code == 0 and "retired" in out
    code, out, _ = run(capsys, ledger(db, "schedule", "3", "--due", "2025-03-28T10:00:00Z", "--actor", "molty"))
    assert code == 0 and "pending" in out
    code, out, _ = run(capsys, ledger(db, "ack", "3", "--actor", "molty"))
    assert code == 0 and "acknowledged" in out
    code, out, _ = run(capsys, ledger(db, "close", "3", "--outcome", "completed", "--actor", "molty"))
    assert code == 0 and "completed" in out


USAGE_ERRORS = [
    (["due", "--window", "soon"], "bad duration"),
    (["schedule", "3", "--due", "tomorrow", "--actor", "x"], "not an ISO 8601 time"),
    (["schedule", "3", "--due", "2025-03-28T10:00:00", "--actor", "x"], "has no timezone"),
    (["add", "--debtor", " ", "--creditor", "b", "--action", "x"], "debtor"),
    (["add", "--debtor", "a", "--creditor", "b", "--action", "x", "--starts", "2025-03-01T00:00:00Z"], "--rrule"),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors(db: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = run(capsys, ledger(db, *args))
    assert code == 2 and message in err


def test_missing_db_and_unknown_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, ["ledger", "list"])
    assert code == 2 and "--db" in err
    code, _, err = run(capsys, ledger(tmp_path / "empty.db", "show", "9"))
    assert code == 1 and "no ledger at" in err and not (tmp_path / "empty.db").exists()  # reading creates nothing
    run(capsys, ledger(tmp_path / "empty.db", "add", "--debtor", "a", "--creditor", "b", "--action", "x"))
    code, _, err = run(capsys, ledger(tmp_path / "empty.db", "show", "9"))
    assert code == 1 and "no commitment with id 9" in err


@pytest.mark.slow
def test_ledger_cli_as_a_process(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    base = [sys.executable, "-m", "commitbench.cli", "ledger", "add", "--db", str(path), "--now", NOW]
    added = subprocess.run(
        [*base, "--debtor", "bot", "--creditor", "sarah", "--action", "send", "--due", "2025-03-25T00:00:00Z"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert added.stdout.startswith("#1")
    due = subprocess.run(
        [sys.executable, "-m", "commitbench.cli", "ledger", "due", "--db", str(path), "--now", NOW, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [item["group"] for item in json.loads(due.stdout)] == ["overdue"]
