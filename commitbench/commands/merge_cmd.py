"""``commitbench merge``: join run directories of one experiment played on machines without a shared disk.

    commitbench run CONFIG --shard 0/2 --out runs/a      # on one machine
    commitbench run CONFIG --shard 1/2 --out runs/b      # on another
    commitbench merge runs/all runs/a runs/b             # after copying both directories here
    commitbench run CONFIG --out runs/all                # plays whatever cell is still missing

Each cell keeps one good trace (the first source named wins), the caches are joined, and a trace
played with an answer that another cache contradicts is left out to be played again. Exit codes: 0
every cell has a good trace, 1 some cells still need a run, 2 the directories cannot be merged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "merge",
        help="join run directories of one experiment (shards played on several machines) into a new one",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out", type=Path, metavar="OUT", help="the new, merged run directory")
    parser.add_argument("sources", type=Path, nargs="+", metavar="RUN_DIR", help="run directories, earlier ones win")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    from commitbench.merge import MergeError, merge_runs
    from commitbench.rundir import RunDirectoryBusyError, RunStatus
    from commitbench.suites import EpisodeSetMismatchError
    from commitbench.traces import TraceFileError

    try:
        summary = merge_runs(args.out, args.sources)
    except (MergeError, EpisodeSetMismatchError, RunDirectoryBusyError, TraceFileError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # a manifest or config that does not validate
        raise UsageError(str(exc)) from None
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        taken = ", ".join(f"{n} from {source}" for source, n in summary.traces_by_source.items())
        print(f"{summary.status.value}: {summary.cells_done} of {summary.cells_total} cells -> {summary.out_dir} "
              f"({taken})")
        print(f"dropped: {summary.duplicates_dropped} duplicate, {summary.failed_dropped} failed, "
              f"{summary.conflicted_dropped} played with an answer another cache contradicts; cache: "
              f"{summary.cache_entries} entries from {len(summary.caches)} files, {summary.cache_conflicts} conflicts")
    if summary.status is not RunStatus.COMPLETE:
        print(f"{summary.cells_total - summary.cells_done} cells have no good trace; "
              f"'commitbench run CONFIG --out {summary.out_dir}' plays them", file=sys.stderr)
        return 1
    return 0
