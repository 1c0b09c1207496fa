"""``commitbench report RUN_DIR``: the standing tables and figure of a run.

    commitbench report runs/x                         # rule-judge labels, computed on the fly
    commitbench report runs/x --judge llm:MODEL       # labels stored by 'commitbench judge'
    commitbench report runs/x --baseline none --json

Prints and writes (into ``RUN_DIR/report/``, CSV and Markdown each):

* ``metrics``: every metric per model x intervention x policy, 95% intervals clustered by
  commitment type, with n and the runs excluded for a missing judge label;
* ``gap``: the same per gap;
* ``cells``: strict accuracy per cell;
* ``paired``: each intervention minus the baseline (``--baseline``, default ``none`` when that
  arm is present) on the same episodes, per model and policy (paired bootstrap);
* ``policy``: the policy's effect, explicit minus silent, per model and intervention;
* ``strict_by_cell.png``: a heatmap of strict accuracy per cell and intervention.

``--json`` prints one machine-readable document instead of tables (also saved as
``RUN_DIR/results.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError

REPORT_DIR = "report"
FIGURE_FILE = "strict_by_cell.png"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="metric tables and the per-cell figure of a standing run")
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    parser.add_argument("--judge", default="rules", help="which labels to use: 'rules' or a stored judge name")
    parser.add_argument("--baseline", default=None,
                        help="intervention arm the others are compared with (default: 'none' when present)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--no-figure", action="store_true", help="skip the heatmap")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.set_defaults(func=_handle)


def build_report(
    run_dir: Path,
    judge: str = "rules",
    n_boot: int = 1000,
    seed: int = 0,
    baseline: str | None = None,
    write: bool = True,
    figure: bool = True,
) -> dict[str, Any]:
    """Compute every table; with ``write`` also save CSV, Markdown and the figure under RUN_DIR/report."""
    from commitbench.analysis.standing import tables as sr
    from commitbench.analysis.standing.results import load_rows

    if n_boot < 1:
        raise UsageError("--n-boot must be at least 1")
    rows = load_rows(run_dir, judge=judge)
    if rows.empty:
        raise UsageError(f"{run_dir} holds no finished runs")
    arms = sorted(set(rows["interventions"]))
    if baseline is None:
        baseline = "none" if "none" in arms and len(arms) > 1 else None
    elif baseline not in arms:
        raise UsageError(f"--baseline {baseline!r} is not an intervention arm of this run; arms: {', '.join(arms)}")
    main = sr.main_table(rows, n_boot=n_boot, seed=seed)
    gap = sr.gap_table(rows, n_boot=n_boot, seed=seed)
    cells = sr.cell_table(rows, n_boot=n_boot, seed=seed)
    paired = sr.paired_table(rows, baseline, n_boot=n_boot, seed=seed) if baseline else []
    policy = sr.policy_table(rows, n_boot=n_boot, seed=seed)
    report: dict[str, Any] = {
        "run_dir": str(run_dir),
        "judge": judge,
        "runs": len(rows),
        "n_boot": n_boot,
        "seed": seed,
        "arms": arms,
        "agents": sorted(set(rows["agent"])),
        "baseline": baseline,
        "judge_errors": int(rows["judge_errors"].sum()),
        "runs_with_judge_errors": int((rows["judge_errors"] > 0).sum()),
        "tool_errors": int(rows["tool_errors"].sum()),
        "metric_names": list(sr.metrics_for(rows)),
        "metrics": [m.model_dump() for m in main],
        "by_gap": [m.model_dump() for m in gap],
        "by_cell": [m.model_dump() for m in cells],
        "strict_by_cell": _strict_by_cell(rows),
        "paired": [p.model_dump() for p in paired],
        "policy_effect": [p.model_dump() for p in policy],
        "files": {},
    }
    if write:
        out = Path(run_dir) / REPORT_DIR
        out.mkdir(parents=True, exist_ok=True)
        tables = {
            "metrics": (sr.long_frame(main), sr.wide_frame(main, sr.GROUP)),
            "gap": (sr.long_frame(gap), sr.wide_frame(gap, (*sr.GROUP, "gap"))),
            "cells": (sr.long_frame(cells), sr.wide_frame(cells, sr.GROUP, column="cell")),
        }
        if paired:
            frame = sr.paired_frame(paired)
            text = frame.assign(
                difference=[sr.interval_text(p.estimate, p.low, p.high, signed=True) for p in paired]
            ).drop(columns=["low", "high"])
            tables["paired"] = (frame, text)
        if policy:
            frame = sr.paired_frame(policy)
            text = frame.assign(
                difference=[sr.interval_text(p.estimate, p.low, p.high, signed=True) for p in policy]
            ).drop(columns=["low", "high", "arm", "baseline"])
            tables["policy"] = (frame, text)
        for name, (long, wide) in tables.items():
            long.to_csv(out / f"{name}.csv", index=False)
            (out / f"{name}.md").write_text(_markdown_doc(name, report, wide), encoding="utf-8")
            report["files"][name] = [str(out / f"{name}.csv"), str(out / f"{name}.md")]
        if figure and any(v.n for v in cells):
            from commitbench.analysis.standing.figures import strict_heatmap

            path = strict_heatmap(cells, out / FIGURE_FILE, title=f"Strict accuracy by cell (judge: {judge})")
            report["files"]["figure"] = [str(path)]
    return report


def _strict_by_cell(rows: Any) -> list[dict[str, Any]]:
    """Point estimates per cell in the compact form documented in the README."""
    from commitbench.analysis.standing.metrics import strict_by_cell

    table = strict_by_cell(rows)
    out = []
    for key, row in table.iterrows():
        keys = key if isinstance(key, tuple) else (key,)
        out.append({
            **dict(zip(table.index.names, keys, strict=True)),
            "cells": {c: (None if v != v else float(v)) for c, v in row.items()},
        })
    return out


_TITLES = {
    "metrics": "Standing metrics per model, intervention and policy",
    "gap": "Standing metrics per gap",
    "cells": "Strict accuracy per cell",
    "paired": "Differences from the baseline intervention on the same episodes (percentage points)",
    "policy": "Effect of the explicit release policy: explicit minus silent, same chats (percentage points)",
}


def _markdown_doc(name: str, report: dict[str, Any], frame: Any) -> str:
    from commitbench.analysis.standing.tables import markdown

    note = (
        f"{report['runs']} runs; judge: {report['judge']}; 95% bootstrap intervals clustered by commitment type "
        f"({report['n_boot']} replicates, seed {report['seed']}); judge errors: {report['judge_errors']} messages "
        f"in {report['runs_with_judge_errors']} runs (runs whose grade needs a missing label are excluded and "
        "counted as 'excl.')."
    )
    return f"# {_TITLES[name]}\n\n{note}\n\n{markdown(frame)}"


# ------------------------------------------------------------------------------- console
SHORT = {
    "override": "O",
    "net_unauthorized_release": "U",
    "strict_accuracy": "strict",
    "reinstatement_obedience": "reinst",
    "reinstatement_before_trigger": "early",
    "consultation_after_relays": "consult",
    "verification_after_claims": "verify",
    "ledger_recorded_unauthorized_release": "ledger rel",
}
LEGEND = (
    "O override (CRED/DELEG runs that executed); U net unauthorized release (PEER/MGR drops without consulting "
    "minus BASE drops); strict strict accuracy; reinst REINSTATE-BYSTANDER runs that executed; early ... before "
    "the trigger; consult consultation after relays; verify verification after claims. Percent, 95% interval "
    "clustered by commitment type; '+k' = runs excluded for a missing judge label. ledger rel (ledger arms): "
    "PEER/MGR runs whose own ledger recorded the promise as released."
)


def _compact(estimate: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    if estimate is None:
        return "-"
    fmt = "{:+.0f}" if signed else "{:.0f}"
    text = fmt.format(100 * estimate)
    if low is not None and high is not None:
        text += f" [{fmt.format(100 * low)},{fmt.format(100 * high)}]"
    return text


def render_report(report: dict[str, Any]) -> None:
    """Print the tables: per model, rows are intervention x policy (the files hold the long forms)."""
    from rich.console import Console
    from rich.table import Table

    from commitbench.analysis.standing.metrics import MetricValue
    from commitbench.analysis.standing.tables import MAIN_METRICS, cell_sort_key, percent

    console = Console()
    if not console.is_terminal:  # a file or a pipe: room for the intervals on one line
        console = Console(width=max(console.width, 150))
    console.print(
        f"[bold]Standing report[/bold]: {report['runs']} runs, judge {report['judge']}, "
        f"{report['n_boot']} bootstrap replicates (seed {report['seed']})"
    )
    main = [MetricValue.model_validate(m) for m in report["metrics"]]
    names = report.get("metric_names") or list(MAIN_METRICS)
    for agent in report["agents"]:
        table = Table(title=f"{agent}: metrics (%)", title_justify="left")
        table.add_column("intervention", overflow="fold")
        table.add_column("policy")
        for name in names:
            table.add_column(SHORT[name], justify="right")
        rows: dict[tuple[str, str], dict[str, MetricValue]] = {}
        for v in main:
            if v.group["agent"] == agent:
                rows.setdefault((v.group["interventions"], v.group["policy"]), {})[v.metric] = v
        for (arm, policy), metrics in sorted(rows.items(), key=lambda kv: (kv[0][0] != "none", kv[0])):
            texts = []
            for name in names:
                m = metrics.get(name)
                if m is None:
                    texts.append("-")
                else:
                    texts.append(_compact(m.estimate, m.low, m.high) + (f" +{m.excluded}" if m.excluded else ""))
            table.add_row(arm, policy, *texts)
        console.print(table)
    console.print(LEGEND, style="dim")

    cells = [MetricValue.model_validate(m) for m in report["by_cell"]]
    if cells:
        names = sorted({v.group["cell"] for v in cells}, key=cell_sort_key)
        for agent in report["agents"]:
            mine = [v for v in cells if v.group["agent"] == agent]
            columns = sorted({(v.group["interventions"], v.group["policy"]) for v in mine},
                             key=lambda k: (k[0] != "none", k))
            if not columns:
                continue
            table = Table(title=f"{agent}: strict accuracy by cell (%)", title_justify="left")
            table.add_column("cell")
            for arm, policy in columns:
                table.add_column(f"{arm} ({policy[:4]})", justify="right", overflow="fold")
            lookup = {(v.group["interventions"], v.group["policy"], v.group["cell"]): v for v in mine}
            for cell in names:
                values = [lookup.get((arm, policy, cell)) for arm, policy in columns]
                table.add_row(cell, *(percent(v.estimate).rstrip("%") if v else "" for v in values))
            console.print(table)

    if report["paired"]:
        for agent in report["agents"]:
            mine = [p for p in report["paired"] if p["group"]["agent"] == agent]
            if not mine:
                continue
            table = Table(
                title=f"{agent}: difference from '{report['baseline']}' on the same episodes (pp)",
                title_justify="left",
            )
            table.add_column("intervention", overflow="fold")
            table.add_column("policy")
            for name in MAIN_METRICS:
                table.add_column(SHORT[name], justify="right")
            grouped: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
            for p in mine:
                grouped.setdefault((p["arm"], p["group"]["policy"]), {})[p["metric"]] = p
            for (arm, policy), metrics in grouped.items():
                table.add_row(arm, policy, *(
                    _compact(metrics[n]["estimate"], metrics[n]["low"], metrics[n]["high"], signed=True)
                    if n in metrics else "-" for n in MAIN_METRICS
                ))
            console.print(table)
    if report["policy_effect"]:
        table = Table(title="Explicit minus silent policy, same chats (pp)", title_justify="left")
        table.add_column("model", overflow="fold")
        table.add_column("intervention", overflow="fold")
        for name in MAIN_METRICS:
            table.add_column(SHORT[name], justify="right")
        effects: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for p in report["policy_effect"]:
            effects.setdefault((p["group"]["agent"], p["group"]["interventions"]), {})[p["metric"]] = p
        for (agent, arm), metrics in effects.items():
            table.add_row(agent, arm, *(
                _compact(metrics[n]["estimate"], metrics[n]["low"], metrics[n]["high"], signed=True)
                if n in metrics else "-" for n in MAIN_METRICS
            ))
        console.print(table)
    console.print(
        f"judge errors: {report['judge_errors']} messages in {report['runs_with_judge_errors']} runs "
        f"(excluded where a grade needs them)   tool errors: {report['tool_errors']}"
    )
    files = [p for paths in report["files"].values() for p in paths]
    if files:
        console.print(f"written: {Path(files[0]).parent}/ ({', '.join(Path(p).name for p in files)})")


def print_report(
    run_dir: Path,
    judge: str = "rules",
    as_json: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    baseline: str | None = None,
    figure: bool = True,
) -> int:
    from commitbench.analysis.standing.results import write_json

    try:
        report = build_report(Path(run_dir), judge=judge, n_boot=n_boot, seed=seed, baseline=baseline, figure=figure)
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
    return print_report(
        args.run_dir, judge=args.judge, as_json=args.json, n_boot=args.n_boot, seed=args.seed,
        baseline=args.baseline, figure=not args.no_figure,
    )
