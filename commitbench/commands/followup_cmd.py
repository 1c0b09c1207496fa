"""``commitbench followup run|report``: the empty-commitment suite on a model, and its outcome tables."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("followup", help="Empty-commitment suite: run a model, report outcomes.")
    sub = parser.add_subparsers(dest="followup_command", metavar="SUBCOMMAND")

    run = sub.add_parser("run", help="Play follow-up requests with the chat agent and label the replies.")
    run.add_argument("--setups", nargs="+", default=["C0", "C2"], help="Setups (C0..C4).")
    run.add_argument("--variants", nargs="+", default=["inferred"], help="inferred and/or stated.")
    run.add_argument("--personas", nargs="+", default=None, help="generic and/or support (default: the request's).")
    run.add_argument("--categories", nargs="+", default=None, help="Request categories to keep.")
    run.add_argument("--fixes", nargs="*", default=[], help="Fixes, innermost first: stated card rewrite guard.")
    run.add_argument("--model", help="Model name at the endpoint (default: the local model's alias with --local).")
    run.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="OpenAI-compatible base URL.")
    run.add_argument("--api-key-env", default=None, help="Environment variable with the API key (none: local).")
    run.add_argument("--local", action="store_true", help="Start the embedded local model and use it.")
    run.add_argument("--max-tokens", type=int, default=256, help="Generation cap per call.")
    run.add_argument("--checker", choices=["rules", "llm"], default="rules", help="Offline rules or LLM checker.")
    run.add_argument("--judge-model", default=None, help="Checker model (default: the tested model).")
    run.add_argument("--judge-base-url", default=None, help="Checker endpoint (default: the tested one).")
    run.add_argument("--limit", type=int, default=None, help="Use only the first N requests.")
    run.add_argument("--samples", type=int, default=1, help="Samples per cell.")
    run.add_argument("--concurrency", type=int, default=8, help="Episodes in flight.")
    run.add_argument("--out", required=True, type=Path, help="Run directory (resumable).")
    run.set_defaults(func=run_handler)

    report = sub.add_parser("report", help="Outcome table per setup x variant x persona x model, and a figure.")
    report.add_argument("out", type=Path, help="Run directory with labels.jsonl.")
    report.add_argument("--figure", type=Path, default=None, help="PNG path (default: OUT/outcomes.png).")
    report.add_argument("--boot", type=int, default=1000, help="Bootstrap replicates.")
    report.add_argument("--json", action="store_true", help="Print one JSON document instead of tables.")
    report.set_defaults(func=report_handler)

    annotate = sub.add_parser("annotate", help="Blind annotation sheets: export a sample, import the labels.")
    annotate_sub = annotate.add_subparsers(dest="annotate_command", metavar="ACTION")
    export = annotate_sub.add_parser("export", help="Write a blind CSV sheet stratified by outcome label.")
    export.add_argument("out_dir", type=Path, help="Run directory with labels.jsonl.")
    export.add_argument("--sheet", type=Path, required=True, help="CSV file to write.")
    export.add_argument("--n", type=int, default=100, help="Responses in the sheet.")
    export.add_argument("--seed", type=int, default=0, help="Seed of the sample and its order.")
    export.set_defaults(func=annotate_export_handler)
    load = annotate_sub.add_parser("import", help="Validate a filled sheet and write the labels as JSONL.")
    load.add_argument("sheet", type=Path, help="Filled CSV sheet.")
    load.add_argument("--out", type=Path, required=True, help="JSONL file of human labels to write.")
    load.set_defaults(func=annotate_import_handler)
    annotate.set_defaults(func=lambda args: (annotate.print_help(), 0)[1])

    label = sub.add_parser("label", help="Label a run's stored replies again with another checker (no agent calls).")
    label.add_argument("out", type=Path, help="Run directory with traces.jsonl.")
    label.add_argument("--checker", choices=["rules", "llm"], required=True, help="Offline rules or LLM checker.")
    label.add_argument(
        "--labels", type=Path, default=None, help="Labels file to write (default OUT/labels-CHECKER.jsonl)."
    )
    label.add_argument("--judge-model", default=None, help="Checker model for --checker llm.")
    label.add_argument("--judge-base-url", default="http://127.0.0.1:8000/v1", help="Checker endpoint.")
    label.add_argument("--api-key-env", default=None, help="Environment variable with the API key.")
    label.add_argument("--local", action="store_true", help="Use the embedded local model as the checker.")
    label.add_argument("--limit", type=int, default=None, help="Label only the first N replies (in trace order).")
    label.set_defaults(func=label_handler)

    agree = sub.add_parser("agreement", help="Agreement of two checkers' labels of the same replies.")
    agree.add_argument("labels_a", type=Path, help="Labels of one checker (e.g. OUT/labels.jsonl).")
    agree.add_argument("labels_b", type=Path, help="Labels of the other (e.g. OUT/labels-llm.jsonl).")
    agree.add_argument("--json", action="store_true", help="Print one JSON document.")
    agree.set_defaults(func=agreement_handler)

    validate = sub.add_parser("validate", help="Agreement of the checker with human labels, pooled and per model.")
    validate.add_argument("human", type=Path, help="Human labels: a filled CSV sheet or imported JSONL.")
    validate.add_argument("out_dir", type=Path, help="Run directory with labels.jsonl.")
    validate.add_argument("--json", action="store_true", help="Print the report as JSON.")
    validate.set_defaults(func=validate_handler)

    parser.set_defaults(func=lambda args: (parser.print_help(), 0)[1])


def make_checker(kind: str, client: Any, local: bool = False) -> Any:
    """The rules or LLM checker; a local llama.cpp server gets the schema as ``json_object``."""
    from commitbench.cli import UsageError

    if kind == "llm":
        from commitbench.judges.followup.llm import LLMChecker
        from commitbench.judges.followup.schemas import ResponseFormatStyle

        style = ResponseFormatStyle.JSON_OBJECT if local else ResponseFormatStyle.JSON_SCHEMA
        return LLMChecker(client, style=style)
    try:
        from commitbench.judges.followup.rules import OfflineChecker  # type: ignore[attr-defined]
    except ImportError as exc:
        raise UsageError(f"the rules checker is not available in this build ({exc}); use --checker llm") from None
    return OfflineChecker()


def run_handler(args: argparse.Namespace) -> int:
    from commitbench.cache import CallCache
    from commitbench.cli import UsageError
    from commitbench.episodes.followup.requests import load_requests
    from commitbench.followup_run import LABELS_FILE, RunSpec, label_traces, run_cells, write_labels
    from commitbench.llm import ModelClient, ModelSettings

    try:
        spec = RunSpec(
            setups=args.setups, variants=args.variants, personas=args.personas, categories=args.categories,
            fixes=args.fixes, limit=args.limit, samples=args.samples, concurrency=args.concurrency,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        requests = load_requests()
    except FileNotFoundError as exc:
        raise UsageError(f"the request set is missing: {exc}") from None
    server = None
    if args.local:
        from commitbench.agents.local_model import LocalModelServer

        server = LocalModelServer().start()
        settings = server.settings(max_tokens=args.max_tokens)
    else:
        if not args.model:
            raise UsageError("--model is required without --local")
        settings = ModelSettings(model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                                 max_tokens=args.max_tokens)
    judge_settings = settings.model_copy(
        update={k: v for k, v in (("model", args.judge_model), ("base_url", args.judge_base_url)) if v}
    )
    args.out.mkdir(parents=True, exist_ok=True)
    cache = CallCache(args.out / "cache.sqlite")

    async def go() -> tuple[int, int, int]:
        async with ModelClient(settings, cache=cache, max_concurrency=args.concurrency) as client, ModelClient(
            judge_settings, cache=cache
        ) as judge_client:
            traces = await run_cells(spec, client, args.out, requests, rewrite_client=client)
            labels = await label_traces(
                traces, make_checker(args.checker, judge_client, local=args.local and not args.judge_base_url)
            )
            write_labels(args.out / LABELS_FILE, labels)
            errors = sum(1 for r in labels if r.result.outcome is None)
            return len(traces), sum(1 for t in traces if t.infra_error), errors

    try:
        try:
            n, infra, judge_errors = asyncio.run(go())
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    finally:
        if server is not None:
            server.stop()
    print(f"{n} responses ({infra} infrastructure errors, {judge_errors} judge errors) in {args.out}")
    return report_handler(argparse.Namespace(out=args.out, figure=None, boot=1000, json=False))


def outcome_table(frame: Any, n_boot: int = 1000) -> Any:
    """Wide outcome table: shares of every label, failure and over-refusal rates, per group."""
    from commitbench.analysis.followup.metrics import failure_summary, outcome_distribution

    by = ["setup", "variant", "persona", "model", "arm"]
    shares = outcome_distribution(frame, by, intervals=False)
    wide = shares.pivot_table(index=by, columns="outcome", values="estimate", observed=True).reset_index()
    counts = frame.groupby(by, observed=True).size().rename("n").reset_index()
    summary = failure_summary(frame, by, n_boot=n_boot)
    return counts.merge(wide, on=by).merge(summary, on=by)


GROUP = ["setup", "variant", "persona", "model"]
PAIRED_METRICS = ("failure_rate", "over_refusal_rate", "false_claim_rate", "ecr")


def fix_differences(frame: Any, n_boot: int = 1000) -> Any:
    """Each fix arm minus the baseline on the same requests (paired bootstrap over requests)."""
    import pandas as pd

    from commitbench.analysis.followup.metrics import paired_difference

    arms = sorted(a for a in frame["arm"].astype(str).unique() if a != "baseline")
    if not arms or "baseline" not in set(frame["arm"].astype(str)):
        return pd.DataFrame()
    tables = [
        paired_difference(frame, metric, "arm", arm, "baseline", by=GROUP, n_boot=n_boot)
        for arm in arms
        for metric in PAIRED_METRICS
    ]
    return pd.concat(tables, ignore_index=True)


def report_handler(args: argparse.Namespace) -> int:
    import json
    import sys

    import pandas as pd

    from commitbench.analysis.followup.figures import stacked_outcome_bars
    from commitbench.analysis.followup.metrics import headline_table, to_frame
    from commitbench.cli import UsageError
    from commitbench.followup_run import LABELS_FILE, labelled_responses, read_labels

    path = args.out / LABELS_FILE
    if not path.exists():
        raise UsageError(f"{path} does not exist: run `commitbench followup run --out {args.out}` first")
    rows, errors = labelled_responses(read_labels(path))
    if not rows:
        raise UsageError(f"{path} holds no labelled response ({errors} judge errors)")
    frame = to_frame(rows)
    table = outcome_table(frame, args.boot)
    headline = headline_table(frame, [*GROUP, "arm"], n_boot=args.boot)
    paired = fix_differences(frame, args.boot)
    figure = stacked_outcome_bars(frame, args.figure or args.out / "outcomes.png")
    if getattr(args, "json", False):
        def records(df: Any) -> Any:
            return json.loads(df.to_json(orient="records")) if len(df) else []

        json.dump(
            {"labels": str(path), "responses": len(rows), "judge_errors": errors, "outcomes": records(table),
             "headline": records(headline), "fix_differences": records(paired), "figure": str(figure)},
            sys.stdout, indent=2,
        )
        sys.stdout.write("\n")
        return 0
    with pd.option_context("display.width", 200, "display.max_columns", 40, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
        print("\nheadline rates (95% intervals clustered by request):")
        print(headline.to_string(index=False))
        if len(paired):
            print("\nfixes minus baseline on the same requests (paired bootstrap):")
            print(paired.to_string(index=False))
    print(f"judge errors (left out): {errors}")
    print(f"figure: {figure}")
    return 0


def label_handler(args: argparse.Namespace) -> int:
    from commitbench.cache import CallCache
    from commitbench.cli import UsageError
    from commitbench.followup_run import label_traces, read_latest, write_labels
    from commitbench.llm import ModelClient, ModelSettings

    traces = list(read_latest(args.out / "traces.jsonl").values())[: args.limit]
    if not traces:
        raise UsageError(f"{args.out} holds no follow-up traces")
    out = args.labels or args.out / f"labels-{args.checker}.jsonl"
    server = None
    if args.checker == "llm" and args.local:
        from commitbench.agents.local_model import LocalModelServer

        server = LocalModelServer().start()
        settings = server.settings(max_tokens=512)
    elif args.checker == "llm":
        if not args.judge_model:
            raise UsageError("--checker llm needs --judge-model (or --local)")
        settings = ModelSettings(model=args.judge_model, base_url=args.judge_base_url, api_key_env=args.api_key_env)
    else:
        settings = ModelSettings(model="unused", base_url="http://127.0.0.1:9/v1", api_key_env=None)

    async def go() -> list[Any]:
        async with ModelClient(settings, cache=CallCache(args.out / "cache.sqlite")) as client:
            return await label_traces(traces, make_checker(args.checker, client, local=args.local))

    try:
        records = asyncio.run(go())
    finally:
        if server is not None:
            server.stop()
    write_labels(out, records)
    errors = sum(1 for r in records if r.result.outcome is None)
    print(f"{len(records)} replies labelled by the {args.checker} checker ({errors} judge errors) -> {out}")
    return 0


def agreement_handler(args: argparse.Namespace) -> int:
    import json

    from commitbench.analysis.followup.validation import checker_agreement
    from commitbench.cli import UsageError
    from commitbench.followup_run import read_labels

    for path in (args.labels_a, args.labels_b):
        if not path.exists():
            raise UsageError(f"{path} does not exist")
    rows = checker_agreement(read_labels(args.labels_a), read_labels(args.labels_b))
    if args.json:
        print(json.dumps([r.model_dump() for r in rows], indent=2))
        return 0

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    print(f"{'model':<20} {'n':>5} {'excl':>5} {'outcome acc':>12} {'outcome k':>10} {'commit k':>9} {'claim k':>8}")
    for r in rows:
        print(f"{r.model:<20} {r.n:>5} {r.excluded:>5} {fmt(r.outcome_accuracy):>12} {fmt(r.outcome_kappa):>10} "
              f"{fmt(r.commitment_kappa):>9} {fmt(r.false_claim_kappa):>8}")
    return 0


def _run_labels(out_dir: Path) -> list[Any]:
    from commitbench.cli import UsageError
    from commitbench.followup_run import LABELS_FILE, read_labels

    path = out_dir / LABELS_FILE
    if not path.exists():
        raise UsageError(f"{path} does not exist: run `commitbench followup run --out {out_dir}` first")
    try:
        return read_labels(path)
    except ValueError as exc:
        raise UsageError(f"{path} is not a labels file: {exc}") from None


def annotate_export_handler(args: argparse.Namespace) -> int:
    from commitbench.analysis.followup.validation import select_for_annotation, write_sheet
    from commitbench.cli import UsageError

    if args.n < 1:
        raise UsageError(f"--n must be at least 1, got {args.n}")
    chosen = select_for_annotation(_run_labels(args.out_dir), args.n, args.seed)
    if not chosen:
        raise UsageError(f"{args.out_dir} holds no labelled response to annotate")
    write_sheet(args.sheet, chosen)
    print(f"{len(chosen)} responses written to {args.sheet}")
    return 0


def read_human_labels(path: Path) -> list[Any]:
    """Human labels from a filled CSV sheet or from the JSONL that ``annotate import`` writes."""
    from pydantic import ValidationError

    from commitbench.analysis.followup.validation import HumanLabel, SheetError, read_sheet
    from commitbench.cli import UsageError

    if not path.exists():
        raise UsageError(f"{path} does not exist")
    if path.suffix.lower() == ".csv":
        try:
            return read_sheet(path)
        except SheetError as exc:
            raise UsageError(str(exc)) from None
    labels = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            labels.append(HumanLabel.model_validate_json(line))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(line)'}: {e['msg']}" for e in exc.errors())
            raise UsageError(f"{path}:{number}: {problems}") from None
    return labels


def annotate_import_handler(args: argparse.Namespace) -> int:
    from commitbench.analysis.followup.validation import SheetError, read_sheet
    from commitbench.cli import UsageError

    if not args.sheet.exists():
        raise UsageError(f"{args.sheet} does not exist")
    try:
        labels = read_sheet(args.sheet)
    except SheetError as exc:
        raise UsageError(str(exc)) from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(label.model_dump_json() + "\n" for label in labels), encoding="utf-8")
    print(f"{len(labels)} labelled responses written to {args.out}")
    return 0


def validate_handler(args: argparse.Namespace) -> int:
    from commitbench.analysis.followup.validation import format_validation, validate
    from commitbench.cli import UsageError

    human = read_human_labels(args.human)
    if not human:
        raise UsageError(f"{args.human} holds no label")
    report = validate(human, _run_labels(args.out_dir))
    print(report.model_dump_json(indent=2) if args.json else format_validation(report))
    return 0
