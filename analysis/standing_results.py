"""Load a run directory into rows: traces (deduplicated by run key) joined with episodes and labels."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from commitbench.analysis.standing_metrics import run_row
from commitbench.episodes.standing_compiler import load_episodes
from commitbench.episodes.standing_episode import Episode
from commitbench.judges.labels import MessageLabel
from commitbench.judges.rule_judge import RuleJudge
from commitbench.traces import EpisodeTrace, read_traces

TRACES_FILE = "traces.jsonl"


class RunLabelsRecord(BaseModel):
    """Stored judge labels of one run (one JSON line in ``labels-<judge>.jsonl``)."""

    run_key: str = Field(description="Run the labels belong to.")
    judge: str = Field(description="Judge name.")
    labels: list[MessageLabel] = Field(description="One label per assistant message.")


def labels_path(run_dir: Path, judge: str) -> Path:
    safe = judge.replace("/", "_").replace(":", "_")
    return run_dir / f"labels-{safe}.jsonl"


def latest_traces(run_dir: Path) -> list[EpisodeTrace]:
    """Finished traces, one per run key (the last good one), infrastructure failures dropped."""
    path = run_dir / TRACES_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is {run_dir} a run directory?")
    by_key: dict[str, EpisodeTrace] = {}
    for i, trace in enumerate(read_traces(path)):
        key = trace.run_key or f"#{i}"
        if trace.infra_error and key in by_key:
            continue
        by_key[key] = trace
    return [t for t in by_key.values() if not t.infra_error]


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


def repair_torn_tail(path: Path) -> int:
    """Cut an unfinished last line off a JSONL file; returns the bytes removed."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as handle:
        handle.truncate(keep)
    return len(data) - keep


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
    """One row per run. ``judge='rules'`` labels on the fly; any other judge reads its stored labels."""
    run_dir = Path(run_dir)
    traces = latest_traces(run_dir)
    if episodes is None:
        episodes = {e.id: e for e in load_episodes()}
    stored = None if judge == "rules" else read_labels(run_dir, judge)
    rule_judge = RuleJudge()
    rows = []
    missing = sorted({t.episode_id for t in traces if t.episode_id not in episodes})
    if missing:
        raise KeyError(f"{len(missing)} episode id(s) in {run_dir} are not in the compiled episodes: {missing[:3]}")
    for trace in traces:
        episode = episodes[trace.episode_id]
        if stored is None:
            labels = rule_judge.label(trace, episode)
        else:
            labels = stored.get(trace.run_key)
            if labels is None:
                labels = [
                    MessageLabel(message_index=i, step=m.step, error="not labelled", judge=judge)
                    for i, m in enumerate(trace.assistant_messages())
                ]
        rows.append(run_row(trace, episode, labels))
    return pd.DataFrame(rows)


def write_json(path: Path, payload: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> None:
    """Replace a JSONL file atomically (tmp + rename) with one line per record."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)
