"""``commitbench report RUN_DIR``: every table of a run of either suite (the suite comes from its manifest).

    commitbench report runs/x                         # the labels of the run's configured judge
    commitbench report runs/x --judge llm:MODEL       # labels stored by 'commitbench label'
    commitbench report runs/x --judge rules           # the offline labeller's, computed on the fly
    commitbench report runs/x --baseline none --json
    commitbench report runs/x --compare qwen3-8b-on qwen3-8b-off   # a minus b, paired, with cost ratios

Without --judge the report reads the labels of the judge the run's config names (the offline labeller
when it names none), so a run configured with an LLM judge is never reported, silently, from the
offline labels. A follow-up report from the offline checker says "offline baseline checker" in every
title, table file and the figure.

Standing: metrics per model x intervention x policy (95% intervals clustered by commitment type),
per gap and per cell, each intervention minus the baseline on the same episodes, and the policy
effect; CSV, Markdown and a heatmap under ``RUN_DIR/report/``. Follow-up: outcome shares, headline
rates (intervals clustered by request), each intervention minus the plain arm on the same requests,
and the stacked-outcome figure. Both suites: model comparisons (``--compare``, and thinking on/off pairs
found in the config without being asked) with a forest plot, and the cost of each model and arm (calls,
tokens, model time). ``--json`` prints one document (also saved as ``RUN_DIR/results.json``).
Given an inspect log directory (or one log file) of the tasks commitbench/standing or commitbench/followup
(docs/inspect.md), the report reads the run directory made of it: the sibling LOG_DIR-commitbench, written
from the samples' traces and the tasks' config (rewritten when the logs change), and said on stderr.
On a directory that cannot be written (read-only, a full disk) the tables are printed all the same and
a notice says that the files were not saved.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError
from commitbench.commands.common import (
    add_labels_flag,
    check_n_boot,
    labels_dir_arg,
    print_json,
    readable_run_dir,
    render,
    unwritable_reason,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="metric tables and figures of a run (either suite)",
                                   description=__doc__.split("\n\n", 1)[0], epilog=__doc__.split("\n\n", 1)[1],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run', or an inspect log "
                        "directory (or log file) of commitbench/standing or commitbench/followup")
    parser.add_argument("--judge", default=None,
                        help="whose labels: 'rules' or a stored labeller such as llm:MODEL "
                        "(default: the judge the run's config names)")
    parser.add_argument("--baseline", default=None,
                        help="standing: the arm the others are compared with (default: 'none' when present)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--compare", nargs=2, action="append", default=None, metavar=("A", "B"),
                        help="compare two models, A minus B on the same episodes (labels like qwen3-8b, or "
                        "label@arm); repeatable. Thinking on/off pairs of the config are compared unasked")
    add_labels_flag(parser)
    parser.add_argument("--paper-tables", nargs="?", const="", default=None, metavar="DIR",
                        help="also write every table and figure of the suite's paper, named after it "
                        "(standing-table8.csv, followup-figure8.png, ...), with an index saying which are written, "
                        "partly written or not reproducible and why (default DIR: RUN_DIR/report/paper)")
    parser.add_argument("--no-figure", action="store_true", help="skip the figure")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress of reading a large run: a bar on a terminal, a line every 20 s otherwise "
                        "(shown from 2,000 traces on)")
    parser.set_defaults(func=_handle, late_flags=add_report_options)


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """Each registered suite's own report options as flags (``Suite.report_options``; ``--help`` lists them by
    suite), such as the standing suite's ``--leave-out-types``."""
    from commitbench.commands.filters import add_filter_flags, filter_flags
    from commitbench.suites import suites

    flags = filter_flags([(suite.name, suite.report_options) for suite in suites()])
    add_filter_flags(parser, flags, what="report options")
    parser.set_defaults(report_flags=flags)


def print_report(
    run_dir: Path, judge: str | None = None, as_json: bool = False, n_boot: int = 1000, seed: int = 0,
    baseline: str | None = None, figure: bool = True, compare: list[tuple[str, str]] | None = None,
    suite_options: dict[str, Any] | None = None, labels_dir: Path | None = None, paper_tables: str | None = None,
    progress: bool | str = False, progress_interval_s: float | None = None,
) -> int:
    """Print the tables of a run and save them; a directory that cannot be written still gets its tables.

    ``progress``: how a long read of the traces shows its progress on stderr (True: a bar; ``"lines"``: a line
    every ``progress_interval_s`` seconds, 20 by default; False: not at all)."""
    from commitbench.progress import PROGRESS_INTERVAL_S, reading_progress

    interval = PROGRESS_INTERVAL_S if progress_interval_s is None else progress_interval_s
    with reading_progress(progress, interval):
        return _print_report(run_dir, judge, as_json, n_boot, seed, baseline, figure, compare, suite_options,
                             labels_dir, paper_tables)


def _print_report(
    run_dir: Path, judge: str | None, as_json: bool, n_boot: int, seed: int, baseline: str | None, figure: bool,
    compare: list[tuple[str, str]] | None, suite_options: dict[str, Any] | None, labels_dir: Path | None,
    paper_tables: str | None,
) -> int:
    from commitbench.jsonl import write_atomic
    from commitbench.rundir.reader import run_suite
    from commitbench.suites import ReportOptions

    check_n_boot(n_boot)
    run_dir = readable_run_dir(Path(run_dir))
    try:
        suite = run_suite(run_dir)
        if judge is None:
            from commitbench.labeljob import configured_judge
            from commitbench.planning import stored_judge

            configured = configured_judge(run_dir)
            judge = stored_judge(suite, configured) if configured is not None else None
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    unwritable = unwritable_reason(run_dir)
    paper_dir = _paper_dir(run_dir, paper_tables, unwritable)

    def build(write_files: bool) -> Any:
        options = ReportOptions(judge=judge, n_boot=n_boot, seed=seed, baseline=baseline, figure=figure,
                                write_files=write_files, compare=list(compare or []),
                                suite_options=dict(suite_options or {}), labels_dir=labels_dir_arg(labels_dir),
                                paper_tables=paper_dir)
        try:
            return suite.report(run_dir, options)
        except (FileNotFoundError, KeyError, ValueError) as exc:
            raise UsageError(str(exc).strip("'\"")) from None

    try:
        report = build(write_files=unwritable is None)
    except OSError as exc:  # the report files could not be written (a full disk): the tables still can be shown
        unwritable = f"{type(exc).__name__}: {exc}"
        try:
            report = build(write_files=False)
        except OSError as again:
            raise UsageError(f"cannot read {run_dir}: {again}") from None
    document = report.model_dump(mode="json")
    if unwritable is None:
        try:
            write_atomic(run_dir / "results.json", _dumps(document))
        except OSError as exc:
            unwritable = f"{type(exc).__name__}: {exc}"
    if unwritable is not None:
        print(f"commitbench: {run_dir} is not writable ({unwritable}); results.json and the report files "
              "were not written", file=sys.stderr)
    index = getattr(report, "paper_tables", None)
    if index is not None:
        counts = ", ".join(f"{n} {status}" for status, n in index.counts().items())
        print(f"paper tables of {index.paper}: {counts} -> {Path(index.out_dir) / 'index.md'}", file=sys.stderr)
    if as_json:
        print_json(document)
    else:
        render(report)
    return 0


def _paper_dir(run_dir: Path, given: str | None, unwritable: str | None) -> Path | None:
    """Where --paper-tables writes: DIR, or RUN_DIR/report/paper (which must then be writable)."""
    if given is None:
        return None
    if given:
        return Path(given)
    if unwritable is not None:
        raise UsageError(f"--paper-tables cannot write into {run_dir} ({unwritable}); give it a directory: "
                         "--paper-tables DIR")
    return run_dir / "report" / "paper"


def _dumps(document: object) -> str:
    import json

    return json.dumps(document, indent=2, sort_keys=True)


def _suite_options(args: argparse.Namespace) -> dict[str, Any]:
    """The report options given on the command line, checked against the run's suite (a flag of another
    suite's report is a usage error naming it)."""
    from commitbench.commands.filters import given_filters
    from commitbench.rundir.reader import run_suite

    flags = getattr(args, "report_flags", [])
    if not any(getattr(args, flag.field, None) is not None for flag in flags):
        return {}
    try:
        suite = run_suite(readable_run_dir(Path(args.run_dir)))
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    given, foreign = given_filters(args, flags, suite.name)
    if foreign:
        raise UsageError(f"{', '.join(foreign)}: a report option of another suite, not of this {suite.name} run")
    return given


def _handle(args: argparse.Namespace) -> int:
    from commitbench.progress import PROGRESS_LINES

    progress: bool | str = False if args.no_progress else (True if sys.stderr.isatty() else PROGRESS_LINES)
    return print_report(
        args.run_dir, judge=args.judge, as_json=args.json, n_boot=args.n_boot, seed=args.seed,
        baseline=args.baseline, figure=not args.no_figure,
        compare=[(a, b) for a, b in args.compare or []], suite_options=_suite_options(args), labels_dir=args.labels,
        paper_tables=args.paper_tables, progress=progress,
    )
