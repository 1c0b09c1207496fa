"""Which lines of a run directory's ``traces.jsonl`` are traces of its experiment: one rule for every reader.

A trace line counts for a cell only when its run key is a cell of the experiment the directory holds
(its manifest's config, and the configs ``--force`` added cells of) and the line says the same about
itself as the cell does: the environment, the episode, the sample, the intervention arm and the
player's identity. A line of another experiment (even one with the same model), a run key edited by
hand, a line copied onto another cell's key are refused, naming the file and the line: ``run``,
``report``, ``label``, ``view``, ``annotate`` and ``merge`` all read a directory through
:func:`scan_trace_file` or :func:`cell_problem`, so none of them counts what another refuses.
"""

from __future__ import annotations

import functools
import json
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from commitbench.jsonl import JsonlError, iter_lines_at
from commitbench.linechunks import ChunkResult, map_line_chunks, parallel_lines
from commitbench.readindex import load_index, save_index, worth_indexing
from commitbench.traces import (
    REPAIR_HINT,
    LatestLines,
    TraceFileError,
    file_state,
    remember_latest_lines,
    stored_latest_lines,
)

__all__ = ["CellFacts", "TraceRow", "cell_problem", "check_trace_file", "iter_trace_rows", "scan_trace_file",
           "trace_file_checked"]


@dataclass(frozen=True)
class CellFacts:
    """What a trace of one cell must say about itself."""

    env_id: str
    episode_id: str
    sample: int
    interventions: tuple[str, ...]
    agent: Mapping[str, Any]  # the player's identity as JSON (one object shared by the player's cells)


def cell_problem(record: Mapping[str, Any], cells: Mapping[str, CellFacts]) -> str | None:
    """Why a decoded trace line is no trace of a cell of ``cells`` (run key -> facts), or None when it is one."""
    key = record.get("run_key")
    if not isinstance(key, str) or not key:
        return "a trace without a run key"
    facts = cells.get(key)
    if facts is None:
        return f"run key {key[:12]}... is no cell of the experiment (a line of another run, or a key edited by hand)"
    said = {
        "env_id": (record.get("env_id"), facts.env_id),
        "episode_id": (record.get("episode_id"), facts.episode_id),
        "sample": (record.get("sample", 0), facts.sample),
        "interventions": (list(record.get("interventions") or []), list(facts.interventions)),
        "agent": (record.get("agent"), facts.agent),
    }
    for name, (found, expected) in said.items():
        if found != expected:
            shown = json.dumps(found, default=str)[:120]
            return (f"run key {key[:12]}... is the cell of episode {facts.episode_id} #{facts.sample}, but the line's "
                    f"{name} is {shown}")
    return None


@dataclass(frozen=True)
class TraceRow:
    """What the scan keeps of one trace line."""

    number: int  # the line's number in the file (1-based)
    run_key: str
    good: bool  # finished without an infrastructure error
    cache_keys: frozenset[str]  # the cache keys of its model calls (when asked for)
    offset: int = -1  # where the line starts in the file (bytes)


def iter_trace_rows(
    path: Path, cells: Mapping[str, CellFacts] | None = None, *, cache_keys: bool = False,
    start: int = 0, stop: int | None = None, first_number: int = 1, counted: list[int] | None = None,
) -> Iterator[TraceRow]:
    """Every trace line of ``path`` that has a run key, in order (see :func:`scan_trace_file`; ``cache_keys``
    also reads the cache keys of each trace's model calls, which a merge needs); ``start``, ``stop``,
    ``first_number`` and ``counted`` read a byte range of the file (:func:`commitbench.jsonl.iter_lines_at`)."""
    if not path.exists():
        return
    shape = _TraceWithCalls if cache_keys else _TraceIdentity
    try:
        for number, offset, line in iter_lines_at(path, start, stop, first_number, counted):
            record: dict[str, Any] = {}
            try:  # only the fields read become Python objects: several times faster than json.loads
                record = shape.model_validate_json(line).model_dump(exclude_unset=True)
            except ValidationError as exc:
                problem: str | None = _reason(exc)
            except RecursionError:
                problem = "nested too deep to read"
            else:
                problem = _trace_shape_problem(record)
            if problem is not None:
                if not line.endswith("\n"):
                    return  # torn last line
                raise TraceFileError(f"{path}:{number}: not a valid trace: {problem}; {REPAIR_HINT}")
            if cells is not None:
                problem = cell_problem(record, cells)
                if problem is not None:
                    raise TraceFileError(f"{path}:{number}: not a trace of this run: {problem}; {REPAIR_HINT}")
            key = record.get("run_key")
            if not key:
                continue
            calls = (record.get("model_calls") or []) if cache_keys else []
            keys = frozenset(str(c["cache_key"]) for c in calls if isinstance(c, dict) and c.get("cache_key"))
            yield TraceRow(number, key, not record.get("infra_error"), keys, offset)
    except TraceFileError:
        raise
    except JsonlError as exc:
        raise TraceFileError(f"{exc}; {REPAIR_HINT}") from None


def scan_trace_file(path: Path, cells: Mapping[str, CellFacts] | None = None) -> dict[str, bool]:
    """run_key -> True when some trace of it finished without an infrastructure error.

    Reads only the fields it needs, but every line must be a JSON object with the identity fields
    of a trace, and, when ``cells`` is given, a trace of one of them (:func:`cell_problem`); a line
    that is not raises :class:`TraceFileError` naming it (a torn last line is skipped:
    :func:`commitbench.jsonl.repair_torn_tail` cuts it before the next append).
    """
    status: dict[str, bool] = {}
    for row in _checked_rows(path, cells):
        status[row.run_key] = status.get(row.run_key, False) or row.good
    return status


# The rules of :func:`cell_problem` and :func:`iter_trace_rows`: a file checked under other rules is checked again.
CHECK_RULES = "1"
CHECK_INDEX = "trace-check"  # a file's check against a run's cells, in the read index (:mod:`commitbench.readindex`)


def check_trace_file(path: Path, cells: Mapping[str, CellFacts], context: str | None = None) -> None:
    """:func:`scan_trace_file` for a reader, which needs no status: every line checked against ``cells``, and
    where the traces that count are kept for the reads that follow. ``context`` names ``cells`` (see
    :func:`trace_file_checked`): a large file that passes is then noted in the read index as checked against them
    in its present state."""
    state = file_state(path) if path.exists() else None
    for _ in _checked_rows(path, cells, state):
        pass
    if context is not None and state is not None and worth_indexing(state):
        save_index(CHECK_INDEX, state, b"", _context(context))


def trace_file_checked(path: Path, context: str) -> bool:
    """Whether ``path``, as it is now, passed :func:`check_trace_file` against the cells ``context`` names (a
    digest of where they come from, made by the caller), in this process or one before it, with the lines that
    count still known (:func:`commitbench.traces.stored_latest_lines`)."""
    if not path.exists():
        return False
    state = file_state(path)
    return (worth_indexing(state) and load_index(CHECK_INDEX, state, _context(context)) is not None
            and stored_latest_lines(state) is not None)


def _context(context: str) -> str:
    return f"{CHECK_RULES}:{context}"


def _checked_rows(path: Path, cells: Mapping[str, CellFacts] | None,
                  state: tuple[Any, ...] | None = None) -> Iterator[TraceRow]:
    if state is None and cells is not None and path.exists():
        state = file_state(path)
    latest = LatestLines()
    rows = _rows_in_pool(path, cells) if parallel_lines(path) else iter_trace_rows(path, cells)
    for row in rows:
        latest.add(row.number, row.offset, row.run_key, row.good)
        yield row
    if cells is not None and state is not None:  # every line is a trace of a cell: no read that follows checks again
        remember_latest_lines(path, state, latest.finish())


# One range's rows, column by column: line numbers counted from the range's first line, offsets, keys, good.
_RangeRows = tuple["array[int]", "array[int]", list[str], bytearray]


def _check_range(cells: Mapping[str, CellFacts] | None, path: Path, start: int, stop: int) -> ChunkResult[_RangeRows]:
    """The rows of the lines that start in ``[start, stop)`` (in a pool's process); not ok when one is bad."""
    numbers, offsets, keys, good = array("q"), array("q"), [], bytearray()
    counted = [0]
    try:
        for row in iter_trace_rows(path, cells, start=start, stop=stop, counted=counted):
            numbers.append(row.number)
            offsets.append(row.offset)
            keys.append(row.run_key)
            good.append(row.good)
    except TraceFileError:
        return ChunkResult(lines=counted[0], ok=False, value=(array("q"), array("q"), [], bytearray()))
    return ChunkResult(lines=counted[0], ok=True, value=(numbers, offsets, keys, good))


def _rows_in_pool(path: Path, cells: Mapping[str, CellFacts] | None) -> Iterator[TraceRow]:
    """:func:`iter_trace_rows` of a large file, its byte ranges checked by a pool of processes; a range with a bad
    line is read again here, so the error names the same line in the same words."""
    for start, stop, first, result in map_line_chunks(path, functools.partial(_check_range, cells)):
        if not result.ok:
            yield from iter_trace_rows(path, cells, start=start, stop=stop, first_number=first)  # raises
            continue
        numbers, offsets, keys, good = result.value
        for index, key in enumerate(keys):
            yield TraceRow(numbers[index] + first - 1, key, bool(good[index]), frozenset(), offsets[index])


class _TraceIdentity(BaseModel):
    """The fields of a trace line this module reads (the rest of the line is checked as JSON, not kept)."""

    run_key: Any = None
    env_id: Any = None
    episode_id: Any = None
    sample: Any = 0
    interventions: Any = None
    agent: Any = None
    infra_error: Any = None


class _CallKey(BaseModel):
    """The one field of a model-call record a merge reads."""

    cache_key: Any = None


class _TraceWithCalls(_TraceIdentity):
    """The identity fields, and the cache keys of the trace's model calls."""

    model_calls: list[_CallKey] | None = None


def _reason(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if error.get("type") == "model_type":
        return "a JSON value that is not an object"
    return f"not JSON ({error.get('msg', 'unreadable')})"


def _trace_shape_problem(record: dict[str, Any]) -> str | None:
    """What is wrong with the identity fields of a decoded trace line, or None."""
    for name in ("env_id", "episode_id"):
        if not isinstance(record.get(name), str):
            return f"{name}: expected a string"
    for name in ("run_key", "infra_error"):
        if record.get(name) is not None and not isinstance(record[name], str):
            return f"{name}: expected a string"
    return None
