"""A run's progress display: a bar on a terminal, a plain line every so often in a log or a pipe.

Both show the cells done of those to play, the model calls, the time elapsed and an estimate of the
time left (the mean time per finished cell so far, times the cells still to play: rough while few
cells are done, and shown only once one is). Other long jobs count their own units (``commitbench view``
counts runs written into its site) and may leave the model calls out; :func:`ticking` drives the display
from a thread for a job that has no event loop.

The same displays count the traces a long read goes through (``commitbench report`` and ``view`` over
a large run): :func:`reading_progress` turns them on for the reads made inside it, and a reader asks
:func:`reading` for the display of the traces it is about to read (none when the read is short or no
display was asked for). A read has no event loop: :meth:`ProgressLines.poll` and
:meth:`ProgressBar.poll`, called after each trace, print or refresh when it is time.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from commitbench.llm import ClientStats

__all__ = ["PROGRESS_INTERVAL_S", "PROGRESS_LINES", "READING_THRESHOLD", "Progress", "ProgressBar", "ProgressLines",
           "ProgressSource", "make_progress", "progress_mode", "reading", "reading_progress", "ticking", "time_left"]

# A run that is not attached to a terminal prints a progress line this often (seconds).
PROGRESS_INTERVAL_S = 20.0
# The ``progress`` value that asks for lines instead of a bar.
PROGRESS_LINES = "lines"


class ProgressSource(Protocol):
    """What a progress display reads: the run's name, its failed cells, and its clients' counters."""

    @property
    def name(self) -> str: ...

    def failed_cells(self) -> int: ...

    def client_totals(self) -> ClientStats | None: ...


def time_left(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the mean pace so far (None before the first cell is done)."""
    if done <= 0 or total <= done:
        return None if done <= 0 else 0.0
    return elapsed_s / done * (total - done)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressLines:
    """For a run not attached to a terminal (a log, a pipe): one plain line on stderr every ``interval_s``
    seconds (cells done, model calls, elapsed time, time left), and one at the end.

    ``unit`` names what is counted and ``verb`` what happens to it ("cells done"; a site: "runs done"; a read:
    "traces read"); ``calls`` False leaves out the model calls, ``failed`` False the failed count, and
    ``label`` names the job in the line (a read's)."""

    def __init__(self, source: ProgressSource, total: int, interval_s: float = PROGRESS_INTERVAL_S,
                 unit: str = "cells", calls: bool = True, *, verb: str = "done", failed: bool = True,
                 label: str = "") -> None:
        self.source = source
        self.total = total
        self.interval_s = interval_s
        self.unit = unit
        self.verb = verb
        self.calls = calls
        self.failed = failed
        self.label = label
        self.done = 0
        self.started = time.monotonic()
        self.printed = self.started

    def advance(self) -> None:
        self.done += 1

    def line(self) -> str:
        """The progress line as it would be printed now."""
        elapsed = time.monotonic() - self.started
        left = time_left(self.done, self.total, elapsed)
        estimate = f", about {_clock(left)} left" if left is not None and self.done < self.total else ""
        label = f"{self.label}: " if self.label else ""
        counted = ""
        if self.calls:
            totals = self.source.client_totals()
            counted = f", {totals.calls if totals is not None else 0} model calls"
        failed = f", {self.source.failed_cells()} failed" if self.failed else ""
        return (f"progress: {label}{self.done}/{self.total} {self.unit} {self.verb}{counted}, {elapsed:.0f} s elapsed"
                f"{estimate}{failed}")

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            print(self.line(), file=sys.stderr, flush=True)

    def poll(self) -> None:
        """Print a line when ``interval_s`` passed since the last one (for a loop without an event loop)."""
        now = time.monotonic()
        if now - self.printed >= self.interval_s:
            self.printed = now
            print(self.line(), file=sys.stderr, flush=True)

    def close(self) -> None:
        print(self.line(), file=sys.stderr, flush=True)


class ProgressBar:
    """A rich progress bar refreshed from the event loop (no refresh thread)."""

    def __init__(self, source: ProgressSource, total: int, unit: str = "cells", calls: bool = True, *,
                 failed: bool = True) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.source = source
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
            TextColumn("{task.fields[status]}"),
            auto_refresh=False,
            transient=False,
            console=Console(stderr=True),
        )
        self.total = total
        self.unit = unit
        self.calls = calls
        self.failed = failed
        self.done = 0
        self.started = time.monotonic()
        self.refreshed = self.started
        self.task = self.progress.add_task(source.name, total=total, status="", left=self.left_text())
        self.progress.start()

    def advance(self) -> None:
        self.done += 1
        self.progress.advance(self.task)

    def left_text(self) -> str:
        """The estimate of the time left, at the mean pace since the run started (the same estimate as the
        progress lines': steadier than a recent-speed estimate when a cell takes longer than a few seconds,
        as with a local model)."""
        left = time_left(self.done, self.total, time.monotonic() - self.started)
        if left is None:
            return f"time left: after the first {self.unit.removesuffix('s')}"
        return f"about {_clock(left)} left" if self.done < self.total else "done"

    def status_text(self) -> str:
        """The counters shown beside the bar: the clients' (with ``calls``) and the failed ones (with ``failed``)."""
        totals = self.source.client_totals() if self.calls else None
        parts = []
        if totals is not None:
            parts.append(f"{totals.calls_per_s:6.1f} calls/s")
            parts.append(f"cache {totals.cache_hits}/{totals.calls}")
            parts.append(f"tok {totals.prompt_tokens + totals.completion_tokens:,}")
            parts.append(f"retries {totals.retries}")
            parts.append(f"call errors {sum(totals.errors.values())}")
        if self.failed:
            parts.append(f"failed {self.unit} {self.source.failed_cells()}")
        return "  ".join(parts)

    async def tick(self) -> None:
        while True:
            self.progress.update(self.task, status=self.status_text(), left=self.left_text())
            self.progress.refresh()
            await asyncio.sleep(0.25)

    def poll(self) -> None:
        """Refresh the bar when a quarter of a second passed since the last refresh (a loop without an event loop)."""
        now = time.monotonic()
        if now - self.refreshed >= 0.25:
            self.refreshed = now
            self.progress.update(self.task, status=self.status_text(), left=self.left_text())
            self.progress.refresh()

    def close(self) -> None:
        self.progress.update(self.task, status=self.status_text(), left=self.left_text())
        self.progress.refresh()
        self.progress.stop()


Progress = ProgressBar | ProgressLines


def make_progress(source: ProgressSource, total: int, mode: bool | str, interval_s: float = PROGRESS_INTERVAL_S,
                  unit: str = "cells", calls: bool = True) -> Progress | None:
    """The progress display for ``total`` cells (or other ``unit``): a bar (``mode`` True, a terminal), lines every
    ``interval_s`` seconds (``mode`` :data:`PROGRESS_LINES`), or none (``mode`` False, or nothing to do);
    ``calls`` False leaves the model calls out."""
    if not mode or total == 0:
        return None
    if mode == PROGRESS_LINES:
        return ProgressLines(source, total, interval_s, unit, calls)
    return ProgressBar(source, total, unit, calls)


def progress_mode(enabled: bool) -> bool | str:
    """The display a job gets: a bar on a terminal (stderr), lines in a log or a pipe, none when disabled."""
    if not enabled:
        return False
    return True if sys.stderr.isatty() else PROGRESS_LINES


@contextlib.contextmanager
def ticking(progress: Progress | None) -> Iterator[Progress | None]:
    """Drive ``progress`` from a thread of its own while the block runs (for a job without an event loop),
    then close it: the last line or the finished bar is shown even when the block fails."""
    if progress is None:
        yield None
        return
    loop = asyncio.new_event_loop()
    task = loop.create_task(progress.tick())
    thread = threading.Thread(target=lambda: loop.run_until_complete(asyncio.wait([task])),
                              name="progress", daemon=True)
    thread.start()
    try:
        yield progress
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join()
        loop.close()
        progress.close()


# A read of fewer traces than this shows no progress (it is over in a few seconds).
READING_THRESHOLD = 2_000


@dataclass(frozen=True)
class _Reading:
    """A read's stand-in for a run in the progress displays: its name, no failed cells, no model calls."""

    name: str

    def failed_cells(self) -> int:
        return 0

    def client_totals(self) -> ClientStats | None:
        return None


@dataclass(frozen=True)
class _ReadingMode:
    mode: bool | str
    interval_s: float
    threshold: int


_READING: ContextVar[_ReadingMode | None] = ContextVar("commitbench_reading_progress", default=None)


@contextlib.contextmanager
def reading_progress(mode: bool | str, interval_s: float = PROGRESS_INTERVAL_S,
                     threshold: int | None = None) -> Iterator[None]:
    """Show the progress of the long trace reads made inside: a bar (``mode`` True), lines every ``interval_s``
    seconds (:data:`PROGRESS_LINES`), or nothing (False); a read of fewer than ``threshold`` traces
    (:data:`READING_THRESHOLD` by default) shows none."""
    limit = READING_THRESHOLD if threshold is None else threshold
    token = _READING.set(_ReadingMode(mode, interval_s, limit) if mode else None)
    try:
        yield
    finally:
        _READING.reset(token)


def reading(name: str, total: int) -> Progress | None:
    """The display for a read of ``total`` traces named ``name``, as :func:`reading_progress` asked (None: no
    display). The reader calls ``advance`` and ``poll`` after each trace, and ``close`` at the end."""
    asked = _READING.get()
    if asked is None or total < asked.threshold:
        return None
    if asked.mode == PROGRESS_LINES:
        return ProgressLines(_Reading(name), total, asked.interval_s, unit="traces", calls=False, verb="read",
                             failed=False, label=name)
    return ProgressBar(_Reading(name), total, unit="traces", calls=False, failed=False)
