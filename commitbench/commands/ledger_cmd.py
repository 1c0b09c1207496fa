"""``commitbench ledger``: keep commitments in a SQLite ledger from the command line."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from commitbench.cli import UsageError
from commitbench.commands.common import print_safe_json, safe

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


_MAX_DURATION = timedelta(days=366 * 1000)
# SQLite's integers are 64-bit; no id or count of a ledger goes beyond that.
_MAX_NUMBER = 2**63 - 1


def parse_duration(text: str) -> timedelta:
    """'90m', '24h', '2d', '1w' -> timedelta (at most 1,000 years)."""
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"bad duration {text!r}: use a number and a unit s, m, h, d or w (e.g. 24h)")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds > _MAX_DURATION.total_seconds():
        raise UsageError(f"bad duration {text!r}: at most 1,000 years")
    return timedelta(seconds=seconds)


def parse_time(text: str, what: str) -> datetime:
    """An ISO 8601 time with a timezone offset ('Z' allowed), inside the ledger's range of times."""
    from commitbench.ledger.models import check_time_range

    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise UsageError(f"{what}: {text!r} is not an ISO 8601 time (e.g. 2025-03-03T09:00:00Z)") from exc
    if value.tzinfo is None:
        raise UsageError(f"{what}: {text!r} has no timezone; add Z or an offset such as +03:00")
    try:
        return check_time_range(value.astimezone(UTC), what)
    except (ValueError, OverflowError):
        raise UsageError(
            f"{what}: {text!r} is outside the ledger's range ({_time_range()}); check the year"
        ) from None


def _time_range() -> str:
    from commitbench.ledger.models import TIME_RANGE_TEXT

    return TIME_RANGE_TEXT


def parse_number(text: str | None, what: str, lowest: int) -> int | None:
    """A whole number from the command line (None stays None), from ``lowest`` to SQLite's largest."""
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or not lowest <= value <= _MAX_NUMBER:
        raise UsageError(f"{what} must be a whole number from {lowest} to {_MAX_NUMBER}, got {text[:40]!r}")
    return value


def _id(args: argparse.Namespace) -> int:
    value = parse_number(args.id, "the commitment id", 1)
    assert value is not None
    return value


def _fmt_time(value: datetime | None) -> str:
    return f"{value.year:04d}-{value:%m-%d %H:%M}Z" if value is not None else "-"  # %Y does not pad the year


def _describe(c: Any) -> str:
    if c.rrule is not None:
        when = f"next {_fmt_time(c.bookmark)} ({safe(c.rrule)}, {safe(c.timezone)})"
    elif c.due_at is not None:
        when = f"due {_fmt_time(c.due_at)}"
    elif c.condition:
        when = f"when {safe(c.condition)}"
    else:
        when = "no date yet"
    line = f"#{c.id:<4} {c.status.value:<12} {when:<28} {safe(c.debtor)} -> {safe(c.creditor)}: {safe(c.action)}"
    if c.delegates:
        line += f"  [delegates: {', '.join(safe(d) for d in c.delegates)}]"
    return line


def _report_unreadable(rows: Any) -> int:
    """Name each row a listing could not read (on stderr); 1 when there was one, else 0."""
    for row in rows.unreadable:
        print(
            f"commitbench ledger: commitment {row.commitment_id} cannot be read ({safe(row.problem)}); "
            "it is left out of this list",
            file=sys.stderr,
        )
    return 1 if rows.unreadable else 0


# Commitment ids are SQLite integers: 1 up to the largest signed 64-bit value.
def _open(args: argparse.Namespace, create: bool = False):
    from commitbench.ledger import FixedClock, Ledger, NotALedger, SystemClock

    db = getattr(args, "db", None)
    if not db:
        raise UsageError("ledger needs --db PATH (the SQLite file to keep commitments in)")
    now_text = getattr(args, "now", None)
    clock = FixedClock(parse_time(now_text, "--now")) if now_text else SystemClock()
    _check_arguments(args)
    try:
        return Ledger(db, clock=clock, init_existing=bool(getattr(args, "init", False)), create=create)
    except NotALedger as exc:
        raise UsageError(f"--db: {safe(exc)}") from None


def _check_arguments(args: argparse.Namespace) -> None:
    """The command's own arguments, checked before the ledger is opened: a malformed one is a usage error
    whether or not the file exists."""
    if getattr(args, "id", None) is not None:
        _id(args)
    if getattr(args, "window", None) is not None:
        parse_duration(args.window)
    if getattr(args, "limit", None) is not None:
        parse_number(args.limit, "--limit", 0)
    if getattr(args, "status", None):
        _statuses(args.status)


def _with_ledger(action, create: bool = False):
    """Open the ledger, run ``action(ledger, args)``, turn ledger errors into a message and exit code 1.

    Only a command that records a new commitment (``create``) makes the file when it is missing."""

    def handler(args: argparse.Namespace) -> int:
        from commitbench.ledger import LedgerError

        try:
            ledger = _open(args, create=create)
        except LedgerError as exc:
            print(f"commitbench ledger: {type(exc).__name__}: {safe(exc)}", file=sys.stderr)
            return 1
        try:
            return int(action(ledger, args) or 0)
        except LedgerError as exc:
            print(f"commitbench ledger: {type(exc).__name__}: {safe(exc)}", file=sys.stderr)
            return 1
        finally:
            ledger.close()

    return handler


def _add(ledger: Any, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from commitbench.ledger import NewCommitment

    fields: dict[str, Any] = {
        "debtor": args.debtor,
        "creditor": args.creditor,
        "action": args.action,
        "delegates": tuple(args.delegate or ()),
        "condition": args.condition,
        "scope": args.scope,
        "timezone": args.tz,
    }
    if args.due:
        fields["due_at"] = parse_time(args.due, "--due")
    if args.rrule:
        fields["rrule"] = args.rrule
        fields["starts_at"] = parse_time(args.starts, "--starts") if args.starts else ledger.clock.now()
    elif args.starts:
        raise UsageError("--starts only goes with --rrule")
    try:
        new = NewCommitment(**fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"invalid commitment: {problems}") from exc
    commitment = ledger.add(new, actor=args.actor or new.debtor, reason=args.reason)
    print(_describe(commitment))
    return 0


def _statuses(values: list[str] | None):
    from commitbench.ledger import CommitmentStatus

    if not values:
        return None
    try:
        return [CommitmentStatus(v) for v in values]
    except ValueError as exc:
        allowed = ", ".join(s.value for s in CommitmentStatus)
        raise UsageError(f"unknown status in {values}; choose from {allowed}") from exc


def _list(ledger: Any, args: argparse.Namespace) -> int:
    limit = parse_number(args.limit, "--limit", 0)
    rows = ledger.list(
        status=_statuses(args.status), debtor=args.debtor, creditor=args.creditor, scope=args.scope, limit=limit
    )
    if args.json:
        print_safe_json([c.model_dump(mode="json") for c in rows])
    else:
        for c in rows:
            print(_describe(c))
        if not rows and not rows.unreadable:
            print("(no commitments)")
    return _report_unreadable(rows)


def _due(ledger: Any, args: argparse.Namespace) -> int:
    limit = parse_number(args.limit, "--limit", 0)
    items = ledger.due(
        parse_duration(args.window), limit=limit, debtor=args.debtor, creditor=args.creditor, scope=args.scope
    )
    if args.json:
        print_safe_json([item.model_dump(mode="json") for item in items])
        return _report_unreadable(items)
    current = None
    for item in items:
        if item.group is not current:
            current = item.group
            print(f"{current.value.replace('_', ' ')}:")
        print("  " + _describe(item.commitment))
    if not items and not items.unreadable:
        print("(nothing due)")
    return _report_unreadable(items)


def _show(ledger: Any, args: argparse.Namespace) -> int:
    commitment = ledger.get(_id(args))
    history = ledger.history(commitment.id)
    if args.json:
        print_safe_json(
            {
                "commitment": commitment.model_dump(mode="json"),
                "history": [event.model_dump(mode="json") for event in history],
            }
        )
        return 0
    print(_describe(commitment))
    if commitment.condition:
        print(f"      condition: {safe(commitment.condition)}")
    created = _fmt_time(commitment.created_at)
    print(f"      scope: {safe(commitment.scope)}   created {created}   version {commitment.version}")
    print("history:")
    for event in history:
        before = event.from_status.value if event.from_status is not None else "-"
        change = f"{event.kind.value:<20} {before} -> {event.to_status.value}"
        line = f"  {_fmt_time(event.at)}  {change}  by {safe(event.actor)}"
        if event.reason:
            line += f"  ({safe(event.reason)})"
        shown = {k: v for k, v in event.details.items() if k != "skipped"}
        if shown:
            line += "  " + safe(json.dumps(shown, ensure_ascii=False, sort_keys=True))
        print(line)
    return 0


def _close_occurrence(waive: bool):
    def run(ledger: Any, args: argparse.Namespace) -> int:
        expected = parse_time(args.occurrence, "--occurrence")
        call = ledger.waive if waive else ledger.satisfy
        result = call(_id(args), expected, actor=args.actor, reason=args.reason)
        verb = "waived" if waive else "satisfied"
        if result.outcome.value == "retry_noop":
            print(f"occurrence {_fmt_time(expected)} was already closed; nothing changed")
        else:
            count = f"{result.skipped_count:,}" if result.skipped_count_exact else f"at least {result.skipped_count:,}"
            note = f"; skipped {count} missed occurrence(s)" if result.skipped_count else ""
            print(f"{verb} occurrence {_fmt_time(expected)}{note}")
        print(_describe(result.commitment))
        return 0

    return run


def _simple(method: str):
    def run(ledger: Any, args: argparse.Namespace) -> int:
        commitment = getattr(ledger, method)(_id(args), actor=args.actor, reason=args.reason)
        print(_describe(commitment))
        return 0

    return run


def _close(ledger: Any, args: argparse.Namespace) -> int:
    commitment = ledger.close_commitment(_id(args), args.outcome, actor=args.actor, reason=args.reason)
    print(_describe(commitment))
    return 0


def _schedule(ledger: Any, args: argparse.Namespace) -> int:
    commitment = ledger.schedule(_id(args), parse_time(args.due, "--due"), actor=args.actor, reason=args.reason)
    print(_describe(commitment))
    return 0


def _delegate(ledger: Any, args: argparse.Namespace) -> int:
    commitment = ledger.name_delegate(_id(args), args.delegate, actor=args.actor, reason=args.reason)
    print(_describe(commitment))
    return 0


def _ledger_help(parser: argparse.ArgumentParser):
    def run(args: argparse.Namespace) -> int:
        parser.print_help()
        return 0

    return run


_INIT_HELP = "initialise an existing SQLite file that is not a ledger yet (adds the ledger's tables to it)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ledger",
        help="keep commitments: add, due list, satisfy/waive occurrences, release, history",
        description="A commitment ledger in one SQLite file. Times are ISO 8601 with a timezone, from "
        "1900-01-01T00:00:00Z to 2999-12-31T23:59:59Z.",
    )
    parser.add_argument("--db", help="SQLite file of the ledger (created if missing or empty)")
    parser.add_argument("--now", help="pretend the current time is this (ISO 8601); default: the system clock")
    parser.add_argument("--init", action="store_true", help=_INIT_HELP)
    parser.set_defaults(func=_ledger_help(parser))

    # Sub-commands accept --db/--now too, without overriding values given before the sub-command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS, help="SQLite file of the ledger")
    common.add_argument("--now", default=argparse.SUPPRESS, help="current time override (ISO 8601)")
    common.add_argument("--init", action="store_true", default=argparse.SUPPRESS, help=_INIT_HELP)
    actor = argparse.ArgumentParser(add_help=False)
    actor.add_argument("--actor", required=True, help="who performs the operation (recorded)")
    actor.add_argument("--reason", default="", help="why (recorded in the audit trail)")
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument("--debtor")
    filters.add_argument("--creditor")
    filters.add_argument("--scope")
    filters.add_argument("--limit", help="at most this many rows")
    filters.add_argument("--json", action="store_true", help="print JSON")

    sub = parser.add_subparsers(dest="ledger_command", metavar="ACTION")

    p = sub.add_parser("add", parents=[common], help="record a commitment")
    p.add_argument("--debtor", required=True, help="who owes the action")
    p.add_argument("--creditor", required=True, help="who it is owed to")
    p.add_argument("--action", required=True, help="what was promised")
    p.add_argument("--due", help="due time of a one-shot commitment")
    p.add_argument("--condition", help="trigger the action waits for")
    p.add_argument("--rrule", help="recurrence rule, e.g. FREQ=WEEKLY;BYDAY=MO;BYHOUR=9")
    p.add_argument("--starts", help="recurrence anchor (default: now)")
    p.add_argument("--tz", default="UTC", help="IANA zone for the recurrence's wall-clock times")
    p.add_argument("--delegate", action="append", help="a party the creditor named (repeatable)")
    p.add_argument("--scope", default="default")
    p.add_argument("--actor", help="who records it (default: the debtor)")
    p.add_argument("--reason", default="")
    p.set_defaults(func=_with_ledger(_add, create=True))

    p = sub.add_parser("list", parents=[common, filters], help="list commitments")
    p.add_argument("--status", action="append", help="filter by status (repeatable)")
    p.set_defaults(func=_with_ledger(_list))

    p = sub.add_parser("due", parents=[common, filters], help="the due list: overdue, due soon, scheduled, unscheduled")
    p.add_argument("--window", default="24h", help="what counts as due soon (e.g. 90m, 24h, 2d); default 24h")
    p.set_defaults(func=_with_ledger(_due))

    p = sub.add_parser("show", parents=[common], help="one commitment and its history")
    p.add_argument("id", help="the commitment id")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_with_ledger(_show))

    for name, waive, text in (
        ("satisfy", False, "close the live occurrence of a recurring duty as done"),
        ("waive", True, "close the live occurrence of a recurring duty as skipped on purpose"),
    ):
        p = sub.add_parser(name, parents=[common, actor], help=text)
        p.add_argument("id", help="the commitment id")
        p.add_argument("--occurrence", required=True, help="the occurrence you are closing (compare-and-set)")
        p.set_defaults(func=_with_ledger(_close_occurrence(waive)))

    p = sub.add_parser("close", parents=[common, actor], help="close a one-shot commitment")
    p.add_argument("id", help="the commitment id")
    p.add_argument("--outcome", required=True, choices=["completed", "failed", "cancelled"])
    p.set_defaults(func=_with_ledger(_close))

    for name, method, text in (
        ("ack", "acknowledge", "acknowledge a pending commitment"),
        ("release", "release", "cancel a one-shot commitment (creditor, named delegate or policy only)"),
        ("retire", "retire", "end a recurring duty for good (creditor, named delegate or policy only)"),
    ):
        p = sub.add_parser(name, parents=[common, actor], help=text)
        p.add_argument("id", help="the commitment id")
        p.set_defaults(func=_with_ledger(_simple(method)))

    p = sub.add_parser("schedule", parents=[common, actor], help="set or move the due time of a one-shot commitment")
    p.add_argument("id", help="the commitment id")
    p.add_argument("--due", required=True)
    p.set_defaults(func=_with_ledger(_schedule))

    p = sub.add_parser("delegate", parents=[common, actor], help="(creditor) name a party who may release for you")
    p.add_argument("id", help="the commitment id")
    p.add_argument("delegate")
    p.set_defaults(func=_with_ledger(_delegate))
