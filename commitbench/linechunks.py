"""A large JSON-lines file checked in byte ranges, one range per task, by a pool of forked processes.

A reader of a big run first checks every line of its trace file and indexes its labels files; on one core
that is a second or two per 100,000 lines before any trace is read. :func:`map_line_chunks` splits a file
into ranges that start at line starts, hands each range to ``work`` in a forked process, and gives back
what each returns, in file order. A range does not know the number of its first line (counting them would
mean reading everything before it), so ``work`` numbers its lines from 1 and says how many it read
(:class:`ChunkResult`); the caller adds the lines of the ranges before it. A range whose lines are not all
good is not explained by the worker: the caller reads it again in its own process, where its first line's
number is known, so a bad line is named exactly as a reading of the whole file in one process names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Generic, TypeVar

__all__ = ["ChunkResult", "line_ranges", "map_line_chunks", "parallel_lines"]

T = TypeVar("T")

MIN_PARALLEL_BYTES = 16 << 20  # smaller files are read in one process: a pool costs more than it saves
MIN_CHUNK_BYTES = 4 << 20
CHUNKS_PER_WORKER = 4  # several ranges a process, so an uneven file still keeps every core busy

_WORK: Callable[[Path, int, int], Any] | None = None
_FILE: Path | None = None


@dataclass(frozen=True)
class ChunkResult(Generic[T]):
    """What ``work`` made of one byte range."""

    lines: int  # lines in the range (blank ones included), so that the next range's numbers follow on
    ok: bool  # every line good; False: the caller reads the range again in its own process to say why
    value: T


def line_ranges(path: Path, parts: int, min_bytes: int | None = None) -> list[tuple[int, int]]:
    """Byte ranges ``[start, stop)`` that cover ``path``, each starting at the start of a line: about ``parts``
    of them, none (but the last) much under ``min_bytes`` (default :data:`MIN_CHUNK_BYTES`)."""
    size = path.stat().st_size
    smallest = MIN_CHUNK_BYTES if min_bytes is None else min_bytes
    parts = max(1, min(parts, size // max(1, smallest)))
    bounds = [0]
    with path.open("rb") as handle:
        for k in range(1, parts):
            guess = size * k // parts
            if guess <= bounds[-1]:
                continue
            handle.seek(guess - 1)
            handle.readline()  # to the end of the line that holds byte guess - 1: the next line starts there
            start = handle.tell()
            if bounds[-1] < start < size:
                bounds.append(start)
    bounds.append(size)
    return [(a, b) for a, b in pairwise(bounds) if b > a]


def parallel_lines(path: Path, workers: int | None = None) -> bool:
    """Whether :func:`map_line_chunks` would use a pool for ``path`` (large enough, several cores, fork)."""
    from commitbench.forkpool import can_fork
    from commitbench.traces import pool_workers

    count = pool_workers() if workers is None else workers
    return count >= 2 and path.exists() and path.stat().st_size >= MIN_PARALLEL_BYTES and can_fork()


def _task(bounds: tuple[int, int]) -> Any:
    assert _WORK is not None and _FILE is not None  # set before the pool's processes were forked
    return _WORK(_FILE, *bounds)


def map_line_chunks(
    path: Path, work: Callable[[Path, int, int], ChunkResult[T]], workers: int | None = None,
) -> Iterator[tuple[int, int, int, ChunkResult[T]]]:
    """``work(path, start, stop)`` of each byte range of ``path``, made in a pool of forked processes, in file
    order, as ``(start, stop, first_number, result)``: ``first_number`` is the number of the range's first line.

    At most two ranges a process are in flight, so what waits here stays bounded; the processes die with this
    one. Callers check :func:`parallel_lines` first (a small file is cheaper to read in one process).
    """
    from commitbench.forkpool import ordered_map
    from commitbench.traces import pool_workers

    global _WORK, _FILE
    count = pool_workers() if workers is None else workers
    ranges = line_ranges(path, count * CHUNKS_PER_WORKER)
    _WORK, _FILE = work, path
    try:
        number = 1
        with closing(ordered_map(_task, ranges, count)) as results:
            for (start, stop), result in zip(ranges, results, strict=True):
                yield start, stop, number, result
                number += result.lines
    finally:
        _WORK = _FILE = None

