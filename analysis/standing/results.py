"""Load a run directory into rows: traces (deduplicated by run key) joined with episodes and labels."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from commitbench.analysis.call_errors import call_head
from commitbench.analysis.rowstore import RowStore
from commitbench.analysis.standing.metrics import run_row
from commitbench.episodes.standing.compiler import episodes_of_profiles
from commitbench.episodes.standing.episode import Episode
from commitbench.judges.standing.labels import MessageLabel
from commitbench.judges.standing.rules import RuleJudge
from commitbench.memory import release_freed_memory
from commitbench.traces import EpisodeTrace, map_latest_traces


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
    each_trace: Callable[[Any], None] | None = None,
) -> pd.DataFrame:
    """One row per run, graded with ``labels`` (by run key), or with the rule judge on the fly when None.

    A run missing from ``labels`` counts every message as not labelled (excluded where a grade needs
    it, never a failure). The traces that count are streamed (:func:`commitbench.traces.map_latest_traces`:
    on a large run, read, parsed and made into rows by a process per core) and each is folded into its row
    as it is read, the rows kept column by column (:class:`commitbench.analysis.rowstore.RowStore`; texts as
    categorical columns), so neither the traces nor their rows as dicts ever sit in memory together.
    ``each_trace`` also sees every trace that counts, a failed one included (a failed run has no row), as
    :func:`commitbench.analysis.call_errors.call_head` makes it (its player, run key, error and failed calls),
    so one pass can feed the call-error tally.
    """
    if episodes is None:
        episodes = episodes_of_profiles()
    rule_judge = RuleJudge() if labels is None else None
    found = episodes

    def convert(trace: EpisodeTrace) -> tuple[Any, dict[str, Any] | None, str | None]:
        head = call_head(trace) if each_trace is not None else None
        if trace.infra_error:
            return head, None, None
        episode = found.get(trace.episode_id)
        if episode is None:
            return head, None, trace.episode_id
        return head, run_row(trace, episode, message_labels(trace, episode, labels, judge, rule_judge)), None

    missing: set[str] = set()
    store = RowStore()
    for head, row, unknown in map_latest_traces(run_dir, convert, include_failed=each_trace is not None):
        if each_trace is not None:
            each_trace(head)
        if unknown is not None:
            missing.add(unknown)
        elif row is not None:
            store.add(row)
    if missing:
        found_ids = sorted(missing)
        raise KeyError(f"{len(found_ids)} episode id(s) in {run_dir} are not in the compiled episodes: {found_ids[:3]}")
    frame = store.frame(categorical=True)
    del store
    release_freed_memory()  # the tables are computed from what is in use, not on top of this pass's peak
    return frame
