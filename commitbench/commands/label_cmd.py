"""``commitbench label RUN_DIR``: label the stored traces of a run of either suite, without re-running agents.

    commitbench label runs/x                                   # the run's configured judge (default: rules)
    commitbench label runs/x --judge rules                     # the suite's offline labeller
    commitbench label runs/x --judge llm --judge-model Qwen/Qwen3-8B --judge-base-url http://127.0.0.1:8000/v1
    commitbench label runs/x --judge-model local               # the embedded model as the judge

The suite comes from the run's manifest. Labels go to ``RUN_DIR/labels-<judge>.jsonl`` (``--out DIR``:
``DIR/labels-<judge>.jsonl``, for a run directory that cannot be written; ``report --labels DIR`` and
``view --labels DIR`` read them there), one record per trace, appended (and fsynced) as each is
finished, so an interrupted command resumes where it stopped: traces already labelled are skipped
(``--retry-errors`` labels again those whose records hold judge errors; the newer record wins). Judge
calls go through the run's cache, so a second pass makes no model call. A judge model that does not
answer leaves traces unlabelled (exit 1): run again.

Every record carries its labeller's version (a digest of its rule code, prompts and schema). Records
of another version are stale: the offline labeller's are labelled again on every pass; an LLM judge's
are labelled again with ``--relabel-stale`` (calls whose prompt did not change come from the cache),
and until then ``report`` and ``view`` refuse them rather than mix two versions of the judge.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError
from commitbench.commands.common import add_judge_flags, judge_config, print_json, render


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("label", help="label the stored traces of a run (offline labeller or LLM judge)",
                                   description=__doc__.split("\n\n", 1)[0],
                                   epilog=__doc__.split("\n\n", 1)[1],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    add_judge_flags(parser, labelling=True)
    parser.add_argument("--max-tokens", type=int, default=None, help="bound on each judge reply (default 600)")
    parser.add_argument("--concurrency", type=int, default=16, help="traces labelled at the same time (default 16)")
    parser.add_argument("--cache", type=Path, default=None, help="cache database (default RUN_DIR/cache.sqlite)")
    parser.add_argument("--cache-mode", choices=["read_write", "replay_only", "off"], default="read_write",
                        help="read_write (default), replay_only (a miss is an error) or off")
    parser.add_argument("--retry-errors", action="store_true", help="label again traces whose records hold errors")
    parser.add_argument("--relabel-stale", action="store_true",
                        help="label again traces whose records were made by another version of the judge (its "
                        "prompt, schema or rules changed); the offline labeller always does")
    parser.add_argument("--limit", type=int, default=None, help="label at most N traces not yet labelled")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="write the labels file in DIR instead of RUN_DIR (a run directory on read-only storage)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(func=_handle)


def print_summary(summary: Any) -> None:
    print(
        f"labels by {summary.labeller}: {summary.runs_labelled} traces labelled now ({summary.runs_relabelled} of them "
        f"stale), {summary.runs_skipped} already labelled, {summary.runs_total} finished in the run; "
        f"{summary.judge_errors} judge errors in {summary.runs_with_judge_errors} traces (excluded from metrics) "
        f"-> {summary.labels_file}",
        file=sys.stderr,
    )
    if summary.runs_unavailable:
        print(f"{summary.runs_unavailable} traces left unlabelled: the judge model did not answer; run again",
              file=sys.stderr)
        for line in summary.unavailable:
            print(f"  {line}", file=sys.stderr)


def _with_judge_url(judge: Any, base_url: str | None) -> Any:
    """The run's judge with ``--judge-base-url`` in place of the URL its manifest keeps.

    A manifest keeps no credentials: a judge URL that held some comes back as ``http://***@host``
    (a query token as ``?token=***``), and must be given again.
    """
    from commitbench.llm import REDACTED

    model = judge.model
    if model is None or model.local:
        return judge
    if base_url:
        if base_url == model.base_url:
            return judge
        return judge.model_copy(update={"model": model.model_copy(update={"base_url": base_url, "base_urls": None})})
    if model.base_url and REDACTED in model.base_url:
        raise UsageError(f"the judge's base URL {model.base_url} held credentials or a query token, which the run "
                         "directory does not keep; give it again with --judge-base-url")
    return judge


def _labels_dir(run_dir: Path, out: Path | None) -> Path | None:
    """The directory the labels file goes in: ``--out`` (made when missing), else the run directory, which must
    then be writable (a one-line error naming it and ``--out`` otherwise)."""
    from commitbench.commands.common import unwritable_reason

    if out is None:
        problem = unwritable_reason(run_dir) if run_dir.is_dir() else None
        if problem is not None:
            raise UsageError(f"cannot write the labels into {run_dir} ({problem}); give --out DIR to write them "
                             "elsewhere (report --labels DIR reads them there)")
        return None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out}: {exc.strerror or exc}") from None
    problem = unwritable_reason(out)
    if problem is not None:
        raise UsageError(f"cannot write the labels into {out} ({problem})")
    return out


def _handle(args: argparse.Namespace) -> int:
    from commitbench.agents.local_model import LocalModelError
    from commitbench.cache import CacheError, CacheMode
    from commitbench.labeljob import configured_judge, label_directory
    from commitbench.llm import ModelEndpointError
    from commitbench.rundir.reader import run_suite

    if args.max_tokens is not None and args.max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    try:
        suite = run_suite(args.run_dir)
        configured = configured_judge(args.run_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    judge = judge_config(args, default=configured)
    judge = _with_judge_url(judge, args.judge_base_url)
    out_dir = _labels_dir(args.run_dir, args.out)
    try:
        summary = label_directory(
            args.run_dir, judge, cache_path=args.cache, cache_mode=CacheMode(args.cache_mode),
            concurrency=max(1, args.concurrency), retry_errors=args.retry_errors, limit=args.limit,
            relabel_stale=args.relabel_stale, out_dir=out_dir,
        )
    except (ValueError, FileNotFoundError, LocalModelError, ModelEndpointError, CacheError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # the labels file cannot be written
        raise UsageError(f"cannot write {exc.filename or out_dir or args.run_dir}: {exc.strerror or exc}") from None
    agreement = None
    if judge.kind == "llm" and suite.annotation is not None and summary.runs_labelled + summary.runs_skipped:
        agreement = suite.annotation.agreement(args.run_dir, suite.offline_labeller, summary.labeller, out_dir)
    if args.json:
        print_json({"summary": summary.model_dump(mode="json"),
                    "agreement_with_rules": agreement.model_dump(mode="json") if agreement is not None else None})
    else:
        print_summary(summary)
        if agreement is not None:
            render(agreement)
    return 1 if summary.runs_unavailable else 0
