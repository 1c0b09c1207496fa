"""Human validation and judge agreement, for either suite (the suite comes from the run's manifest).

    commitbench annotate export RUN_DIR --n 120 --out sheet.csv [--seed 0] [--judge rules]
    commitbench annotate import sheet.csv --out human.jsonl
    commitbench validate RUN_DIR human.jsonl [--judge llm:MODEL] [--json]
    commitbench agreement RUN_DIR --judge rules --judge llm:MODEL [--json]

``annotate export`` writes a blind CSV sheet: a seeded sample of the run's items (standing: assistant
messages, stratified by cell; follow-up: replies, stratified by the checker's outcome label), with the
context a person needs and empty label columns; it never shows a judge's labels, the cell or the
model. ``annotate import`` reads a filled sheet back (the sheet's columns tell the suite): a bad value
is an error naming the row and the column. ``validate`` measures a judge against the human labels;
``agreement`` measures two judges against each other on the same items.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commitbench.cli import UsageError
from commitbench.commands.common import print_json, render

if TYPE_CHECKING:
    from commitbench.suites import Suite


def register(subparsers: argparse._SubParsersAction) -> None:
    annotate = subparsers.add_parser("annotate", help="export a blind labelling sheet, import human labels")
    actions = annotate.add_subparsers(dest="annotate_command", metavar="ACTION", required=True)
    export = actions.add_parser("export", help="write a CSV of sampled items of a run")
    export.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    export.add_argument("--n", type=int, required=True, help="number of items to sample")
    export.add_argument("--out", type=Path, required=True, help="CSV file to write")
    export.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    export.add_argument("--judge", default=None, help="follow-up: whose labels stratify the sample (default rules)")
    export.set_defaults(func=_export)
    load = actions.add_parser("import", help="read a filled sheet into a JSONL file of human labels")
    load.add_argument("sheet", type=Path, help="the filled CSV sheet")
    load.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    load.set_defaults(func=_import)

    validate = subparsers.add_parser("validate", help="a judge against human labels of the same items")
    validate.add_argument("run_dir", type=Path, help="the run the human labels belong to")
    validate.add_argument("human", type=Path, help="human labels: JSONL from 'annotate import', or the filled CSV")
    validate.add_argument("--judge", default="rules", help="the judge: 'rules' (default) or a stored llm:MODEL")
    validate.add_argument("--json", action="store_true", help="print one JSON document")
    validate.set_defaults(func=_validate)

    agreement = subparsers.add_parser("agreement", help="two judges against each other on the same items")
    agreement.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    agreement.add_argument("--judge", action="append", required=True,
                           help="a judge ('rules' or a stored llm:MODEL); give it twice: A then B")
    agreement.add_argument("--json", action="store_true", help="print one JSON document")
    agreement.set_defaults(func=_agreement)


def _suite(run_dir: Path) -> Suite:
    from commitbench.rundir.reader import run_suite

    try:
        suite = run_suite(run_dir)
        suite.annotation_kit()  # a clear error for a suite without annotation
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return suite


def _export(args: argparse.Namespace) -> int:
    suite = _suite(args.run_dir)
    try:
        count = suite.annotation_kit().export(args.run_dir, args.n, args.out, args.seed, args.judge)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {count} items to {args.out} (seed {args.seed}); fill the label columns and import it")
    return 0


def _sheet_suite(sheet: Path) -> Suite:
    import csv

    from commitbench.suites import suites

    try:
        with sheet.open(encoding="utf-8-sig", newline="") as handle:
            header = set(next(csv.reader(handle), []))
    except OSError as exc:
        raise UsageError(f"cannot read {sheet}: {exc.strerror or exc}") from None
    # The suite whose sheet shares the most label columns with this one; its reader names what is missing.
    kits = [s for s in suites() if s.annotation is not None]
    return max(kits, key=lambda s: len(set(s.annotation_kit().required_columns) & header))


def _read_sheet(sheet: Path) -> tuple[Suite, list[Any], int]:
    from commitbench.analysis.annotation import SheetError

    suite = _sheet_suite(sheet)
    try:
        labels, blank = suite.annotation_kit().read_sheet(sheet)
    except SheetError as exc:
        raise UsageError(str(exc)) from None
    return suite, labels, blank


def _import(args: argparse.Namespace) -> int:
    from commitbench.jsonl import write_atomic

    suite, labels, blank = _read_sheet(args.sheet)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, "".join(label.model_dump_json() + "\n" for label in labels))
    print(f"imported {len(labels)} labelled {suite.name} items into {args.out} ({blank} rows left unlabelled)")
    return 0


def _human(suite: Suite, path: Path) -> list[Any]:
    from commitbench.analysis.annotation import SheetError, read_human_labels

    if not path.exists():
        raise UsageError(f"{path} does not exist")
    if path.suffix.lower() == ".csv":
        return _read_sheet(path)[1]
    try:
        return read_human_labels(path, suite.annotation_kit().human_label)
    except SheetError as exc:
        raise UsageError(str(exc)) from None


def _validate(args: argparse.Namespace) -> int:
    suite = _suite(args.run_dir)
    human = _human(suite, args.human)
    if not human:
        raise UsageError(f"{args.human} holds no label")
    try:
        result = suite.annotation_kit().validate(human, args.run_dir, args.judge)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    if args.json:
        print_json(result)
    else:
        render(result)
    return 0


def _agreement(args: argparse.Namespace) -> int:
    if len(args.judge) != 2:
        raise UsageError("give --judge twice: the two judges to compare (for example --judge rules --judge llm:M)")
    suite = _suite(args.run_dir)
    try:
        result = suite.annotation_kit().agreement(args.run_dir, args.judge[0], args.judge[1], None)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    if args.json:
        print_json(result)
    else:
        render(result)
    return 0
