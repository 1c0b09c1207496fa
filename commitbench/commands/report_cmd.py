"""``commitbench report RUN_DIR``: every table of a run of either suite (the suite comes from its manifest).

    commitbench report runs/x                         # the labels of the run's configured judge
    commitbench report runs/x --judge llm:MODEL       # labels stored by 'commitbench label'
    commitbench report runs/x --judge rules           # the offline labeller's, computed on the fly
    commitbench report runs/x --baseline none --json

Without --judge the report reads the labels of the judge the run's config names (the offline labeller
when it names none), so a run configured with an LLM judge is never reported, silently, from the
offline labels. A follow-up report from the offline checker says "offline baseline checker" in every
title, table file and the figure.

Standing: metrics per model x intervention x policy (95% intervals clustered by commitment type),
per gap and per cell, each intervention minus the baseline on the same episodes, and the policy
effect; CSV, Markdown and a heatmap under ``RUN_DIR/report/``. Follow-up: outcome shares, headline
rates (intervals clustered by request), each intervention minus the plain arm on the same requests,
and the stacked-outcome figure. ``--json`` prints one document (also saved as ``RUN_DIR/results.json``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from commitbench.cli import UsageError
from commitbench.commands.common import print_json, render


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="metric tables and figures of a run (either suite)",
                                   description=__doc__.split("\n\n", 1)[0], epilog=__doc__.split("\n\n", 1)[1],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    parser.add_argument("--judge", default=None,
                        help="whose labels: 'rules' or a stored labeller such as llm:MODEL "
                        "(default: the judge the run's config names)")
    parser.add_argument("--baseline", default=None,
                        help="standing: the arm the others are compared with (default: 'none' when present)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--no-figure", action="store_true", help="skip the figure")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.set_defaults(func=_handle)


def print_report(
    run_dir: Path, judge: str | None = None, as_json: bool = False, n_boot: int = 1000, seed: int = 0,
    baseline: str | None = None, figure: bool = True,
) -> int:
    from commitbench.jsonl import write_atomic
    from commitbench.runner import run_suite
    from commitbench.suites import ReportOptions

    if n_boot < 1:
        raise UsageError("--n-boot must be at least 1")
    try:
        suite = run_suite(run_dir)
        if judge is None:
            from commitbench.labeljob import configured_judge, stored_name

            configured = configured_judge(run_dir)
            judge = stored_name(suite, configured) if configured is not None else None
        report = suite.report(
            Path(run_dir), ReportOptions(judge=judge, n_boot=n_boot, seed=seed, baseline=baseline, figure=figure)
        )
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    document = report.model_dump(mode="json")
    write_atomic(Path(run_dir) / "results.json", _dumps(document))
    if as_json:
        print_json(document)
    else:
        render(report)
    return 0


def _dumps(document: object) -> str:
    import json

    return json.dumps(document, indent=2, sort_keys=True)


def _handle(args: argparse.Namespace) -> int:
    return print_report(
        args.run_dir, judge=args.judge, as_json=args.json, n_boot=args.n_boot, seed=args.seed,
        baseline=args.baseline, figure=not args.no_figure,
    )
