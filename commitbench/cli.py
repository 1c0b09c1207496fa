"""The ``commitbench`` command line.

Each command group lives in its own module under ``commitbench.commands`` and exposes
``register(subparsers)``; handlers return an exit code. Heavy imports happen inside the
handlers so that ``commitbench --help`` stays fast, and a command imports only the module that adds it
(:data:`COMMAND_MODULES` names the commands of each), so one command's start never pays for another's.
A command whose flags come from plug-ins (``run`` takes each registered suite's episode filter as flags)
sets the default ``late_flags``, a function that adds them to its parser; it is called only when that
command is the one given.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from commitbench import __version__

# Modules that add sub-commands, with the commands each adds. Order is the order shown in --help.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "commitbench.commands.episodes_cmd": ("episodes",),
    "commitbench.commands.run_cmd": ("run",),
    "commitbench.commands.merge_cmd": ("merge",),
    "commitbench.commands.upgrade_cmd": ("upgrade",),
    "commitbench.commands.label_cmd": ("label",),
    "commitbench.commands.report_cmd": ("report",),
    "commitbench.commands.view_cmd": ("view",),
    "commitbench.commands.export_cmd": ("export",),
    "commitbench.commands.annotate_cmd": ("annotate", "validate", "agreement"),
    "commitbench.commands.cache_cmd": ("cache",),
    "commitbench.commands.serve_cmd": ("serve-local", "serve-mock"),
    "commitbench.commands.ledger_cmd": ("ledger",),
    "commitbench.commands.guard_cmd": ("guard",),
    "commitbench.commands.prevalence_cmd": ("prevalence",),
    "commitbench.commands.gateway_cmd": ("gateway",),
    "commitbench.commands.plugins_cmd": ("plugins",),
}


def modules_for(command: str | None) -> list[str]:
    """The command modules to import for ``command``: only the one that adds it, or every module (the full
    list of commands, for ``--help`` and for a name no module adds, which argparse then refuses)."""
    owners = [module for module, names in COMMAND_MODULES.items() if command in names]
    return owners or list(COMMAND_MODULES)


class UsageError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The command line's parser; the late flags of the command named in ``argv`` (if any) are added."""
    parser = argparse.ArgumentParser(
        prog="commitbench",
        description="Measure whether LLM agents keep, drop, or fake their promises.",
    )
    parser.add_argument("--version", action="version", version=f"commitbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    for module_name in modules_for(command):
        importlib.import_module(module_name).register(subparsers)
    chosen = subparsers.choices.get(command) if command else None
    late_flags = chosen.get_default("late_flags") if chosen is not None else None
    if late_flags is not None:
        late_flags(chosen)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    args = parser.parse_args(arguments)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from commitbench.memory import freeze_startup_objects

    freeze_startup_objects()  # the command's modules are imported: the collector need not walk them again
    from commitbench.stopping import TERMINATED_EXIT, Terminated, sigterm_unwinds

    try:
        with sigterm_unwinds():  # SIGTERM stops the command as Ctrl-C does: what it holds is cleaned up
            return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"commitbench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (for example `| head`); that is not an error of ours.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Terminated:
        print("commitbench: terminated", file=sys.stderr)
        return TERMINATED_EXIT
    except KeyboardInterrupt:
        print("commitbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run through the imported module, not this __main__ copy: the commands raise the UsageError of
    # ``commitbench.cli``, which must be the class main() catches.
    from commitbench.cli import main as cli_main

    raise SystemExit(cli_main())
