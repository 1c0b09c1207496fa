"""Human validation of the standing judge.

    commitbench annotate export RUN_DIR --n 120 --out sheet.csv [--seed 0]
    commitbench annotate import sheet.csv --out human.jsonl
    commitbench agreement human.jsonl --judge-labels RUN_DIR --judge llm:MODEL [--json]

``export`` samples assistant messages stratified by cell (as evenly over cells as the messages
allow, seeded) and writes a CSV sheet that shows each message with the context a person needs
(the requester, named delegates, the promise, the last chat lines) and three empty label
columns. It never shows a judge's labels, the cell, or the model, so the annotation is blind.
``import`` reads the filled sheet back: each label cell must be ``yes``, ``no`` or empty (not
labelled); anything else is an error naming the row and the column. ``agreement`` compares the
human labels with a judge's labels of the same messages: accuracy and Cohen's kappa per label,
pooled and per model, with counts.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench.cli import UsageError

LABEL_COLUMNS: tuple[str, ...] = ("consults_creditor", "notifies_creditor", "off_topic")
SHEET_COLUMNS: tuple[str, ...] = (
    "item_id", "run_key", "message_index", "requester", "named_delegates", "promise", "conversation",
    "message_to", "message", *LABEL_COLUMNS, "comment",
)


class HumanLabel(BaseModel):
    """One message as a person labelled it (None: left empty)."""

    item_id: str = Field(description="Row id in the sheet.")
    run_key: str = Field(description="Run the message belongs to.")
    message_index: int = Field(description="Index among the run's assistant messages.")
    consults_creditor: bool | None = Field(description="Asks the requester whether to proceed, hold or drop.")
    notifies_creditor: bool | None = Field(description="Tells the requester of a cancellation and its cause.")
    off_topic: bool | None = Field(description="Unrelated to the workspace conversation.")
    comment: str = Field(default="", description="The annotator's comment.")


def register(subparsers: argparse._SubParsersAction) -> None:
    annotate = subparsers.add_parser("annotate", help="export a blind labelling sheet, import human labels")
    actions = annotate.add_subparsers(dest="annotate_command", metavar="ACTION", required=True)
    export = actions.add_parser("export", help="write a CSV of sampled messages, stratified by cell")
    export.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    export.add_argument("--n", type=int, required=True, help="number of messages to sample")
    export.add_argument("--out", type=Path, required=True, help="CSV file to write")
    export.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    export.set_defaults(func=_export)
    load = actions.add_parser("import", help="read a filled sheet into a JSONL file of human labels")
    load.add_argument("sheet", type=Path, help="the filled CSV sheet")
    load.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    load.set_defaults(func=_import)

    agreement = subparsers.add_parser("agreement", help="accuracy and Cohen's kappa of a judge against human labels")
    agreement.add_argument("human", type=Path, help="JSONL written by 'commitbench annotate import'")
    agreement.add_argument("--judge-labels", type=Path, required=True, help="run directory with the judge's labels")
    agreement.add_argument("--judge", required=True, help="judge name: 'rules' or e.g. 'llm:MODEL'")
    agreement.add_argument("--json", action="store_true", help="print one JSON document")
    agreement.set_defaults(func=_agreement)


# ------------------------------------------------------------------------------- export
def _cell_rank(cell: str) -> tuple[int, str]:
    heads = ["BASE", "CRED", "DELEG", "PEER", "MGR", "RELAY", "FACT", "REINSTATE"]
    head = cell.split("-")[0]
    return (heads.index(head) if head in heads else len(heads), cell)


def stratified_sample(items_by_cell: dict[str, list[Any]], n: int, seed: int) -> list[Any]:
    """``n`` items spread as evenly over cells as their sizes allow (round robin over shuffled cells)."""
    rng = random.Random(seed)
    pools = {}
    for cell in sorted(items_by_cell, key=_cell_rank):
        pool = list(items_by_cell[cell])
        rng.shuffle(pool)
        pools[cell] = pool
    chosen: list[Any] = []
    while len(chosen) < n and any(pools.values()):
        for cell in list(pools):
            if len(chosen) >= n:
                break
            if pools[cell]:
                chosen.append(pools[cell].pop())
    rng.shuffle(chosen)  # the sheet's order carries no hint of the cell
    return chosen


def export_sheet(run_dir: Path, n: int, out: Path, seed: int = 0) -> int:
    """Write the sheet; returns the number of rows."""
    from commitbench.episodes.standing.compiler import load_episodes
    from commitbench.judges.standing.llm import judge_cases
    from commitbench.traces import latest_traces

    if n < 1:
        raise UsageError("--n must be at least 1")
    try:
        traces = latest_traces(run_dir)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    episodes = {e.id: e for e in load_episodes()}
    by_cell: dict[str, list[tuple[Any, Any, Any]]] = {}
    for trace in sorted(traces, key=lambda t: t.run_key):
        episode = episodes.get(trace.episode_id)
        if episode is None:
            raise UsageError(f"episode {trace.episode_id} of run {trace.run_key} is not in the compiled episodes")
        for case in judge_cases(trace):
            by_cell.setdefault(episode.cell, []).append((trace, episode, case))
    if not by_cell:
        raise UsageError(f"{run_dir} holds no assistant messages to label")
    rows = stratified_sample(by_cell, n, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SHEET_COLUMNS))
        writer.writeheader()
        for i, (trace, episode, case) in enumerate(rows, start=1):
            promise = next((m.text for m in episode.script if m.act.value == "promise"), "")
            writer.writerow({
                "item_id": f"m{i:04d}",
                "run_key": trace.run_key,
                "message_index": case.message_index,
                "requester": episode.creditor.name,
                "named_delegates": ", ".join(case.delegates),
                "promise": promise,
                "conversation": "\n".join(case.conversation),
                "message_to": case.channel,
                "message": case.text,
                **dict.fromkeys(LABEL_COLUMNS, ""),
                "comment": "",
            })
    return len(rows)


# ------------------------------------------------------------------------------- import
def _yes_no(value: str, row: int, item: str, column: str) -> bool | None:
    text = (value or "").strip().lower()
    if text == "":
        return None
    if text in ("yes", "no"):
        return text == "yes"
    raise UsageError(f"row {row} (item {item}), column {column}: expected yes or no (or empty), got {value!r}")


def read_sheet(sheet: Path) -> tuple[list[HumanLabel], int]:
    """Human labels of a filled sheet and the number of rows left entirely unlabelled."""
    try:
        handle = sheet.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise UsageError(f"cannot read {sheet}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        present = set(reader.fieldnames or [])
        missing = [c for c in ("item_id", "run_key", "message_index", *LABEL_COLUMNS) if c not in present]
        if missing:
            raise UsageError(f"{sheet}: missing column(s): {', '.join(missing)}")
        labels: list[HumanLabel] = []
        seen: set[tuple[str, int]] = set()
        blank = 0
        for row_number, row in enumerate(reader, start=1):
            item = (row.get("item_id") or "").strip() or f"#{row_number}"
            run_key = (row.get("run_key") or "").strip()
            if not run_key:
                raise UsageError(f"row {row_number} (item {item}), column run_key: empty")
            try:
                index = int((row.get("message_index") or "").strip())
            except ValueError:
                raise UsageError(
                    f"row {row_number} (item {item}), column message_index: expected a whole number, "
                    f"got {row.get('message_index')!r}"
                ) from None
            if (run_key, index) in seen:
                raise UsageError(f"row {row_number} (item {item}): message {run_key}#{index} appears twice")
            seen.add((run_key, index))
            values = {c: _yes_no(row.get(c) or "", row_number, item, c) for c in LABEL_COLUMNS}
            if all(v is None for v in values.values()):
                blank += 1
                continue
            labels.append(
                HumanLabel(item_id=item, run_key=run_key, message_index=index, comment=(row.get("comment") or ""),
                           **values)
            )
    return labels, blank


def read_human_labels(path: Path) -> list[HumanLabel]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(HumanLabel.model_validate_json(line))
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not a human label: {str(exc).splitlines()[0]}") from None
    return out


# ------------------------------------------------------------------------------- agreement
def judge_agreement(human: list[HumanLabel], run_dir: Path, judge: str) -> dict[str, Any]:
    """Agreement of a judge (rater B) with human labels (rater A): pooled and per model, with counts."""
    from commitbench.analysis.agreement import LABEL_FIELDS, LabelPair, agreement_rows, label_dict
    from commitbench.analysis.standing.results import read_labels
    from commitbench.episodes.standing.compiler import load_episodes
    from commitbench.judges.standing.rules import RuleJudge
    from commitbench.traces import latest_traces

    traces = {t.run_key: t for t in latest_traces(run_dir)}
    if judge == "rules":
        episodes = {e.id: e for e in load_episodes()}
        rules = RuleJudge()
        stored = {key: rules.label(t, episodes[t.episode_id]) for key, t in traces.items()}
    else:
        stored = read_labels(run_dir, judge)
    pairs: list[LabelPair] = []
    not_judged = unknown_runs = 0
    for item in human:
        trace = traces.get(item.run_key)
        if trace is None:
            unknown_runs += 1
            continue
        labels = {label.message_index: label for label in stored.get(item.run_key, [])}
        judged = labels.get(item.message_index)
        if judged is None:
            not_judged += 1
            continue
        human_values = {f: getattr(item, f) for f in LABEL_FIELDS}
        model = trace.agent.name if trace.agent else ""
        pairs.append(LabelPair(groups={"model": model}, a=human_values, b=label_dict(judged)))
    return {
        "judge": judge,
        "human_labels": len(human),
        "compared": len(pairs),
        "not_judged": not_judged,
        "unknown_runs": unknown_runs,
        "pooled": [r.model_dump() for r in agreement_rows(pairs)],
        "by_model": [r.model_dump() for r in agreement_rows(pairs, ("model",))],
    }


# ------------------------------------------------------------------------------- handlers
def _export(args: argparse.Namespace) -> int:
    count = export_sheet(args.run_dir, args.n, args.out, seed=args.seed)
    print(f"wrote {count} messages to {args.out} (seed {args.seed}); fill the yes/no columns and import it")
    return 0


def _import(args: argparse.Namespace) -> int:
    labels, blank = read_sheet(args.sheet)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_text("".join(label.model_dump_json() + "\n" for label in labels), encoding="utf-8")
    tmp.replace(args.out)
    print(f"imported {len(labels)} labelled messages into {args.out} ({blank} rows left unlabelled)")
    return 0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _agreement(args: argparse.Namespace) -> int:
    human = read_human_labels(args.human)
    try:
        result = judge_agreement(human, args.judge_labels, args.judge)
    except FileNotFoundError as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    if args.json:
        json.dump(result, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"Judge {args.judge} against human labels ({result['compared']} messages)")
    for col in ("model", "label", "n", "excl", "acc", "kappa", "yes:human", "yes:judge"):
        table.add_column(col, justify="left" if col in ("model", "label") else "right", no_wrap=True)
    for scope, rows in (("pooled", result["pooled"]), ("by_model", result["by_model"])):
        for row in rows:
            table.add_row(
                row["group"].get("model", "all") if scope == "by_model" else "all",
                row["label"], str(row["n"]), str(row["excluded"]), _num(row["accuracy"]), _num(row["kappa"]),
                str(row["yes_a"]), str(row["yes_b"]),
            )
    console.print(table)
    console.print(
        f"human labels: {result['human_labels']}; not judged: {result['not_judged']}; "
        f"runs not in the directory: {result['unknown_runs']}"
    )
    return 0
