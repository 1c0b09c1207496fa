"""``commitbench cache``: inspect the model-call cache."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("cache", help="inspect the model-call cache")
    commands = parser.add_subparsers(dest="cache_command", metavar="CACHE_COMMAND", required=True)
    stats = commands.add_parser(
        "stats", help="entries, size on disk and the hit rate of the last run",
        description="Summarise a cache database without modifying it.",
    )
    stats.add_argument("--db", required=True, help="path of the cache database (SQLite)")
    stats.add_argument("--json", action="store_true", help="print the summary as JSON")
    stats.set_defaults(func=stats_handler)


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def stats_handler(args: argparse.Namespace) -> int:
    from commitbench.cache import CacheError, describe_cache
    from commitbench.cli import UsageError

    try:
        report = describe_cache(args.db)
    except (FileNotFoundError, ValueError, CacheError) as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    print(f"cache:        {report.path}")
    print(f"entries:      {report.entries}")
    for model, count in report.entries_by_model.items():
        print(f"  {model}: {count}")
    print(f"size on disk: {_human_size(report.size_bytes)}")
    print(f"runs:         {report.runs}")
    run = report.last_run
    if run is None:
        print("last run:     none recorded")
    else:
        rate = "n/a" if run.hit_rate is None else f"{100 * run.hit_rate:.1f}%"
        print(f"last run:     {run.run_id} ({run.sessions} session{'s' if run.sessions != 1 else ''})")
        print(f"  hits {run.hits}, misses {run.misses}, writes {run.writes}, hit rate {rate}")
    return 0
