"""Load a run directory into rows: traces (deduplicated by run key) joined with episodes and labels."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from commitbench.analysis.standing.metrics import run_row
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.episode import Episode
from commitbench.judges.standing.labels import MessageLabel
from commitbench.judges.standing.rules import RuleJudge
from commitbench.traces import EpisodeTrace, iter_traces, latest_by_key

TRACES_FILE = "traces.jsonl"
T = TypeVar("T")


class RunLabelsRecord(BaseModel):
    """Stored judge labels of one run (one JSON line in ``labels-<judge>.jsonl``)."""

    run_key: str = Field(description="Run the labels belong to.")
    judge: str = Field(description="Judge name.")
    labels: list[MessageLabel] = Field(description="One label per assistant message.")


def labels_path(run_dir: Path, judge: str) -> Path:
    safe = judge.replace("/", "_").replace(":", "_")
    return run_dir / f"labels-{safe}.jsonl"


def _traces_path(run_dir: Path) -> Path:
    path = run_dir / TRACES_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is {run_dir} a run directory?")
    return path


def read_label_records(path: Path) -> list[RunLabelsRecord]:
    """Every record of a labels file, in order. A torn last line (a crash mid-write) is skipped;
    any other bad line is an error naming the file and line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    records: list[RunLabelsRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(RunLabelsRecord.model_validate_json(line))
        except ValidationError as exc:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a labels record: {exc.errors()[0]['msg']}") from None
    return records


def read_labels(run_dir: Path, judge: str) -> dict[str, list[MessageLabel]]:
    """Stored labels of a judge, by run key (the last record of a run wins)."""
    path = labels_path(run_dir, judge)
    if not path.exists():
        raise FileNotFoundError(f"no labels from judge {judge!r} in {run_dir} (expected {path.name})")
    return {record.run_key: record.labels for record in read_label_records(path)}


def append_label_records(path: Path, records: Iterable[RunLabelsRecord]) -> None:
    """Append records as JSON lines, flushed and fsynced (a crash loses no finished record)."""
    payload = "".join(r.model_dump_json() + "\n" for r in records)
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())


def load_rows(run_dir: Path | str, judge: str = "rules", episodes: dict[str, Episode] | None = None) -> pd.DataFrame:
    """One row per run. ``judge='rules'`` labels on the fly; any other judge reads its stored labels.

    Traces are streamed and folded into rows one at a time, so a full grid never sits in memory.
    """
    run_dir = Path(run_dir)
    path = _traces_path(run_dir)
    if episodes is None:
        episodes = {e.id: e for e in load_episodes()}
    stored = None if judge == "rules" else read_labels(run_dir, judge)
    rule_judge = RuleJudge()
    missing: set[str] = set()

    def row(trace: EpisodeTrace) -> dict[str, object] | None:
        episode = episodes.get(trace.episode_id)
        if episode is None:
            missing.add(trace.episode_id)
            return None
        if stored is None:
            labels = rule_judge.label(trace, episode)
        else:
            labels = stored.get(trace.run_key)
            if labels is None:
                labels = [
                    MessageLabel(message_index=i, step=m.step, error="not labelled", judge=judge)
                    for i, m in enumerate(trace.assistant_messages())
                ]
        return run_row(trace, episode, labels)

    rows = latest_by_key(iter_traces(path), row)
    if missing:
        found = sorted(missing)
        raise KeyError(f"{len(found)} episode id(s) in {run_dir} are not in the compiled episodes: {found[:3]}")
    return pd.DataFrame([r for r in rows if r is not None])


def write_json(path: Path, payload: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> None:
    """Replace a JSONL file atomically (tmp + rename) with one line per record."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)
