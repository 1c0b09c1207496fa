"""Load a run directory into rows: traces (deduplicated by run key) joined with episodes and labels."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from commitbench.analysis.standing.metrics import run_row
from commitbench.episodes.standing.compiler import episodes_of_profiles
from commitbench.episodes.standing.episode import Episode
from commitbench.judges.standing.labels import MessageLabel
from commitbench.judges.standing.rules import RuleJudge
from commitbench.traces import EpisodeTrace, iter_traces, latest_by_key


def message_labels(
    trace: EpisodeTrace,
    episode: Episode,
    labels: Mapping[str, list[MessageLabel]] | None,
    judge: str,
    rule_judge: RuleJudge | None = None,
) -> list[MessageLabel]:
    """The labels a run is graded with: its stored ones, or the rule judge's when ``labels`` is None.

    A run missing from ``labels`` counts every message as not labelled (excluded where a grade needs
    it, never a failure).
    """
    if labels is None:
        return (rule_judge or RuleJudge()).label(trace, episode)
    stored = labels.get(trace.run_key)
    if stored is not None:
        return stored
    return [
        MessageLabel(message_index=i, step=m.step, error="not labelled", judge=judge)
        for i, m in enumerate(trace.assistant_messages())
    ]


def load_rows(
    run_dir: Path | str,
    labels: Mapping[str, list[MessageLabel]] | None = None,
    judge: str = "rules",
    episodes: Mapping[str, Episode] | None = None,
) -> pd.DataFrame:
    """One row per run, graded with ``labels`` (by run key), or with the rule judge on the fly when None.

    A run missing from ``labels`` counts every message as not labelled (excluded where a grade needs
    it, never a failure). Traces are streamed and folded into rows one at a time, so a full grid
    never sits in memory.
    """
    if episodes is None:
        episodes = episodes_of_profiles()
    rule_judge = RuleJudge() if labels is None else None
    missing: set[str] = set()

    def row(trace: EpisodeTrace) -> dict[str, object] | None:
        episode = episodes.get(trace.episode_id)
        if episode is None:
            missing.add(trace.episode_id)
            return None
        return run_row(trace, episode, message_labels(trace, episode, labels, judge, rule_judge))

    rows = latest_by_key(iter_traces(run_dir), row)
    if missing:
        found_ids = sorted(missing)
        raise KeyError(f"{len(found_ids)} episode id(s) in {run_dir} are not in the compiled episodes: {found_ids[:3]}")
    return pd.DataFrame([r for r in rows if r is not None])
