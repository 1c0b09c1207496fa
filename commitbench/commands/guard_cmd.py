"""``commitbench guard``: run the write-claim guard on a reply (or on stdin, one sentence per line)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from commitbench.cli import UsageError
from commitbench.commands.common import print_safe_json, safe


def _record(text: str, decision: Any) -> dict[str, Any]:
    claim = decision.claim
    return {
        "text": text,
        "claim": claim is not None,
        "guard": decision.guard,
        "reason": decision.reason.value,
        "span": [claim.start, claim.end] if claim is not None else None,
        "matched": claim.text if claim is not None else None,
        "language": claim.language.value if claim is not None else None,
        "rule": claim.rule if claim is not None else None,
        "replacement": decision.replacement,
    }


def _line(record: dict[str, Any]) -> str:
    verdict = "GUARD" if record["guard"] else ("claim" if record["claim"] else "ok")
    span = f"[{record['span'][0]}:{record['span'][1]}]" if record["span"] else "-"
    return f"{verdict:<5} {span:<9} {safe(record['text'])}"


def _report(record: dict[str, Any], explanation: str) -> str:
    lines = []
    if record["claim"]:
        start, end = record["span"]
        lines.append(f"claim: yes ({record['language']}, {record['rule']}) at {start}:{end}: {record['matched']!r}")
    else:
        lines.append("claim: no")
    lines.append(f"guard: {'FIRES' if record['guard'] else 'quiet'} ({record['reason']}: {safe(explanation)})")
    if record["replacement"]:
        lines.append(f"replacement: {record['replacement']}")
    return "\n".join(lines)


def _handler(args: argparse.Namespace) -> int:
    from commitbench.claimguard.guard import MAX_TEXT_CHARS, should_guard

    if args.tools_executed < 0:
        raise UsageError(f"--tools-executed must be 0 or more, got {args.tools_executed}")
    if args.text != "-" and len(args.text) > MAX_TEXT_CHARS:
        raise UsageError(f"TEXT is {len(args.text):,} characters long; the guard reads at most {MAX_TEXT_CHARS:,}")

    def decide(text: str):
        return should_guard(
            text,
            executed_tool_calls=args.tools_executed,
            approval_pending=args.approval_pending,
            write_context=not args.read_only,
        )

    if args.text == "-":
        number = 0
        # A line is read up to the bound and no further: a longer one stops the command, naming it.
        while raw := sys.stdin.readline(MAX_TEXT_CHARS + 2):
            number += 1
            sentence = raw.rstrip("\r\n")  # every input line gets exactly one answer line, blank ones too
            if len(sentence) > MAX_TEXT_CHARS:
                raise UsageError(f"stdin line {number} is longer than the {MAX_TEXT_CHARS:,} characters the guard "
                                 "reads")
            record = _record(sentence, decide(sentence))
            if args.json:
                print_safe_json(record, indent=None)
            else:
                print(_line(record))
        return 0
    decision = decide(args.text)
    record = _record(args.text, decision)
    if args.json:
        print_safe_json({**record, "explanation": decision.explanation, "nudge": decision.nudge}, indent=None)
    else:
        print(_report(record, decision.explanation))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "guard",
        help="check a reply for a completed-write claim that no tool backs",
        description=(
            "Run the write-claim guard on TEXT as the final reply of a write turn. "
            "With TEXT '-', read one sentence per line from stdin and answer one line per sentence."
        ),
    )
    parser.add_argument("text", metavar="TEXT", help="the reply to check, or '-' for stdin")
    parser.add_argument("--tools-executed", type=int, default=0, metavar="N", help="tool calls executed this turn")
    parser.add_argument("--approval-pending", action="store_true", help="an approval card is waiting")
    parser.add_argument("--read-only", action="store_true", help="the turn is not a write turn (never guarded)")
    parser.add_argument("--json", action="store_true", help="print JSON (one object per sentence with '-')")
    parser.set_defaults(func=_handler)
