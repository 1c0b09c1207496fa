"""``commitbench report DIR``: metric tables with bootstrap intervals for a standing run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="print metric tables for a run directory")
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    parser.add_argument("--judge", default="rules", help="which labels to use: 'rules' or a stored judge name")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.set_defaults(func=_handle)


def build_report(run_dir: Path, judge: str = "rules", n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    from commitbench.analysis.standing_metrics import compute_metrics, strict_by_cell
    from commitbench.analysis.standing_results import load_rows

    rows = load_rows(run_dir, judge=judge)
    if rows.empty:
        raise UsageError(f"{run_dir} holds no finished runs")
    metrics = compute_metrics(rows, n_boot=n_boot, seed=seed)
    cells = strict_by_cell(rows)
    by_cell = [
        {**dict(zip(cells.index.names, key if isinstance(key, tuple) else (key,), strict=True)),
         "cells": {c: (None if v != v else float(v)) for c, v in row.items()}}
        for key, row in cells.iterrows()
    ]
    return {
        "run_dir": str(run_dir),
        "judge": judge,
        "runs": len(rows),
        "n_boot": n_boot,
        "seed": seed,
        "judge_errors": int(rows["judge_errors"].sum()),
        "tool_errors": int(rows["tool_errors"].sum()),
        "metrics": [m.model_dump() for m in metrics],
        "strict_by_cell": by_cell,
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def render_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    groups: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}
    for m in report["metrics"]:
        key = tuple(m["group"].values())
        groups.setdefault(key, {})[m["metric"]] = m
    if not groups:
        return
    group_cols = list(report["metrics"][0]["group"].keys())
    metric_names = list(next(iter(groups.values())).keys())
    table = Table(title=f"Standing metrics ({report['runs']} runs, judge: {report['judge']}, 95% cluster bootstrap)")
    for col in group_cols:
        table.add_column(col)
    for name in metric_names:
        table.add_column(name.replace("_", " "), justify="right")
    for key, metrics in groups.items():
        cells = []
        for name in metric_names:
            m = metrics[name]
            text = _fmt(m["estimate"])
            if m["estimate"] is not None:
                text += f" [{_fmt(m['low'])}, {_fmt(m['high'])}]"
            if m["excluded"]:
                text += f" ({m['excluded']} excl.)"
            cells.append(text)
        table.add_row(*key, *cells)
    console.print(table)
    if report["strict_by_cell"]:
        cell_names = sorted({c for row in report["strict_by_cell"] for c in row["cells"]}, key=_cell_order)
        table = Table(title="Strict accuracy by cell")
        for col in group_cols:
            table.add_column(col)
        for c in cell_names:
            table.add_column(c, justify="right")
        for row in report["strict_by_cell"]:
            table.add_row(*(str(row[c]) for c in group_cols), *(_fmt(row["cells"].get(c)) for c in cell_names))
        console.print(table)
    console.print(f"judge errors: {report['judge_errors']}   tool errors: {report['tool_errors']}")


_CELL_ORDER = ["BASE", "CRED", "DELEG", "PEER", "MGR", "RELAY", "FACT", "REINSTATE"]


def _cell_order(cell: str) -> tuple[int, str]:
    head = cell.split("-")[0]
    return (_CELL_ORDER.index(head) if head in _CELL_ORDER else 99, cell)


def print_report(run_dir: Path, judge: str = "rules", as_json: bool = False, n_boot: int = 1000, seed: int = 0) -> int:
    from commitbench.analysis.standing_results import write_json

    try:
        report = build_report(Path(run_dir), judge=judge, n_boot=n_boot, seed=seed)
    except (FileNotFoundError, KeyError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    write_json(Path(run_dir) / "results.json", report)
    if as_json:
        json.dump(report, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        render_report(report)
    return 0


def _handle(args: argparse.Namespace) -> int:
    return print_report(args.run_dir, judge=args.judge, as_json=args.json, n_boot=args.n_boot, seed=args.seed)
