"""``commitbench upgrade RUN_DIR``: give a run directory written before cell tables its ``cells.jsonl``.

    commitbench upgrade runs/old      # once, where the players it names can still be imported

A run directory records what each cell is (player, arm, interventions, environment) in ``cells.jsonl``,
so ``report``, ``view``, ``export`` and ``merge`` read it without importing any player's code. A directory
written by an older commitbench has no such table: those commands then expand its recorded config (which
imports its players) and, where that fails, say to run this command. It expands the config once, checks
that the cells it gives are the cells the run holds (their hash is in the manifest), and writes the table;
nothing else in the directory changes. Exit codes: 0 written, 2 nothing written (why is printed).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "upgrade",
        help="write the cell table of a run directory played before cell tables existed",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    parser.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    from commitbench.rundir import RunDirectoryBusyError
    from commitbench.rundir.cells import CELLS_FILE, CellTableError
    from commitbench.rundir.reader import UpgradeError, upgrade_run_dir

    try:
        written = upgrade_run_dir(args.run_dir)
    except (UpgradeError, CellTableError, RunDirectoryBusyError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {args.run_dir / CELLS_FILE}: {exc.strerror or exc}") from None
    print(f"wrote {args.run_dir / CELLS_FILE}: {written} cells")
    return 0
