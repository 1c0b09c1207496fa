"""Properties of the ledger over random sequences of operations (hypothesis).

After every operation, for every commitment:
- a terminal commitment never changes;
- the bookmark moves only when that commitment's occurrence was satisfied or waived;
- each state change has exactly one audit event (the version counts them), and events are
  only ever appended;
- replaying the audit trail reproduces the stored state.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commitbench.ledger import (
    AllowParties,
    AuditEventKind,
    Commitment,
    IllegalTransition,
    LedgerError,
    ManualClock,
    NewCommitment,
    Outcome,
    StaleOccurrence,
    StandingRefused,
    replay,
)
from commitbench.ledger.engine import Ledger

START = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
RULES = (
    "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
    "FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
    "FREQ=HOURLY;INTERVAL=6;COUNT=5",
)
ACTORS = ("creditor", "delegate", "outsider", "policy", "debtor")

pick = st.integers(min_value=0, max_value=50)
hours = st.integers(min_value=-72, max_value=240)
operations = st.one_of(
    st.tuples(st.just("add_one_shot"), st.one_of(st.none(), hours), st.booleans()),
    st.tuples(st.just("add_recurring"), st.sampled_from(RULES), st.integers(0, 48)),
    st.tuples(st.just("ack"), pick),
    st.tuples(st.just("schedule"), pick, hours),
    st.tuples(st.just("close"), pick, st.sampled_from(list(Outcome)), st.sampled_from(ACTORS)),
    st.tuples(st.just("release"), pick, st.sampled_from(ACTORS)),
    st.tuples(st.just("retire"), pick, st.sampled_from(ACTORS)),
    st.tuples(st.just("satisfy"), pick, st.sampled_from(("live", "previous", "stale"))),
    st.tuples(st.just("waive"), pick, st.sampled_from(("live", "previous", "stale"))),
    st.tuples(st.just("delegate"), pick, st.sampled_from(ACTORS)),
    st.tuples(st.just("advance"), st.integers(min_value=0, max_value=24 * 9)),
)


def actor_name(role: str, c: Commitment) -> str:
    return {
        "creditor": c.creditor,
        "delegate": "tom",
        "outsider": "mallory",
        "policy": "lead",
        "debtor": c.debtor,
    }[role]


def run_operation(ledger: Ledger, clock: ManualClock, op: tuple) -> int | None:
    """Apply one operation; return the id it targeted when it was satisfy/waive, else None."""
    name = op[0]
    ids = [c.id for c in ledger.list()]
    if name == "add_one_shot":
        due = clock.now() + timedelta(hours=op[1]) if op[1] is not None else None
        ledger.add(
            NewCommitment(
                debtor="bot",
                creditor="sarah",
                action="send",
                due_at=due,
                condition="numbers land" if op[2] else None,
                delegates=("tom",) if op[2] else (),
            ),
            "bot",
        )
        return None
    if name == "add_recurring":
        ledger.add(
            NewCommitment(
                debtor="bot",
                creditor="clinton",
                action="check",
                rrule=op[1],
                starts_at=clock.now() - timedelta(hours=op[2]),
            ),
            "bot",
        )
        return None
    if name == "advance":
        clock.advance(timedelta(hours=op[1]))
        return None
    if not ids:
        return None
    cid = ids[op[1] % len(ids)]
    c = ledger.get(cid)
    if name == "ack":
        ledger.acknowledge(cid, "bot")
    elif name == "schedule":
        ledger.schedule(cid, clock.now() + timedelta(hours=op[2]), "bot")
    elif name == "close":
        ledger.close_commitment(cid, op[2], actor_name(op[3], c))
    elif name == "release":
        ledger.release(cid, actor_name(op[2], c))
    elif name == "retire":
        ledger.retire(cid, actor_name(op[2], c))
    elif name == "delegate":
        ledger.name_delegate(cid, "tom", actor_name(op[2], c))
    elif name in ("satisfy", "waive"):
        live = c.bookmark or clock.now()
        target = {
            "live": live,
            "previous": c.last_closed or live,
            "stale": live + timedelta(minutes=7),
        }[op[2]]
        (ledger.satisfy if name == "satisfy" else ledger.waive)(cid, target, "bot")
        return cid
    return None


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, min_size=1, max_size=30))
def test_random_operation_sequences_keep_the_invariants(ops: list[tuple]) -> None:
    clock = ManualClock(START)
    with Ledger(":memory:", clock=clock, policy=AllowParties(["lead"])) as ledger:
        for op in ops:
            before = {c.id: c for c in ledger.list()}
            histories = {cid: ledger.history(cid) for cid in before}
            events_total = ledger.store.event_count()
            moved_by = None
            error: Exception | None = None
            try:
                moved_by = run_operation(ledger, clock, op)
            except (IllegalTransition, StaleOccurrence, StandingRefused) as exc:
                error = exc
            except LedgerError as exc:  # pragma: no cover - any other error is a bug in the engine
                raise AssertionError(f"unexpected {exc!r} for {op}") from exc

            after = {c.id: c for c in ledger.list()}
            new_events = ledger.store.event_count() - events_total
            if error is not None and not isinstance(error, StandingRefused):
                assert new_events == 0, f"{op} failed with {error!r} but wrote events"
            if isinstance(error, StandingRefused):
                assert new_events == 1
            for cid, old in before.items():
                new = after[cid]
                history = ledger.history(cid)
                assert history[: len(histories[cid])] == histories[cid], "events must only be appended"
                appended = history[len(histories[cid]) :]
                if old.is_terminal:
                    assert new == old, f"terminal commitment {cid} changed under {op}"
                if new.bookmark != old.bookmark:
                    assert moved_by == cid and op[0] in ("satisfy", "waive"), f"bookmark moved under {op}"
                state_events = [e for e in appended if e.changes]
                assert len(state_events) == new.version - old.version
                assert (new != old) == bool(state_events)
                assert all(e.kind is AuditEventKind.STANDING_REFUSED for e in appended if not e.changes)
                assert replay(history) == new
            for cid in set(after) - set(before):
                assert replay(ledger.history(cid)) == after[cid]
