"""Catch-up of a long-missed recurring duty is bounded: counted without walking every occurrence, and the
write lock is held for a moment, not for the count.

Satisfying a duty whose first occurrence is long past passes over every occurrence up to now. A duty
that ticks every second since 1900 has about four billion of them: they are counted by arithmetic when
the rule is a plain grid (one occurrence per period), walked up to a limit otherwise (the audit event then
states a lower bound), and the upcoming occurrence is found from a point near now. The differential
tests check the shortcut against dateutil walking the rule from its start.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commitbench.ledger import AuditEventKind, FixedClock, Ledger, NewCommitment, replay
from commitbench.ledger.recurrence import WALK_LIMIT, Recurrence

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SINCE_1900 = datetime(1900, 1, 1, tzinfo=UTC)
# Far above the milliseconds a bounded catch-up takes; far below the minutes an unbounded one took.
GENEROUS_SECONDS = 1.0


def add_duty(ledger: Ledger, rule: str, start: datetime, timezone: str = "UTC") -> int:
    new = NewCommitment(debtor="bot", creditor="me", action="tick", rrule=rule, starts_at=start, timezone=timezone)
    return ledger.add(new, "bot").id


def test_a_secondly_duty_missed_since_1900_is_satisfied_in_under_a_second(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.db", clock=FixedClock(NOW)) as ledger:
        cid = add_duty(ledger, "FREQ=SECONDLY", SINCE_1900)
        started = time.perf_counter()
        result = ledger.satisfy(cid, SINCE_1900, "bot", "back from a long break")
        elapsed = time.perf_counter() - started
        history = ledger.history(cid)
    assert elapsed < GENEROUS_SECONDS, f"satisfy took {elapsed:.2f} s"
    every_second = int((NOW - SINCE_1900).total_seconds())
    assert result.skipped_count == every_second - 1 and result.skipped_count_exact  # all but the one closed
    assert result.commitment.bookmark == NOW
    assert len(result.skipped) == 1000 and result.skipped[0] == SINCE_1900 + timedelta(seconds=1)
    skip = history[-1]
    assert skip.kind is AuditEventKind.OCCURRENCES_SKIPPED
    assert skip.details["count"] == every_second - 1 and skip.details["count_exact"] is True
    assert replay(history) == result.commitment


@pytest.mark.parametrize(
    ("zone", "extra"),
    [
        ("UTC", 0),
        # Occurrences are wall-clock minutes: the hour clocks skipped in March 2016 (Turkey kept summer time
        # from that September on) still holds 60 of them. A walk of all 5,258,939 agrees.
        ("Europe/Istanbul", 60),
    ],
)
def test_a_minutely_duty_missed_for_ten_years_is_counted_exactly(tmp_path: Path, zone: str, extra: int) -> None:
    start = NOW - timedelta(days=3652)
    with Ledger(tmp_path / "l.db", clock=FixedClock(NOW)) as ledger:
        cid = add_duty(ledger, "FREQ=MINUTELY", start, zone)
        started = time.perf_counter()
        result = ledger.satisfy(cid, start, "bot")
        elapsed = time.perf_counter() - started
    assert elapsed < GENEROUS_SECONDS, f"satisfy took {elapsed:.2f} s"
    assert result.skipped_count == 3652 * 24 * 60 - 1 + extra and result.skipped_count_exact
    assert result.commitment.bookmark == NOW


def test_a_dense_irregular_rule_states_a_lower_bound(tmp_path: Path) -> None:
    rule = "FREQ=MINUTELY;BYSECOND=0,20,40"  # three a minute: not one per period, so no arithmetic
    with Ledger(tmp_path / "l.db", clock=FixedClock(NOW)) as ledger:
        cid = add_duty(ledger, rule, SINCE_1900)
        started = time.perf_counter()
        result = ledger.satisfy(cid, SINCE_1900, "bot")
        elapsed = time.perf_counter() - started
        skip = ledger.history(cid)[-1]
    assert elapsed < GENEROUS_SECONDS, f"satisfy took {elapsed:.2f} s"
    assert not result.skipped_count_exact and result.skipped_count == WALK_LIMIT
    assert skip.details["count_exact"] is False and skip.details["count"] == WALK_LIMIT
    assert skip.details["count_text"] == f"at least {WALK_LIMIT:,}"
    assert result.commitment.bookmark == NOW


# A process that satisfies the 1900 duty while this one writes with a short busy timeout: before, the
# catch-up held the write lock for minutes and these writes failed with "database is locked".
SATISFIER = r"""
import sys
from datetime import datetime
from pathlib import Path
from commitbench.ledger import FixedClock, Ledger
db, now, first = sys.argv[1:4]
with Ledger(db, clock=FixedClock(datetime.fromisoformat(now))) as ledger:
    Path(db + ".started").touch()
    result = ledger.satisfy(1, datetime.fromisoformat(first), "bot")
print(result.skipped_count)
"""


def test_other_processes_keep_writing_while_a_long_catch_up_runs(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger(db, clock=FixedClock(NOW)) as ledger:
        add_duty(ledger, "FREQ=SECONDLY", SINCE_1900)
    proc = subprocess.Popen(
        [sys.executable, "-c", SATISFIER, str(db), NOW.isoformat(), SINCE_1900.isoformat()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    writes = 0
    with Ledger(db, clock=FixedClock(NOW), busy_timeout_ms=2_000) as other:
        deadline = time.monotonic() + 120
        while not Path(f"{db}.started").exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the satisfying process did not start"
            time.sleep(0.01)
        while time.monotonic() < deadline:  # each write would fail with "database is locked" after 2 s
            running = proc.poll() is None
            other.add(NewCommitment(debtor="other", creditor="me", action=f"write {writes}"), "other")
            writes += 1
            if not running:
                break
            time.sleep(0.005)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert int(out) == int((NOW - SINCE_1900).total_seconds()) - 1
    with Ledger(db, clock=FixedClock(NOW)) as ledger:
        assert len(ledger.list()) == 1 + writes


def test_the_write_lock_is_held_for_milliseconds_during_a_long_catch_up(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.db", clock=FixedClock(NOW)) as ledger:
        # every second, in a zone with daylight saving: the longest catch-up a rule can ask for
        cid = add_duty(ledger, "FREQ=SECONDLY", SINCE_1900, "America/New_York")
        held: list[float] = []
        began: list[float] = []

        def trace(statement: str) -> None:
            if statement.startswith("BEGIN IMMEDIATE"):
                began.append(time.perf_counter())
            elif statement in ("COMMIT", "ROLLBACK") and began:
                held.append(time.perf_counter() - began.pop())

        ledger.store.conn.set_trace_callback(trace)
        started = time.perf_counter()
        ledger.satisfy(cid, SINCE_1900, "bot")
        total = time.perf_counter() - started
    # planned outside the lock: the lock is held for a small part of the call, never for the walk
    assert held and max(held) < min(0.25, total / 2), f"write lock held {max(held):.3f} s of {total:.3f} s"


# ------------------------------------------------------------- the shortcut agrees with walking the rule
ZONES = ["UTC", "Europe/Istanbul", "America/New_York", "Australia/Lord_Howe"]
RULES = st.one_of(
    st.builds(
        lambda freq, interval: f"FREQ={freq};INTERVAL={interval}",
        st.sampled_from(["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]),
        st.integers(1, 5),
    ),
    st.sampled_from(
        [
            "FREQ=HOURLY;BYMINUTE=0,30",
            "FREQ=HOURLY;INTERVAL=5;BYHOUR=1,6,11,16",
            "FREQ=MINUTELY;INTERVAL=7;BYSECOND=5",
            "FREQ=DAILY;BYHOUR=2,3;BYMINUTE=30",
            "FREQ=WEEKLY;BYDAY=MO,FR;BYHOUR=9",
            "FREQ=WEEKLY;INTERVAL=2;WKST=SU;BYDAY=SU,TU",
            "FREQ=MONTHLY;BYMONTHDAY=31",
            "FREQ=MONTHLY;BYDAY=-1FR",
            "FREQ=MONTHLY;INTERVAL=2;BYDAY=MO;BYSETPOS=2",
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
            "FREQ=YEARLY;BYWEEKNO=1;BYDAY=MO",
            "FREQ=DAILY;UNTIL=20300101T000000Z",
        ]
    ),
)
# how far past the anchor a moment may lie, in periods of each frequency (keeps the brute force quick)
SPAN = {"SECONDLY": 3 * 86400, "MINUTELY": 86400 * 3, "HOURLY": 86400 * 60, "DAILY": 86400 * 3000,
        "WEEKLY": 86400 * 5000, "MONTHLY": 86400 * 9000, "YEARLY": 86400 * 40000}  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule=RULES,
    zone=st.sampled_from(ZONES),
    start_offset=st.integers(0, 10 * 365 * 86400),
    fraction=st.floats(0, 1),
)
def test_occurrences_after_a_moment_match_a_walk_from_the_start(
    rule: str, zone: str, start_offset: int, fraction: float
) -> None:
    start = datetime(2015, 1, 1, tzinfo=UTC) + timedelta(seconds=start_offset)
    freq = rule.split(";")[0].split("=")[1]
    moment = start + timedelta(seconds=int(SPAN[freq] * fraction))
    walked = rrulestr(rule, dtstart=start.astimezone(ZoneInfo(zone)))
    recurrence = Recurrence(rule, start, zone)
    for inclusive in (False, True):
        expected = walked.after(moment, inc=inclusive)
        got = recurrence.after(moment, inclusive)
        assert got == (expected.astimezone(UTC) if expected is not None else None), (rule, zone, start, moment)


def _walked_catch_up(rule: str, start: datetime, zone: str, live: datetime, now: datetime, cap: int) -> tuple:
    """What catch-up used to do, walking every occurrence (stopped after ``cap``): following, skipped, upcoming,
    and whether the walk got to the end."""
    walked = rrulestr(rule, dtstart=start.astimezone(ZoneInfo(zone)))
    following = walked.after(live)
    if following is None or following >= now:
        return following, [], following, True
    skipped = []
    for occurrence in walked.xafter(following, inc=True):
        if occurrence >= now:
            return following, skipped, occurrence, True
        skipped.append(occurrence.astimezone(UTC))
        if len(skipped) >= cap:
            return following, skipped, None, False
    return following, skipped, None, True


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule=RULES, zone=st.sampled_from(ZONES), start_offset=st.integers(0, 10 * 365 * 86400), share=st.floats(0, 0.1)
)
def test_catch_up_agrees_with_walking_every_occurrence(rule: str, zone: str, start_offset: int, share: float) -> None:
    start = datetime(2015, 1, 1, tzinfo=UTC) + timedelta(seconds=start_offset)
    recurrence = Recurrence(rule, start, zone)
    live = recurrence.first()
    if live is None:
        return
    now = live + timedelta(seconds=int(SPAN[rule.split(";")[0].split("=")[1]] * share))
    following, skipped, upcoming, finished = _walked_catch_up(rule, start, zone, live, now, 4 * WALK_LIMIT)
    catch_up = recurrence.catch_up(live, now)
    assert catch_up.next_after_live == (following.astimezone(UTC) if following is not None else None)
    assert list(catch_up.skipped) == skipped[:1000]
    if catch_up.skipped_count_exact:
        assert finished, "an exact count beyond what the walk could check"
        assert catch_up.skipped_count == len(skipped)
    else:
        assert catch_up.skipped_count == WALK_LIMIT < len(skipped)
    if finished:
        assert catch_up.upcoming == (upcoming.astimezone(UTC) if upcoming is not None else None)
        assert catch_up.skipped_count_exact or len(skipped) > WALK_LIMIT


def test_a_rule_that_counts_too_far_is_refused_at_input() -> None:
    from commitbench.ledger import InvalidCommitment

    with pytest.raises(InvalidCommitment, match="COUNT"):
        Recurrence("FREQ=SECONDLY;COUNT=100000000", SINCE_1900)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "never occurs"),  # dateutil walked every day to the year 9999
        ("FREQ=MINUTELY;BYHOUR=25", "cannot be expanded"),  # dateutil raised a bare ValueError
    ],
)
def test_a_rule_that_never_occurs_is_refused_quickly(rule: str, message: str) -> None:
    from commitbench.ledger import InvalidCommitment

    with Ledger(":memory:", clock=FixedClock(NOW)) as ledger:
        started = time.perf_counter()
        with pytest.raises(InvalidCommitment, match=message):
            add_duty(ledger, rule, NOW)
        assert time.perf_counter() - started < GENEROUS_SECONDS
