"""``commitbench prevalence LOGS.jsonl``: empty commitments and false claims per 1,000 logged turns.

Two-stage design (see :mod:`commitbench.analysis.followup.prevalence`): every turn whose reply has promise- or
claim-like wording is judged; of the other turns a seeded random sample is judged.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError
from commitbench.commands.common import add_judge_flags, check_n_boot, judge_config


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "prevalence", help="Empty commitments and false claims per 1,000 logged (user, reply) turns."
    )
    parser.add_argument("logs", type=Path, help="JSONL with fields user and reply (optional id, conversation).")
    parser.add_argument("--sample", type=int, default=200, help="Turns judged from the stratum without cues.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the sample and the bootstrap.")
    add_judge_flags(parser, labelling=True)
    parser.add_argument("--concurrency", type=int, default=8, help="Turns judged at once (LLM checker).")
    parser.add_argument("--cache", type=Path, default=None,
                        help="Cache of the checker's calls (default LOGS.cache.sqlite).")
    parser.add_argument("--cache-mode", choices=["read_write", "replay_only", "off"], default="read_write",
                        help="read_write (default), replay_only (rebuild the numbers with zero calls) or off")
    parser.add_argument("--n-boot", type=int, default=1000, help="Bootstrap replicates.")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    parser.set_defaults(func=handler)


async def judge_strata(
    turns: Sequence[Any], sample_size: int, seed: int, checker: Any, concurrency: int = 8
) -> list[Any]:
    """Split ``turns`` by cue words, judge the cue stratum and a sample of the rest; the strata to estimate."""
    from commitbench.analysis.followup.prevalence import (
        Stratum,
        StratumSample,
        checker_input,
        counts_from_result,
        draw_sample,
        in_cue_stratum,
    )
    from commitbench.judges.followup.llm import check_many

    cue = [i for i, t in enumerate(turns) if in_cue_stratum(t.reply)]
    cue_set = set(cue)
    rest = [i for i in range(len(turns)) if i not in cue_set]
    chosen = {Stratum.CUE: cue, Stratum.REST: draw_sample(rest, sample_size, seed)}
    populations = {Stratum.CUE: len(cue), Stratum.REST: len(rest)}
    strata = []
    for stratum, indices in chosen.items():
        results = await check_many(checker, [checker_input(turns[i]) for i in indices], concurrency)
        counts, clusters, errors = [], [], 0
        for index, result in zip(indices, results, strict=True):
            value = counts_from_result(result)
            if value is None:
                errors += 1
                continue
            counts.append(value)
            clusters.append(turns[index].conversation or str(turns[index].id))
        strata.append(
            StratumSample(stratum=stratum, population=populations[stratum], sampled=len(indices),
                          judge_errors=errors, counts=counts, clusters=clusters)
        )
    return strata


def handler(args: argparse.Namespace) -> int:
    from commitbench.agents.local_model import LocalModelError, unless_it_dies
    from commitbench.analysis.followup.prevalence import estimate_prevalence, format_report, read_log
    from commitbench.cache import CacheError, CacheMode
    from commitbench.judges.followup.labellers import make_checker
    from commitbench.labeljob import judge_client
    from commitbench.llm import ModelEndpointError

    if args.sample < 0:
        raise UsageError(f"--sample must be >= 0, got {args.sample}")
    check_n_boot(args.n_boot)
    if not args.logs.exists():
        raise UsageError(f"{args.logs} does not exist")
    if not args.logs.is_file():
        raise UsageError(f"{args.logs} is a directory, not a JSONL log file" if args.logs.is_dir()
                         else f"{args.logs} is not a regular file")
    try:
        turns = read_log(args.logs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not turns:
        raise UsageError(f"{args.logs} holds no turn")

    judge = judge_config(args)
    if judge.kind == "rules":
        strata = asyncio.run(judge_strata(turns, args.sample, args.seed, make_checker("rules")))
        name = "rules"
    else:
        cache = args.cache or args.logs.with_name(args.logs.name + ".cache.sqlite")
        try:
            with judge_client(judge, cache, CacheMode(args.cache_mode), args.concurrency) as (client, style, server):
                checker = make_checker("llm", client, style, judge.max_attempts)

                async def go() -> list[Any]:
                    async with client:
                        work = judge_strata(turns, args.sample, args.seed, checker, args.concurrency)
                        return await unless_it_dies(server, work)

                strata = asyncio.run(go())
                name = checker.name
        except (CacheError, ModelEndpointError, LocalModelError) as exc:
            raise UsageError(str(exc)) from None
    report = estimate_prevalence(strata, n_boot=args.n_boot, seed=args.seed, checker=name)
    print(report.model_dump_json(indent=2) if args.json else format_report(report))
    return 0
