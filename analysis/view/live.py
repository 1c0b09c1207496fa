"""Runs a served site picks up while their run is still being played (``commitbench view --serve --watch``).

The site on disk holds the runs its build read. :class:`LiveRuns` follows the run's ``traces.jsonl`` from
where the build stopped reading: each poll reads the complete lines appended since, keeps the traces of
run keys the site does not hold yet, and turns them into the site's run records through the suite's own
viewer (given a scratch run directory of just those traces, the run's manifest and cell table, and the
run's labels). The server hands them to the page as JSON (``live.json?from=N``: the new runs from the N-th
on); the page adds them to its run list. Nothing on disk is rewritten: the overview's tables and the
"differs across samples" marks stay as the build made them until the site is built again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench.analysis.view.model import RunRecord, RunSource, SiteRun, each_run, run_row
from commitbench.analysis.view.site import site_run, with_parts
from commitbench.analysis.view.stamp import read_stamp
from commitbench.traces import EpisodeTrace

TRACES = "traces.jsonl"
COPIED = ("manifest.json", "cells.jsonl")
LIVE_PATH = "/live.json"


class LiveRun(BaseModel):
    """One run added to a served site after it was built."""

    key: str = Field(description="Run key.")
    episode: str = Field(description="Episode id.")
    ok: bool = Field(description="Finished without an infrastructure error.")
    row: dict[str, Any] = Field(description="The run's run-list fields, by column name.")
    page: dict[str, Any] = Field(description="Its transcript page (as in data/runs/*.js, its shared parts in place).")
    text: str = Field(description="Its own words, for search.")
    shared: str = Field(description="Its episode's script words, for search.")
    speakers: str = Field(description="Who speaks in it, for search.")
    off: list[str] = Field(description="Signals that differ from the cell's expectation.")


def _site_keys(site: Path) -> set[str]:
    text = (site / "data" / "index.js").read_text(encoding="utf-8")
    start, end = text.index("("), text.rindex(")")
    return set(json.loads(text[start + 1: end])["keys"])


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if value != value else value
    return str(value)


class LiveRuns:
    """The runs appended to a run directory's traces since its site was built (thread-safe)."""

    def __init__(self, run_dir: Path, site: Path, view: Callable[[Path], RunSource]) -> None:
        """``view``: the runs of a run directory as the site shows them (the run's suite's viewer, with the
        site's judge and labels), applied to a scratch directory that holds only the new traces."""
        stamp = read_stamp(site)
        traces = str((run_dir / TRACES).resolve())
        if stamp is None or traces not in stamp.inputs:
            raise ValueError(f"{site} holds no stamped site of {run_dir}; build it again to watch the run")
        self.run_dir, self.view = run_dir, view
        self.offset = stamp.inputs[traces].size
        self.known = _site_keys(site)
        self.runs: list[bytes] = []
        self._lock = threading.Lock()

    def poll(self) -> int:
        """Read what was appended since the last poll; returns how many runs were added."""
        with self._lock:
            path = self.run_dir / TRACES
            if path.stat().st_size <= self.offset:
                return 0
            with path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
            complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next poll
            self.offset += len(complete)
            fresh: dict[str, EpisodeTrace] = {}
            for line in complete.splitlines():
                if line.strip():
                    trace = EpisodeTrace.model_validate_json(line)
                    if trace.run_key not in self.known:
                        fresh[trace.run_key] = trace
            added = [self._payload(record) for record in self._records(list(fresh.values()))]
            self.known.update(fresh)
            self.runs.extend(added)
            return len(added)

    def since(self, start: int) -> bytes:
        """The JSON the page reads: the runs added from the ``start``-th on, and how many there are in all."""
        self.poll()
        with self._lock:
            body = b",".join(self.runs[max(0, start):])
            return b'{"watch":true,"total":' + str(len(self.runs)).encode() + b',"runs":[' + body + b"]}"

    def _records(self, traces: list[EpisodeTrace]) -> list[RunRecord | SiteRun]:
        if not traces:
            return []
        with tempfile.TemporaryDirectory(prefix="commitbench-live-") as scratch:
            folder = Path(scratch)
            for name in COPIED:
                if (self.run_dir / name).is_file():
                    shutil.copyfile(self.run_dir / name, folder / name)
            (folder / TRACES).write_text("".join(t.model_dump_json() + "\n" for t in traces), encoding="utf-8")
            source = self.view(folder)
            columns = [c.name for c in source.columns]
            records = list(each_run(source.records))
        self.columns = columns
        return records

    def _payload(self, record: RunRecord | SiteRun) -> bytes:
        run = site_run(record)
        row = run_row(run)
        live = LiveRun(key=run.key, episode=run.episode, ok=run.ok,
                       row={name: _plain(row.get(name)) for name in self.columns},
                       page=with_parts(json.loads(run.page), {key: json.loads(data) for key, data in run.parts}),
                       text=run.text, shared=run.shared_text, speakers=run.speakers,
                       off=list(run.off))
        return live.model_dump_json().encode("utf-8")
