"""``commitbench judge RUN_DIR``: label the assistant messages of stored traces, without re-running agents.

    commitbench judge runs/x --judge-model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1
    commitbench judge runs/x --judge-model local          # the embedded llama.cpp model
    commitbench judge runs/x --judge rules                # the rule judge, stored like any other

LLM labels go to ``RUN_DIR/labels-llm_<model>.jsonl``, one :class:`RunLabelsRecord` per run,
appended (and fsynced) as each run is finished, so an interrupted command resumes where it
stopped: runs already in the file are skipped (``--retry-errors`` judges again the runs that
hold judge errors; the newer record wins). Calls go through the run's cache
(``RUN_DIR/cache.sqlite`` unless ``--cache`` names another), so a second pass over the same traces
makes no model call. The command ends with the agreement (accuracy, Cohen's kappa) between the
rule judge and the LLM judge, per label.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench.cli import UsageError

LOCAL = "local"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("judge", help="label assistant messages of stored traces (LLM or rule judge)")
    parser.add_argument("run_dir", type=Path, help="directory written by 'commitbench run'")
    parser.add_argument("--judge", choices=["llm", "rules"], default=None,
                        help="which judge (default: llm when --judge-model is given)")
    parser.add_argument("--judge-model", help="judge model name on --base-url, or 'local' for the embedded model")
    parser.add_argument("--base-url", help="OpenAI-compatible base URL of the judge model (ends in /v1)")
    parser.add_argument("--api-key-env", default=None, help="environment variable with the API key (default: none)")
    parser.add_argument("--response-format", choices=["json_schema", "json_object"], default=None,
                        help="how the schema is sent (default json_schema; json_object for the local model)")
    parser.add_argument("--max-attempts", type=int, default=3, help="attempts per message before a judge error")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="bound on each judge reply in tokens (default 600; part of the judge's identity)")
    parser.add_argument("--concurrency", type=int, default=16, help="judge requests in flight (default 16)")
    parser.add_argument("--cache", type=Path, help="cache database (default RUN_DIR/cache.sqlite)")
    parser.add_argument("--cache-mode", choices=["read_write", "replay_only", "off"], default="read_write",
                        help="read_write (default), replay_only (a miss is an error) or off")
    parser.add_argument("--retry-errors", action="store_true", help="judge again runs whose labels hold errors")
    parser.add_argument("--limit", type=int, help="judge at most N runs not yet labelled")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(func=_handle)


class JudgeRunSummary(BaseModel):
    """What one ``commitbench judge`` invocation did."""

    judge: str = Field(description="Judge name (labels file labels-<judge>.jsonl).")
    labels_file: str = Field(description="Where the labels are.")
    prompt_hash: str = Field(default="", description="sha256 of the judge prompt ('' for rules).")
    runs_total: int = Field(description="Finished runs in the directory.")
    runs_skipped: int = Field(default=0, description="Runs already labelled before this invocation.")
    runs_labelled: int = Field(default=0, description="Runs labelled now.")
    runs_unavailable: int = Field(default=0, description="Runs left unlabelled because the judge model did not answer.")
    messages: int = Field(default=0, description="Messages judged now.")
    judge_errors: int = Field(default=0, description="Messages recorded as judge errors now (excluded from metrics).")
    retries: int = Field(default=0, description="Extra attempts after unparseable replies.")
    calls: int = Field(default=0, description="Judge model calls (cache hits included).")
    cache_hits: int = Field(default=0, description="Calls served from the cache.")
    agreement_with_rules: list[dict[str, Any]] = Field(
        default_factory=list, description="Accuracy and kappa between the rule judge and this judge, per label."
    )
    unavailable: list[str] = Field(default_factory=list, description="Why runs were left unlabelled (first few).")


# ------------------------------------------------------------------------------- core functions
def _episodes_by_id() -> dict[str, Any]:
    from commitbench.episodes.standing.compiler import load_episodes

    return {e.id: e for e in load_episodes()}


def label_run_with_rules(run_dir: Path) -> JudgeRunSummary:
    """Store the rule judge's labels of every finished run (``labels-rules.jsonl``, rewritten)."""
    from commitbench.analysis.standing.results import RunLabelsRecord, labels_path, write_jsonl
    from commitbench.judges.standing.rules import RuleJudge
    from commitbench.traces import latest_traces

    traces = latest_traces(run_dir)
    episodes = _episodes_by_id()
    judge = RuleJudge()
    records = [
        RunLabelsRecord(run_key=t.run_key, judge=judge.name, labels=judge.label(t, episodes[t.episode_id]))
        for t in traces
    ]
    path = labels_path(run_dir, judge.name)
    write_jsonl(path, records)
    return JudgeRunSummary(
        judge=judge.name, labels_file=str(path), runs_total=len(traces), runs_labelled=len(records),
        messages=sum(len(r.labels) for r in records),
    )


async def label_run(
    run_dir: Path,
    judge: Any,
    *,
    concurrency: int = 16,
    retry_errors: bool = False,
    limit: int | None = None,
) -> JudgeRunSummary:
    """Label the runs of ``run_dir`` not yet labelled by ``judge`` (an :class:`LLMJudge`), appending as they finish."""
    from commitbench.analysis.standing.results import (
        RunLabelsRecord,
        append_label_records,
        labels_path,
        read_label_records,
    )
    from commitbench.jsonl import repair_torn_tail
    from commitbench.judges.standing.llm import JudgeUnavailable
    from commitbench.traces import latest_traces

    traces = latest_traces(run_dir)
    episodes = _episodes_by_id()
    missing = sorted({t.episode_id for t in traces if t.episode_id not in episodes})
    if missing:
        raise UsageError(f"{len(missing)} episode id(s) in {run_dir} are not in the compiled episodes: {missing[:3]}")
    path = labels_path(run_dir, judge.name)
    repair_torn_tail(path)
    done: dict[str, bool] = {}
    if path.exists():
        for record in read_label_records(path):
            done[record.run_key] = any(label.error for label in record.labels)
    todo = [t for t in traces if t.run_key not in done or (retry_errors and done[t.run_key])]
    skipped = len(traces) - len(todo)
    if limit is not None:
        todo = todo[:limit]
    summary = JudgeRunSummary(
        judge=judge.name, labels_file=str(path), prompt_hash=judge.prompt_hash, runs_total=len(traces),
        runs_skipped=skipped,
    )
    gate = asyncio.Semaphore(max(1, concurrency))
    before = judge.stats.model_copy()

    async def one(trace: Any) -> None:
        async with gate:
            try:
                labels = await judge.alabel(trace, episodes[trace.episode_id])
            except JudgeUnavailable as exc:
                summary.runs_unavailable += 1
                if len(summary.unavailable) < 5:
                    summary.unavailable.append(f"{trace.run_key[:12]}: {exc}")
                return
        append_label_records(path, [RunLabelsRecord(run_key=trace.run_key, judge=judge.name, labels=labels)])
        summary.runs_labelled += 1

    await asyncio.gather(*(one(t) for t in todo))
    summary.messages = judge.stats.messages - before.messages
    summary.judge_errors = judge.stats.errors - before.errors
    summary.retries = judge.stats.retries - before.retries
    summary.calls = judge.stats.calls - before.calls
    return summary


def rules_agreement(run_dir: Path, judge: str) -> list[dict[str, Any]]:
    """Accuracy and kappa between the rule judge (rater A) and a stored judge (rater B), per label."""
    from commitbench.analysis.agreement import LabelPair, agreement_rows, label_dict
    from commitbench.analysis.standing.results import read_labels
    from commitbench.judges.standing.rules import RuleJudge
    from commitbench.traces import latest_traces

    stored = read_labels(run_dir, judge)
    episodes = _episodes_by_id()
    rules = RuleJudge()
    pairs: list[LabelPair] = []
    for trace in latest_traces(run_dir):
        labels = stored.get(trace.run_key)
        if labels is None:
            continue
        by_index = {label.message_index: label for label in labels}
        for rule_label in rules.label(trace, episodes[trace.episode_id]):
            other = by_index.get(rule_label.message_index)
            if other is None:
                continue
            agent = trace.agent.name if trace.agent else ""
            pairs.append(LabelPair(groups={"agent": agent}, a=label_dict(rule_label), b=label_dict(other)))
    return [row.model_dump() for row in agreement_rows(pairs)]


# ------------------------------------------------------------------------------- the command
def _llm(args: argparse.Namespace) -> JudgeRunSummary:
    from commitbench.cache import CacheMode, CallCache
    from commitbench.judges.standing.llm import LLMJudge, ResponseFormatStyle, judge_settings
    from commitbench.llm import ModelClient, ModelEndpointError

    if not args.judge_model:
        raise UsageError("the LLM judge needs --judge-model NAME (with --base-url) or --judge-model local")
    if args.max_attempts < 1:
        raise UsageError("--max-attempts must be at least 1")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    limits = {"max_tokens": args.max_tokens} if args.max_tokens is not None else {}
    server = None
    if args.judge_model == LOCAL:
        if args.base_url:
            raise UsageError("--judge-model local starts the embedded model; leave out --base-url")
        from commitbench.agents.local_model import LocalModelError, LocalModelServer

        try:
            server = LocalModelServer().start()
        except LocalModelError as exc:
            raise UsageError(str(exc)) from None
        settings = judge_settings(server.alias, server.base_url, **limits)
        style = ResponseFormatStyle(args.response_format or "json_object")
    else:
        if not args.base_url:
            raise UsageError(f"--judge-model {args.judge_model} needs --base-url (an OpenAI-compatible /v1 URL)")
        settings = judge_settings(args.judge_model, args.base_url, args.api_key_env, **limits)
        style = ResponseFormatStyle(args.response_format or "json_schema")
    mode = CacheMode(args.cache_mode)
    cache_path = args.cache or args.run_dir / "cache.sqlite"
    try:
        cache = CallCache(cache_path if mode is not CacheMode.OFF else None, mode)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None

    async def go() -> JudgeRunSummary:
        async with ModelClient(settings, cache=cache, max_concurrency=max(1, args.concurrency)) as client:
            judge = LLMJudge(client, max_attempts=args.max_attempts, style=style)
            summary = await label_run(
                args.run_dir, judge, concurrency=args.concurrency, retry_errors=args.retry_errors, limit=args.limit
            )
            summary.cache_hits = client.stats().cache_hits
            return summary

    try:
        return asyncio.run(go())
    except ModelEndpointError as exc:
        raise UsageError(str(exc)) from None
    finally:
        cache.close()
        if server is not None:
            server.stop()


def _render(summary: JudgeRunSummary) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"judge {summary.judge}: {summary.runs_labelled} runs labelled now, {summary.runs_skipped} already labelled, "
        f"{summary.runs_total} in the run; {summary.messages} messages, {summary.judge_errors} judge errors "
        f"(excluded from metrics), {summary.retries} retries, {summary.calls} calls ({summary.cache_hits} cached)"
    )
    console.print(f"labels: {summary.labels_file}")
    if summary.runs_unavailable:
        console.print(f"[red]{summary.runs_unavailable} runs left unlabelled: the judge model did not answer[/red]")
        for line in summary.unavailable:
            console.print(f"  {line}")
    if summary.agreement_with_rules:
        table = Table(title="Rule judge vs this judge (per message)")
        for col in ("label", "n", "excluded", "accuracy", "kappa", "yes (rules)", "yes (judge)"):
            table.add_column(col, justify="left" if col == "label" else "right", no_wrap=True)
        for row in summary.agreement_with_rules:
            table.add_row(
                row["label"], str(row["n"]), str(row["excluded"]), _num(row["accuracy"]), _num(row["kappa"]),
                str(row["yes_a"]), str(row["yes_b"]),
            )
        console.print(table)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _handle(args: argparse.Namespace) -> int:
    from commitbench.analysis.standing.results import TRACES_FILE

    if not (args.run_dir / TRACES_FILE).exists():
        raise UsageError(f"{args.run_dir / TRACES_FILE} does not exist; is {args.run_dir} a run directory?")
    kind = args.judge or ("llm" if args.judge_model else None)
    if kind is None:
        raise UsageError("choose a judge: --judge-model NAME --base-url URL, --judge-model local, or --judge rules")
    if kind == "rules":
        if args.judge_model:
            raise UsageError("--judge rules uses no model; leave out --judge-model")
        summary = label_run_with_rules(args.run_dir)
    else:
        summary = _llm(args)
        if summary.runs_labelled or summary.runs_skipped:
            summary.agreement_with_rules = rules_agreement(args.run_dir, summary.judge)
    if args.json:
        json.dump(summary.model_dump(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        _render(summary)
    return 1 if summary.runs_unavailable else 0
