"""``commitbench export RUN_DIR --out DIR``: a finished run of either suite as a dataset (Parquet and a card).

    commitbench export runs/x --out datasets/x           # DIR must be new or empty
    commitbench export runs/x --out datasets/x --force   # replace a previous export
    python -c 'import datasets; print(datasets.load_dataset("datasets/x", split="train"))'

One row per trace (failed ones included, marked by infra_error): its identity, design factors, agent,
arm, events, turns, tool calls with their results, model calls and their usage, the suite's signals and
the labels of every judge stored in the directory, with the offline labeller's computed on the fly, as
the report computes them. DIR/README.md is the dataset card: the front matter the Hugging Face
``datasets`` library reads (configs, features, licence), the suite, the config hash, the episode-set
version, the judges and their labeller versions, and the licence of each data source the episodes draw
on. Every string goes through the secret scrubbing of every other output. Needs the ``[export]`` extra
(pyarrow). Stale labels of an LLM judge are refused, as by ``report``. Columns and card: docs/export.md.
Given an inspect log directory (or one log file) of the tasks commitbench/standing or commitbench/followup,
the export reads the run directory made of it, as ``report`` and ``view`` do (docs/inspect.md): the sibling
LOG_DIR-commitbench, said on stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a finished run as a dataset: Parquet rows and a dataset card (either suite)",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run', or an inspect log "
                        "directory (or log file) of commitbench/standing or commitbench/followup")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="the dataset directory (new or empty)")
    parser.add_argument("--force", action="store_true", help="replace a previous export in DIR")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    try:
        from commitbench.suites.export import export_run
    except ImportError as exc:  # pyarrow is an extra
        raise UsageError(f"export needs the [export] extra ({exc.name or exc} is missing): "
                         "pip install 'commitbench[export]'") from None
    from commitbench.commands.common import readable_run_dir
    from commitbench.rundir.reader import run_suite

    run_dir = readable_run_dir(args.run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a directory (a run directory written by 'commitbench run')")
    try:
        summary = export_run(run_dir, args.out, run_suite(run_dir), force=args.force)
    except (FileNotFoundError, ValueError) as exc:  # a missing or foreign directory, stale labels, a bad --out
        raise UsageError(str(exc).strip("'\"")) from None
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    if args.json:
        print(summary.model_dump_json(indent=2))
        return 0
    card = summary.card
    size = ", ".join(f"{name} {n:,} bytes" for name, n in summary.files.items())
    judges = ", ".join(f"{j.name} ({'stored' if j.stored else 'computed'}, {j.rows} rows)" for j in card.judges)
    print(f"{summary.rows} rows of the {card.suite} run {card.run_name} -> {summary.out_dir} ({size}; "
          f"{summary.seconds:.1f} s)")
    print(f"judges: {judges}; sources: {', '.join(f'{s.name} ({s.licence})' for s in card.sources)}")
    return 0
