"""``commitbench run``: play an experiment config, or the standing benchmark with one agent.

    commitbench run CONFIG.yaml --out runs/exp1
    commitbench run standing --agent creditor-rule --split test
    commitbench run standing --agent chat --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1
    commitbench run standing --agent chat --model local --cells BASE PEER-DIRECT

Running the same command again resumes: finished cells are skipped, failed ones are played
again. Exit codes: 0 every cell done, 1 some cells failed (run again to retry them), 2 usage
error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError

STANDING = "standing"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="play an experiment config (or 'standing' with --agent) into a resumable run directory",
        description="Play an experiment config, or the standing benchmark with one agent,\n"
        "into a resumable run directory (traces.jsonl, manifest.json, cache.sqlite).",
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="CONFIG", help="experiment YAML file, or 'standing' for the shorthand")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default runs/<name>)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it is off when not a TTY)")
    parser.add_argument("--no-report", action="store_true", help="do not print the metric tables afterwards")
    parser.add_argument("--concurrency", type=int, default=None, help="episodes played at the same time")
    parser.add_argument("--cache", type=Path, default=None, help="cache database (default OUT/cache.sqlite)")
    parser.add_argument(
        "--cache-mode", choices=["read_write", "off", "replay_only"], default=None,
        help="read_write (default), off, or replay_only (every call must be in the cache)",
    )
    parser.add_argument("--replay", action="store_true", help="same as --cache-mode replay_only")
    parser.add_argument("--force", action="store_true", help="allow a run directory that holds another experiment")
    shorthand = parser.add_argument_group("shorthand: commitbench run standing ...")
    shorthand.add_argument(
        "--agent", action="append", default=None,
        help="reference agent name or 'chat' (repeatable)",
    )
    shorthand.add_argument("--model", default=None, help="model name for --agent chat, or 'local' (embedded model)")
    shorthand.add_argument("--base-url", default=None, help="OpenAI-compatible base URL for --model")
    shorthand.add_argument("--api-key-env", default=None, help="environment variable with the API key")
    shorthand.add_argument("--temperature", type=float, default=None, help="sampling temperature (default 0)")
    shorthand.add_argument("--max-tokens", type=int, default=None, help="max generated tokens per call")
    shorthand.add_argument("--seed", type=int, default=None, help="sampling seed")
    shorthand.add_argument("--extra-body", default=None, help="JSON object of extra request fields")
    shorthand.add_argument("--samples", type=int, default=None, help="samples per chat cell")
    shorthand.add_argument("--split", default=None, help="dev or test (default test)")
    shorthand.add_argument("--cells", nargs="+", default=None, help="cell ids (e.g. BASE PEER-DIRECT)")
    shorthand.add_argument("--types", nargs="+", default=None, help="commitment type ids")
    shorthand.add_argument("--policy", nargs="+", default=None, help="explicit and/or silent")
    shorthand.add_argument("--gaps", nargs="+", type=int, default=None, help="filler gaps (1, 20)")
    shorthand.add_argument("--variants", nargs="+", type=int, default=None, help="surface variants (0-2)")
    shorthand.add_argument("--limit", type=int, default=None, help="play only the first N matching episodes")
    parser.set_defaults(func=_handle)


# Default cap on generated tokens per call for the embedded model (override with --max-tokens).
LOCAL_MAX_TOKENS = 256

_SHORTHAND_ONLY = ("agent", "model", "base_url", "api_key_env", "temperature", "max_tokens", "seed", "extra_body",
                   "samples", "split", "cells", "types", "policy", "gaps", "variants", "limit")


def _label(model: str) -> str:
    label = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")
    return label or "model"


def standing_config(args: argparse.Namespace) -> Any:
    """The ExperimentConfig that ``commitbench run standing ...`` stands for."""
    from pydantic import ValidationError

    from commitbench.config import CHAT_AGENT, EpisodeFilter, ExperimentConfig, GenerationSettings, ModelEntry

    agents = args.agent or []
    if not agents:
        raise UsageError("'commitbench run standing' needs --agent (a reference agent name or 'chat')")
    models: list[ModelEntry] = []
    if CHAT_AGENT in agents:
        if not args.model:
            raise UsageError("--agent chat needs --model NAME (a served model, or 'local' for the embedded one)")
        extra_body: dict[str, Any] = {}
        if args.extra_body:
            try:
                extra_body = json.loads(args.extra_body)
            except ValueError as exc:
                raise UsageError(f"--extra-body is not JSON: {exc}") from None
            if not isinstance(extra_body, dict):
                raise UsageError("--extra-body must be a JSON object")
        generation: dict[str, Any] = {"extra_body": extra_body}
        for name in ("temperature", "max_tokens", "seed"):
            if getattr(args, name) is not None:
                generation[name] = getattr(args, name)
        try:
            if args.model == "local":
                if args.base_url:
                    raise UsageError("--model local starts the embedded model; it takes no --base-url")
                # The small embedded model sometimes rambles until the context is full; cap it.
                generation.setdefault("max_tokens", LOCAL_MAX_TOKENS)
                entry = ModelEntry(name="local", local=True, settings=GenerationSettings(**generation))
            else:
                generation["model"] = args.model
                fields: dict[str, Any] = {
                    "name": _label(args.model),
                    "base_url": args.base_url or "http://127.0.0.1:8000/v1",
                    "settings": GenerationSettings(**generation),
                }
                if args.api_key_env is not None:
                    fields["api_key_env"] = args.api_key_env
                entry = ModelEntry(**fields)
        except ValidationError as exc:
            raise UsageError(f"bad model settings: {exc.errors()[0]['msg']}") from None
        models.append(entry)
    elif args.model or args.base_url:
        raise UsageError("--model and --base-url go with --agent chat")
    try:
        return ExperimentConfig(
            name="standing-" + "-".join(_label(a if a != CHAT_AGENT else f"chat-{models[0].name}") for a in agents),
            agents=agents,
            models=models,
            episodes=EpisodeFilter(
                split=args.split or "test",
                cells=args.cells,
                types=args.types,
                policies=args.policy,
                gaps=args.gaps,
                variants=args.variants,
                limit=args.limit,
            ),
            samples=args.samples or 1,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise UsageError(problems) from None


def build_config(args: argparse.Namespace) -> Any:
    """The config from a file or the shorthand, with command-line overrides applied."""
    from commitbench.cache import CacheMode
    from commitbench.config import CacheConfig, ConfigError, load_config

    if args.target == STANDING and not Path(args.target).is_file():
        config = standing_config(args)
    else:
        used = [f"--{name.replace('_', '-')}" for name in _SHORTHAND_ONLY if getattr(args, name) not in (None, [])]
        if used:
            raise UsageError(f"{', '.join(used)} only go with 'commitbench run standing'; put them in the config")
        try:
            config = load_config(args.target)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    mode = "replay_only" if args.replay else args.cache_mode
    if args.replay and args.cache_mode not in (None, "replay_only"):
        raise UsageError("--replay and --cache-mode disagree")
    cache = config.cache
    if args.cache is not None or mode is not None:
        cache = CacheConfig(
            path=args.cache if args.cache is not None else cache.path,
            mode=CacheMode(mode) if mode is not None else cache.mode,
        )
    update: dict[str, Any] = {"cache": cache}
    if args.concurrency is not None:
        if args.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        update["concurrency"] = args.concurrency
    return config.model_copy(update=update)


def _print_summary(summary: Any) -> None:
    line = (
        f"{summary.status.value}: {summary.cells_done} cells played, {summary.cells_skipped} already done, "
        f"{summary.cells_failed} failed, {summary.cells_remaining} of {summary.cells_total} remaining"
    )
    if summary.model_calls:
        line += (
            f"; {summary.model_calls} model calls ({summary.cache_hits} from cache, {summary.http_requests} HTTP, "
            f"{summary.retries} retries)"
        )
    line += f" in {summary.wall_s:.1f}s -> {summary.out_dir}"
    print(line, file=sys.stderr)
    if summary.errors:
        print(f"model-call errors: {json.dumps(summary.errors, sort_keys=True)}", file=sys.stderr)
    for failure in summary.failures[:5]:
        print(f"  failed: {failure.splitlines()[0]}", file=sys.stderr)
    if summary.message:
        print(f"stopped: {summary.message}", file=sys.stderr)


def _handle(args: argparse.Namespace) -> int:
    from commitbench.agents.local_model import LocalModelError
    from commitbench.runner import RunDirectoryBusyError, RunStatus, run_experiment

    config = build_config(args)
    out_dir = args.out if args.out is not None else Path("runs") / config.name
    show_progress = not args.no_progress and sys.stderr.isatty()
    try:
        summary = run_experiment(config, out_dir, progress=show_progress, argv=sys.argv, force=args.force)
    except (ValueError, FileNotFoundError, RunDirectoryBusyError, LocalModelError) as exc:
        raise UsageError(str(exc)) from None
    _print_summary(summary)
    if summary.status is RunStatus.INTERRUPTED:
        print(f"interrupted; run the same command again to resume {out_dir}", file=sys.stderr)
        return 130
    if summary.status is RunStatus.ABORTED:
        return 2
    if not args.no_report:
        _report(out_dir)
    if summary.cells_remaining:
        print(f"{summary.cells_remaining} cells have no good trace; run the same command again to retry them",
              file=sys.stderr)
        return 1
    return 0


def _report(out_dir: Path) -> None:
    try:
        from commitbench.commands import report_cmd
    except ImportError:
        return
    print_report = getattr(report_cmd, "print_report", None)
    if print_report is None:
        return
    try:
        print_report(out_dir)
    except UsageError as exc:
        print(f"commitbench: no report: {exc}", file=sys.stderr)
