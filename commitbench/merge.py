"""Merge run directories of one experiment, played on machines that could not share a disk.

    commitbench run CONFIG --shard 0/2 --out runs/a      # machine 1
    commitbench run CONFIG --shard 1/2 --out runs/b      # machine 2
    commitbench merge runs/all runs/a runs/b             # anywhere, after copying a and b over
    commitbench run CONFIG --out runs/all                # plays whatever is still missing (nothing when complete)

The sources must be runs of the same experiment (the same players, intervention arms, episode
filter, samples, episode-set version and prompts; the URLs of the servers may differ): shards of
it, or whole runs of it. The merged directory holds:

* ``traces.jsonl``: one good trace per cell, never two: for each run key, the first source (in
  the order given) that holds a good trace of it; failed traces are left out (the next ``run``
  plays their cells again). A line that is no trace of a cell of the experiment is refused, by the
  rule every reader of a run directory applies (:mod:`commitbench.runcells`);
* ``cache.sqlite``: every entry of the sources' caches (``SRC/cache.sqlite``, else the cache file
  the source's config names when it exists here; the first source wins a key). When two caches
  answered one call differently, a trace played with the losing answer would disagree with the
  merged cache (and its replay would diverge), so that trace is left out too, and its cell is
  played again, from the cache, by the next ``run``;
* ``manifest.json``: the experiment's manifest (its cells and cells hash are the whole config's, so
  ``commitbench run CONFIG --out MERGED`` resumes it), with every source's invocations;
* ``cells.jsonl``: the cell table (:mod:`commitbench.rundir.cells`), the sources' tables joined. The
  sources' cells come from their tables, so a merge imports no player and expands no config (a source
  written before tables has its config expanded: :func:`commitbench.rundir.reader.directory_cells`).

Labels are not merged: ``commitbench label`` labels the merged directory again (from the cache,
for an LLM judge whose calls the sources' caches hold). A merge that fails (a damaged cache, a trace
of no cell of the experiment) removes what it wrote, so the same command can run again.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench import identity
from commitbench.cache import CacheError, CacheMode, CallCache
from commitbench.jsonl import append_lines, iter_lines
from commitbench.runcells import CellFacts, TraceRow, iter_trace_rows
from commitbench.rundir import (
    LOCK_FILE,
    MANIFEST_FILE,
    RunManifest,
    RunStatus,
    directory_lock,
    read_manifest,
    write_manifest,
)
from commitbench.rundir.cells import CELLS_FILE, CellTable, CellTableError, write_cell_table
from commitbench.rundir.reader import directory_cells
from commitbench.suites import get_suite
from commitbench.traces import TRACES_FILE, TraceFileError

__all__ = ["MergeError", "MergeSummary", "merge_runs"]

CACHE_FILE = "cache.sqlite"
# What a merge writes into its (empty) target, removed again when it fails.
_WRITTEN = (CACHE_FILE, f"{CACHE_FILE}-wal", f"{CACHE_FILE}-shm", TRACES_FILE, MANIFEST_FILE, CELLS_FILE)
# What must agree for two run directories to hold the same experiment.
_SAME_EXPERIMENT = ("name", "suite", "players", "interventions", "samples", "episode_set_version", "prompt_hashes")
_BATCH = 256


class MergeError(ValueError):
    """The sources cannot be merged (not run directories, other experiments, a damaged cache, a target in use)."""


class MergeSummary(BaseModel):
    """What :func:`merge_runs` did."""

    out_dir: str = Field(description="The merged run directory.")
    sources: list[str] = Field(description="The merged directories, in order of precedence.")
    cells_total: int = Field(description="Cells of the experiment.")
    cells_done: int = Field(description="Cells with a good trace in the merged directory.")
    traces_by_source: dict[str, int] = Field(description="Traces taken from each source.")
    duplicates_dropped: int = Field(description="Good traces of a cell already taken from an earlier source.")
    failed_dropped: int = Field(description="Traces that record an infrastructure failure, left out.")
    caches: list[str] = Field(description="The sources' cache files that were merged.")
    cache_entries: int = Field(description="Entries of the merged cache.")
    cache_conflicts: int = Field(
        description="Calls two caches answered differently (the earlier source's answer is kept)."
    )
    conflicted_dropped: int = Field(description="Traces left out because they were played with a losing answer.")
    status: RunStatus = Field(description="complete when every cell has a good trace, else incomplete.")


def _experiment(manifest: RunManifest) -> dict[str, Any]:
    data = manifest.model_dump(mode="json")
    same = {name: data[name] for name in _SAME_EXPERIMENT}
    same["episodes_filter"] = manifest.config.get("episodes")
    return same


def _scan(path: Path, cells: Mapping[str, CellFacts]) -> list[TraceRow]:
    """Every trace of a file with the cache keys of its model calls, by the rule every reader of a run
    directory applies (:mod:`commitbench.runcells`): a line that is no trace of a cell of the experiment is
    refused, naming the file and the line."""
    try:
        return list(iter_trace_rows(path, cells, cache_keys=True))
    except TraceFileError as exc:
        raise MergeError(str(exc)) from None


def _cache_of(path: Path, manifest: RunManifest) -> Path | None:
    """A source's cache: SRC/cache.sqlite, else the file its config names (when it is on this machine)."""
    if (path / CACHE_FILE).is_file():
        return path / CACHE_FILE
    named = (manifest.config.get("cache") or {}).get("path")
    return Path(named) if named and Path(named).is_file() else None


def merge_runs(out_dir: Path | str, sources: Sequence[Path | str]) -> MergeSummary:
    """Merge ``sources`` (earlier ones win) into the new run directory ``out_dir``; see the module doc."""
    out = Path(out_dir)
    paths = [Path(s) for s in sources]
    if not paths:
        raise MergeError("name at least one run directory to merge")
    if len({p.resolve() for p in paths}) != len(paths):
        raise MergeError("a run directory is named twice")
    manifests: list[RunManifest] = []
    for path in paths:
        manifest = read_manifest(path)
        if manifest is None or not (path / TRACES_FILE).is_file():
            raise MergeError(f"{path} is not a run directory (it needs {MANIFEST_FILE} and {TRACES_FILE})")
        manifests.append(manifest)
    first = _experiment(manifests[0])
    for path, manifest in zip(paths[1:], manifests[1:], strict=True):
        theirs = _experiment(manifest)
        differ = [name for name in first if first[name] != theirs[name]]
        if differ:
            raise MergeError(f"{path} holds another experiment than {paths[0]} (they differ in {', '.join(differ)})")
    if out.exists() and any(out.iterdir()):
        raise MergeError(f"{out} is not empty; merge into a new directory")
    suite = get_suite(manifests[0].suite)
    selection = suite.selection.model_validate(manifests[0].config.get("episodes") or {})
    suite.check_set_version(manifests[0].episode_set_version, paths[0], selection)
    config_data = dict(manifests[0].config)
    config_data["cache"] = {**(config_data.get("cache") or {}), "path": None}
    table = CellTable((), ())
    for path, manifest in zip(paths, manifests, strict=True):
        try:
            table = table.union(directory_cells(path, manifest))
        except (CellTableError, ValueError) as exc:
            raise MergeError(str(exc)) from None
    table = table.of_shard(None)  # the merged directory holds every shard
    cells = table.current_keys()
    known = table.facts()
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MergeError(f"cannot create {out}: {exc.strerror or exc}") from None
    failed = False
    try:
        with _writes_to(out), directory_lock(out):
            try:
                summary = _merge_locked(out, paths, manifests, config_data, cells, known)
                write_cell_table(out, table)
                return summary
            except CacheError as exc:
                failed = True
                raise MergeError(str(exc)) from None
            except BaseException:
                failed = True
                raise
            finally:
                if failed:  # leave the target as it was found (empty), so the same merge can run again
                    for name in _WRITTEN:
                        (out / name).unlink(missing_ok=True)
    finally:
        if failed:
            (out / LOCK_FILE).unlink(missing_ok=True)
            if created:
                with contextlib.suppress(OSError):
                    out.rmdir()


@contextlib.contextmanager
def _writes_to(out: Path) -> Iterator[None]:
    """A file of the merged directory that cannot be written (read-only storage, a full disk) is a MergeError
    naming it."""
    try:
        yield
    except OSError as exc:
        raise MergeError(f"cannot write to {exc.filename or out}: {exc.strerror or exc}") from None


def _merge_locked(out: Path, paths: list[Path], manifests: list[RunManifest], config_data: dict[str, Any],
                  cells: list[str], known: Mapping[str, CellFacts]) -> MergeSummary:
    # The caches first: which calls were answered differently, and whose answer the merged cache keeps.
    losing: list[set[str]] = [set() for _ in paths]  # per source: cache keys whose answer lost
    cache = CallCache(out / CACHE_FILE, CacheMode.READ_WRITE, run_id=uuid.uuid4().hex)
    conflicts_total = 0
    used: list[str] = []
    try:
        for index, (path, manifest) in enumerate(zip(paths, manifests, strict=True)):
            source_cache = _cache_of(path, manifest)
            if source_cache is not None:
                _, conflicts = cache.absorb(source_cache)
                used.append(str(source_cache))
                losing[index] = conflicts
                conflicts_total += len(conflicts)
        entries = len(cache)
    finally:
        cache.close()
    # Then the traces: the first good one of each cell, unless it was played with a losing answer.
    taken: dict[str, tuple[int, int]] = {}  # run key -> (source, line number)
    duplicates = failed = conflicted = 0
    for index, path in enumerate(paths):
        for row in _scan(path / TRACES_FILE, known):
            if not row.good:
                failed += 1
            elif row.run_key in taken:
                duplicates += 1
            elif row.cache_keys & losing[index]:
                conflicted += 1
            else:
                taken[row.run_key] = (index, row.number)
    by_source: dict[str, int] = {str(p): 0 for p in paths}
    target = out / TRACES_FILE
    target.touch()
    for index, path in enumerate(paths):
        wanted = {number for source, number in taken.values() if source == index}
        batch: list[str] = []
        for number, line in iter_lines(path / TRACES_FILE):
            if number in wanted:
                batch.append(line.rstrip("\n"))
                if len(batch) >= _BATCH:
                    append_lines(target, batch)
                    batch = []
        if batch:
            append_lines(target, batch)
        by_source[str(path)] = len(wanted)
    done = sum(1 for key in cells if key in taken)
    status = RunStatus.COMPLETE if done == len(cells) else RunStatus.INCOMPLETE
    base = manifests[0]
    merged = base.model_copy(
        update={
            "run_id": uuid.uuid4().hex,
            "status": status,
            "message": "merged from " + ", ".join(str(p) for p in paths),
            "config": config_data,
            "config_hash": identity.config_hash(config_data),
            "cells_hash": identity.cells_hash(cells),
            "cells_total": len(cells),
            "cells_done": done,
            "started_at": min(m.started_at for m in manifests),
            "updated_at": max(m.updated_at for m in manifests),
            "ended_at": max((m.ended_at or m.updated_at) for m in manifests),
            "invocations": [i for m in manifests for i in m.invocations],
        }
    )
    write_manifest(out, merged)
    return MergeSummary(
        out_dir=str(out), sources=[str(p) for p in paths], cells_total=len(cells), cells_done=done,
        traces_by_source=by_source, duplicates_dropped=duplicates, failed_dropped=failed, caches=used,
        cache_entries=entries,
        cache_conflicts=conflicts_total, conflicted_dropped=conflicted, status=status,
    )
