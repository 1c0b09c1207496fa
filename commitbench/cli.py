"""The ``commitbench`` command line.

Each command group lives in its own module under ``commitbench.commands`` and exposes
``register(subparsers)``; handlers return an exit code. Heavy imports happen inside the
handlers so that ``commitbench --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that add sub-commands. Order is the order shown in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "commitbench.commands.episodes_cmd",
    "commitbench.commands.run_cmd",
    "commitbench.commands.report_cmd",
    "commitbench.commands.cache_cmd",
    "commitbench.commands.serve_cmd",
    "commitbench.commands.judge_cmd",
    "commitbench.commands.annotate_cmd",
    "commitbench.commands.ledger_cmd",
    "commitbench.commands.guard_cmd",
    "commitbench.commands.prevalence_cmd",
    "commitbench.commands.followup_cmd",
)


class UsageError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="commitbench",
        description="Measure whether LLM agents keep, drop, or fake their promises.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # command group not present in this build
            raise
        module.register(subparsers)
    return parser


# Spellings that stand for another command: ``run followup ...`` is ``followup run ...``.
ALIASES: dict[tuple[str, str], tuple[str, str]] = {("run", "followup"): ("followup", "run")}


def _expand_aliases(argv: list[str]) -> list[str]:
    head = tuple(argv[:2])
    if len(head) == 2 and head in ALIASES:
        return [*ALIASES[head], *argv[2:]]  # type: ignore[index]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_expand_aliases(list(sys.argv[1:] if argv is None else argv)))
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"commitbench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (for example `| head`); that is not an error of ours.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("commitbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
