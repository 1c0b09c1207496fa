"""``commitbench run``: play an experiment config of either suite, or a suite's shorthand, into a run directory.

    commitbench run CONFIG.yaml --out runs/exp1
    commitbench run CONFIG.yaml --dry-run
    commitbench run standing --agent creditor-rule --split test
    commitbench run standing --agent chat --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1
    commitbench run standing --agent chat --model local --cells BASE PEER-DIRECT
    commitbench run followup --model local --setups C0 C2 --variants inferred --limit 20
    commitbench run CONFIG.yaml --ray --workers 2          # on a local Ray started for the run
    commitbench run CONFIG.yaml --ray HOST:6379 --workers 16   # on a Ray cluster (the [ray] extra)

The shorthands build a config and play it like any other. Running the same command again resumes:
finished cells are skipped, failed ones are played again. When the config names an LLM judge, the
run is labelled afterwards (resumably too); the report follows. Exit codes: 0 every cell done, 1 some
cells failed or the machine stopped the run (a full disk: the manifest says 'failed' and why; run again
to retry them), 2 usage or config error (nothing was played), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError
from commitbench.commands.common import add_judge_flags, judge_config, label_of, model_entry

DEMO_NOTE = ("note: the embedded model (a 135M-parameter model on the CPU) is a demonstration of the pipeline, "
             "not a measurement; its numbers describe no model worth studying.")
_SHARED = ("agent", "model", "base_url", "api_key_env", "protocol", "temperature", "max_tokens", "seed", "extra_body",
           "samples",
           "limit", "interventions", "judge", "judge_model", "judge_base_url", "judge_api_key_env", "response_format",
           "profile", "parties", "party_model", "party_base_url", "party_api_key_env")
# Filter fields that are the command's own flags for every suite.
_OWN_FILTER_FLAGS = ("profile", "limit")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="play an experiment config (or a suite's shorthand: 'standing', 'followup') into a resumable run "
        "directory",
        description="Play an experiment config of either suite, or a suite's shorthand,\n"
        "into a resumable run directory (traces.jsonl, manifest.json, cache.sqlite).",
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="CONFIG", help="experiment YAML file, or a suite's name (its shorthand)")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default runs/<name>)")
    parser.add_argument("--dry-run", action="store_true", help="validate the config and print the plan; play nothing")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (on a terminal) or progress lines (every 20 s otherwise)")
    parser.add_argument("--no-report", action="store_true", help="do not print the metric tables afterwards")
    parser.add_argument("--concurrency", type=int, default=None, help="episodes played at the same time")
    parser.add_argument("--cache", type=Path, default=None, help="cache database (default OUT/cache.sqlite)")
    parser.add_argument(
        "--cache-mode", choices=["read_write", "off", "replay_only"], default=None,
        help="read_write (default), off, or replay_only (every call must be in the cache)",
    )
    parser.add_argument("--replay", action="store_true", help="same as --cache-mode replay_only")
    parser.add_argument("--force", action="store_true", help="allow a run directory that holds another experiment")
    parser.add_argument("--allow-unversioned", action="store_true",
                        help="play episode data whose files changed since its VERSION was locked (the manifest "
                        "records the data's digest and state); without it such a run is refused")
    parser.add_argument("--texts", type=Path, default=None, metavar="FILE",
                        help="a YAML file of texts for the slots the papers print word for word (persona prompts, the "
                        "time sentence, stated paragraphs, cards, the rewrite prompt, the release policy and its "
                        "paraphrases): they replace the project's wording (docs/validity.md lists the slots)")
    parser.add_argument(
        "--ray", nargs="?", const="", default=None, metavar="ADDRESS",
        help="play the cells on Ray actors (the [ray] extra): on the cluster at ADDRESS, or on a local Ray "
        "started for the run; this process still writes the run directory",
    )
    parser.add_argument("--shard", default=None, metavar="K/N",
                        help="play only shard K of N of the cells (0 <= K < N); 'commitbench merge' joins the shards")
    parser.add_argument("--workers", type=int, default=None,
                        help="Ray actors with --ray, each playing --concurrency episodes at a time (default 2)")
    shorthand = parser.add_argument_group("shorthands: commitbench run SUITE ...")
    shorthand.add_argument("--agent", action="append", default=None,
                           help="a reference agent's name, 'chat', or module:Class (an agent of your own, "
                           "docs/agents.md); repeatable; followup: chat, the default")
    shorthand.add_argument("--model", default=None, help="the tested model's name, or 'local' (the embedded model)")
    shorthand.add_argument("--base-url", default=None, help="OpenAI-compatible base URL of --model")
    shorthand.add_argument("--api-key-env", default=None, help="environment variable with --model's API key")
    shorthand.add_argument("--protocol", choices=["auto", "tools_only"], default=None,
                           help="the chat agent's turn protocol: auto (text is the reply) or tools_only (every answer "
                           "a forced tool call; reply and end of turn are tools); default tools_only for 'local', "
                           "auto otherwise")
    shorthand.add_argument("--temperature", type=float, default=None,
                           help="sampling temperature (default 0; 0.8 for 'local')")
    shorthand.add_argument("--max-tokens", type=int, default=None,
                           help="max generated tokens per call (default: the server's; 256 for 'local')")
    shorthand.add_argument("--seed", type=int, default=None, help="sampling seed (default none; 0 for 'local')")
    shorthand.add_argument("--extra-body", default=None, help="JSON object of extra request fields")
    shorthand.add_argument("--samples", type=int, default=None, help="samples per chat cell")
    shorthand.add_argument("--limit", type=int, default=None, help="play only the first N matching episodes")
    shorthand.add_argument("--interventions", nargs="+", default=None,
                           help="one intervention stack, innermost first (names or name[key=value] labels)")
    shorthand.add_argument("--profile", choices=["commitbench", "paper"], default=None,
                           help="paper: the suite's design as its paper ran it (a replication); commitbench (default): "
                           "the project's own choices; docs/validity.md lists every difference")
    shorthand.add_argument("--parties", choices=["scripted", "live", "both"], default=None,
                           help="who words the people: the script (default), a party model (live), or both arms "
                           "(docs/live-parties.md); live needs --party-model and --judge llm")
    shorthand.add_argument("--party-model", default=None, help="the party model's name, or 'local' (the embedded one)")
    shorthand.add_argument("--party-base-url", default=None, help="base URL of --party-model (default: --base-url)")
    shorthand.add_argument("--party-api-key-env", default=None,
                           help="environment variable with --party-model's API key (default: --api-key-env)")
    judge = parser.add_argument_group("the judge that labels the run afterwards (default: the offline labeller)")
    add_judge_flags(judge, labelling=True)
    parser.set_defaults(func=_handle, late_flags=add_suite_filters)


def add_suite_filters(parser: argparse.ArgumentParser) -> None:
    """Each registered suite's episode filter as flags (``commitbench run --help`` lists them by suite)."""
    from commitbench.commands.filters import add_filter_flags, filter_flags
    from commitbench.suites import suites

    flags = filter_flags([(suite.name, suite.selection) for suite in suites()], skip=_OWN_FILTER_FLAGS)
    add_filter_flags(parser, flags)
    parser.set_defaults(filter_flags=flags)


def shorthands() -> list[str]:
    """The suites that ``commitbench run NAME`` plays without a config file."""
    from commitbench.suites import suites

    return [suite.name for suite in suites()]


def _generation(args: argparse.Namespace) -> dict[str, Any]:
    generation: dict[str, Any] = {}
    if args.extra_body:
        try:
            extra = json.loads(args.extra_body)
        except ValueError as exc:
            raise UsageError(f"--extra-body is not JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise UsageError("--extra-body must be a JSON object")
        generation["extra_body"] = extra
    for name in ("temperature", "max_tokens", "seed"):
        if getattr(args, name) is not None:
            generation[name] = getattr(args, name)
    return generation


def shorthand_config(args: argparse.Namespace) -> Any:
    """The ExperimentConfig that ``commitbench run SUITE ...`` stands for: the suite's filter from its flags
    (the suite's own defaults for the shorthand), its default agents unless ``--agent`` is given."""
    from pydantic import ValidationError

    from commitbench.commands.filters import given_filters
    from commitbench.config import CHAT_AGENT, ExperimentConfig, plays_on_models
    from commitbench.suites import get_suite

    suite = get_suite(args.target)
    given, foreign = given_filters(args, getattr(args, "filter_flags", []), suite.name)
    if foreign:
        raise UsageError(f"{', '.join(foreign)} filter another suite's episodes, not {suite.name}'s")
    agents = args.agent or list(suite.default_agents)
    if not agents:
        raise UsageError(f"'commitbench run {suite.name}' needs --agent (a reference agent name, 'chat', or "
                         "module:Class for an agent of your own)")
    models = []
    try:
        on_models = [a for a in agents if plays_on_models(a, suite.name)]
    except ValueError as exc:  # an agent that cannot be loaded or is unknown, said as the config would say it
        raise UsageError(str(exc)) from None
    if on_models:
        if not args.model:
            raise UsageError(f"{on_models[0]!r} plays on a model: give --model NAME (a served model, or 'local' for "
                             "the embedded one)")
        models.append(model_entry(args.model, args.base_url, args.api_key_env, _generation(args),
                                  protocol=args.protocol))
    elif args.model or args.base_url or args.protocol:
        raise UsageError("--model, --base-url and --protocol go with an agent that plays on a model ('chat', or a "
                         "class of your own with uses_model = True)")
    parties: dict[str, Any] = {}
    if args.parties is not None:
        parties["parties"] = ["scripted", "live"] if args.parties == "both" else args.parties
    if args.party_model:
        entry = model_entry(args.party_model, args.party_base_url or args.base_url,
                            args.party_api_key_env or args.api_key_env, flag="--party-model")
        entry = entry.model_copy(update={"name": f"party-{entry.name}"})  # never the tested entry's name
        models.append(entry)
        parties["party_model"] = entry.name
    elif args.party_base_url or args.party_api_key_env:
        raise UsageError("--party-base-url and --party-api-key-env go with --party-model")
    episodes = suite.shorthand_episodes(given)
    if args.limit is not None:
        episodes = {**episodes, "limit": args.limit}
    name = f"{suite.name}-" + "-".join(label_of(a if a != CHAT_AGENT else f"chat-{models[0].name}") for a in agents)
    arm = args.interventions or []
    # The embedded server answers one request at a time and reuses the prompt it evaluated last: one
    # episode at a time keeps consecutive calls on a shared prefix.
    concurrency = {"concurrency": 1} if any(m.local for m in models) else {}
    try:
        return ExperimentConfig(
            name=name, env=suite.env_id, agents=agents, models=models, episodes=episodes, samples=args.samples or 1,
            interventions=[arm] if arm else ["none"], judge=judge_config(args), profile=args.profile or "commitbench",
            **concurrency, **parties,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
        raise UsageError(problems) from None


def build_config(args: argparse.Namespace) -> Any:
    """The config from a file or a shorthand, with command-line overrides applied."""
    from commitbench.cache import CacheMode
    from commitbench.config import CacheConfig, ConfigError, load_config

    if args.target in shorthands() and not Path(args.target).is_file():
        config = shorthand_config(args)
    else:
        filters = [flag.field for flag in getattr(args, "filter_flags", [])]
        used = [f"--{n.replace('_', '-')}" for n in (*_SHARED, *filters) if getattr(args, n, None) is not None]
        if used:
            raise UsageError(f"{', '.join(used)} only go with a suite's shorthand ('run SUITE'); "
                             "put them in the config")
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
    if args.texts is not None:
        from pydantic import ValidationError

        from commitbench.config import ExperimentConfig

        try:
            config = ExperimentConfig.model_validate({**config.model_dump(mode="json"), "texts": str(args.texts)})
        except ValidationError as exc:
            problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
            raise UsageError(f"--texts: {problems}") from None
    if args.concurrency is not None:
        from commitbench.modelentry import MAX_CONCURRENCY

        if not 1 <= args.concurrency <= MAX_CONCURRENCY:
            raise UsageError(f"--concurrency must be from 1 to {MAX_CONCURRENCY:,}")
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
    if summary.cache_replaced:
        print(f"cache: {summary.cache_replaced} entries were no recorded completion; their calls were made again "
              f"and the answers written over them (keys {', '.join(summary.cache_replaced_keys)}"
              f"{', ...' if summary.cache_replaced > len(summary.cache_replaced_keys) else ''})", file=sys.stderr)
    for failure in summary.failures[:5]:
        print(f"  failed: {failure.splitlines()[0]}", file=sys.stderr)
    if summary.message:
        print(f"stopped: {summary.message}", file=sys.stderr)


def _dry_run(config: Any, out_dir: Path) -> int:
    from commitbench.planning import plan

    try:
        print(plan(config).text(out_dir))
        check = config.suite.data_check(config.episodes)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if check is not None and not check.ok:
        print(f"commitbench: warning: {check.message()} (a run refuses it without --allow-unversioned)",
              file=sys.stderr)
    return 0


def _handle(args: argparse.Namespace) -> int:
    from commitbench.agents.local_model import LocalModelError
    from commitbench.rundir import RunDirectoryBusyError, RunDirectoryError, RunStatus
    from commitbench.runner import run_experiment

    config = build_config(args)
    out_dir = args.out if args.out is not None else Path("runs") / config.name
    _ray_options(args, config)  # usage errors before anything is played
    shard = _shard(args.shard)
    if args.dry_run:
        return _dry_run(config, out_dir)
    from commitbench.progress import progress_mode

    for warning in config.warnings():
        print(f"commitbench: warning: {warning}", file=sys.stderr)
    progress = progress_mode(not args.no_progress)
    try:
        if args.ray is not None:
            summary = _run_on_ray(config, out_dir, args, progress, shard)
        else:
            summary = run_experiment(config, out_dir, progress=progress, argv=sys.argv, force=args.force,
                                     shard=shard, allow_unversioned=args.allow_unversioned)
    except (ValueError, FileNotFoundError, RunDirectoryBusyError, RunDirectoryError, LocalModelError) as exc:
        raise UsageError(str(exc)) from None
    _print_summary(summary)
    if summary.status is RunStatus.INTERRUPTED:
        print(f"interrupted; run the same command again to resume {out_dir}", file=sys.stderr)
        return 130
    if summary.status is RunStatus.ABORTED:
        return 2
    if summary.status is RunStatus.FAILED:
        print(f"the run stopped; free the disk or fix {out_dir}, then run the same command again to resume",
              file=sys.stderr)
        return 1
    judged = True
    if config.judge.kind == "llm":
        judged = _label(out_dir, config)
    if not args.no_report:
        if any(entry.local for entry in config.models):
            print(DEMO_NOTE, flush=True)  # the table that follows is no measurement
        _report(out_dir, config)
    if summary.cells_remaining:
        print(f"{summary.cells_remaining} cells have no good trace; run the same command again to retry them",
              file=sys.stderr)
        return 1
    return 0 if judged else 1


def _ray_options(args: argparse.Namespace, config: Any) -> Any:
    """The Ray options of ``--ray [ADDRESS] --workers N`` (refused without --ray; a local model not on a cluster)."""
    from commitbench.cluster import RayOptions

    if args.ray is None:
        if args.workers is not None:
            raise UsageError("--workers goes with --ray")
        return None
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.ray and any(m.local for m in config.models):
        raise UsageError("a local model (local: true) runs on this machine only; on a Ray cluster serve it with "
                         "'commitbench serve-local' on a node and list its URL as the model's base_url")
    from commitbench.planning import arm_services

    judge = config.judge.model
    if args.ray and judge is not None and judge.local and any(arm_services(arm) for arm in config.interventions):
        raise UsageError("the judge flags replies while cells play (the rewrite fix), and a local judge runs on this "
                         "machine only; on a Ray cluster serve it with 'commitbench serve-local' and give its URL")
    return RayOptions(address=args.ray or None, workers=args.workers or 2)


def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, sep, count = text.partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit() or not 0 <= int(index) < int(count):
        raise UsageError(f"--shard {text!r}: expected K/N with 0 <= K < N, e.g. 0/4")
    return int(index), int(count)


def _run_on_ray(config: Any, out_dir: Path, args: argparse.Namespace, progress: bool | str,
                shard: tuple[int, int] | None) -> Any:
    from commitbench.cluster import RayUnavailableError, run_on_ray

    options = _ray_options(args, config)
    try:
        return run_on_ray(config, out_dir, options=options, progress=progress, argv=sys.argv, force=args.force,
                          shard=shard, allow_unversioned=args.allow_unversioned)
    except RayUnavailableError as exc:
        raise UsageError(str(exc)) from None


def _label(out_dir: Path, config: Any) -> bool:
    from commitbench.agents.local_model import LocalModelError
    from commitbench.cache import CacheError
    from commitbench.commands.label_cmd import print_summary
    from commitbench.labeljob import label_directory
    from commitbench.llm import ModelEndpointError

    try:
        summary = label_directory(out_dir, config.judge, cache_path=config.cache.path, cache_mode=config.cache.mode)
    except (ValueError, CacheError, LocalModelError, ModelEndpointError) as exc:
        print(f"commitbench: not labelled: {exc}", file=sys.stderr)
        return False
    print_summary(summary)
    return summary.runs_unavailable == 0


def _report(out_dir: Path, config: Any) -> None:
    from commitbench.commands.report_cmd import print_report
    from commitbench.planning import stored_judge

    try:
        print_report(out_dir, judge=stored_judge(config.suite, config.judge))
    except UsageError as exc:
        print(f"commitbench: no report: {exc}", file=sys.stderr)
