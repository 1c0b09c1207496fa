"""A run's progress display: a bar on a terminal, a plain line every so often in a log or a pipe.

Both show the cells done of those to play, the model calls, the time elapsed and an estimate of the
time left (the mean time per finished cell so far, times the cells still to play: rough while few
cells are done, and shown only once one is).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Protocol

from commitbench.llm import ClientStats

__all__ = ["PROGRESS_INTERVAL_S", "PROGRESS_LINES", "Progress", "ProgressBar", "ProgressLines", "ProgressSource",
           "make_progress", "time_left"]

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
    seconds (cells done, model calls, elapsed time, time left), and one at the end."""

    def __init__(self, source: ProgressSource, total: int, interval_s: float = PROGRESS_INTERVAL_S) -> None:
        self.source = source
        self.total = total
        self.interval_s = interval_s
        self.done = 0
        self.started = time.monotonic()

    def advance(self) -> None:
        self.done += 1

    def line(self) -> str:
        """The progress line as it would be printed now."""
        totals = self.source.client_totals()
        calls = totals.calls if totals is not None else 0
        elapsed = time.monotonic() - self.started
        left = time_left(self.done, self.total, elapsed)
        estimate = f", about {_clock(left)} left" if left is not None and self.done < self.total else ""
        return (f"progress: {self.done}/{self.total} cells done, {calls} model calls, {elapsed:.0f} s elapsed"
                f"{estimate}, {self.source.failed_cells()} failed")

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            print(self.line(), file=sys.stderr, flush=True)

    def close(self) -> None:
        print(self.line(), file=sys.stderr, flush=True)


class ProgressBar:
    """A rich progress bar refreshed from the event loop (no refresh thread)."""

    def __init__(self, source: ProgressSource, total: int) -> None:
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
        self.done = 0
        self.started = time.monotonic()
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
            return "time left: after the first cell"
        return f"about {_clock(left)} left" if self.done < self.total else "done"

    def status_text(self) -> str:
        """The counters shown beside the bar."""
        totals = self.source.client_totals()
        parts = []
        if totals is not None:
            parts.append(f"{totals.calls_per_s:6.1f} calls/s")
            parts.append(f"cache {totals.cache_hits}/{totals.calls}")
            parts.append(f"tok {totals.prompt_tokens + totals.completion_tokens:,}")
            parts.append(f"retries {totals.retries}")
            parts.append(f"call errors {sum(totals.errors.values())}")
        parts.append(f"failed cells {self.source.failed_cells()}")
        return "  ".join(parts)

    async def tick(self) -> None:
        while True:
            self.progress.update(self.task, status=self.status_text(), left=self.left_text())
            self.progress.refresh()
            await asyncio.sleep(0.25)

    def close(self) -> None:
        self.progress.update(self.task, status=self.status_text(), left=self.left_text())
        self.progress.refresh()
        self.progress.stop()


Progress = ProgressBar | ProgressLines


def make_progress(source: ProgressSource, total: int, mode: bool | str,
                  interval_s: float = PROGRESS_INTERVAL_S) -> Progress | None:
    """The progress display for ``total`` cells: a bar (``mode`` True, a terminal), lines every ``interval_s``
    seconds (``mode`` :data:`PROGRESS_LINES`), or none (``mode`` False, or nothing to play)."""
    if not mode or total == 0:
        return None
    if mode == PROGRESS_LINES:
        return ProgressLines(source, total, interval_s)
    return ProgressBar(source, total)
