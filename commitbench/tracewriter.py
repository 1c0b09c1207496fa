"""The one writer of a run's ``traces.jsonl``: finished cells' lines appended in batches, off the event loop.

Players hand over traces already serialised, so the queue holds text. The queue is bounded: a player
that finishes while it is full waits until the disk has taken a batch (backpressure), so a replay
served from the cache cannot pile finished traces up in memory. The run's counters move when a batch
is on disk. When an append fails (the disk is full, the directory became read-only), the writer
reports it once through ``on_error`` and then drains the queue without writing, so that no player
waits forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from commitbench import jsonl

__all__ = ["WRITE_QUEUE_LINES", "PlayCounters", "TraceSink", "TraceWriter"]

# Finished traces waiting for the writer, at most; a player that finishes while the queue is full
# waits for the disk (backpressure), so memory does not grow with the number of cells.
WRITE_QUEUE_LINES = 128
# Failure messages a run keeps to show (the count goes on).
KEPT_FAILURES = 20


@dataclass
class PlayCounters:
    """What a run keeps of finished cells: counts, and the first few failure messages."""

    done: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        """Count a cell that ended with an infrastructure error (keeping the first few messages)."""
        self.failed += 1
        if len(self.failures) < KEPT_FAILURES:
            self.failures.append(message)


class TraceSink(Protocol):
    """Where a player hands a finished cell's trace line: the run's trace writer, or (in a worker of a
    distributed run) the stream back to the driver, which alone writes the run directory."""

    async def put(self, line: str, failure: str, run_key: str) -> None: ...


class TraceWriter:
    """Appends finished traces to ``path`` in batches from a worker thread (one fsync per batch); a
    :class:`TraceSink`. Call :meth:`start` on the running loop and :meth:`close` at the end."""

    def __init__(
        self, path: Path, counters: PlayCounters, on_error: Callable[[str], None], max_lines: int | None = None
    ) -> None:
        self.path = path
        self.counters = counters
        self.on_error = on_error
        self.queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue(max_lines or WRITE_QUEUE_LINES)
        self.written = 0
        self.error: str | None = None
        self.task: asyncio.Task[None] | None = None
        self._late: list[tuple[str, str]] = []  # at most one line per stopped player

    def start(self) -> None:
        """Start writing (on the running event loop)."""
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def put(self, line: str, failure: str, run_key: str = "") -> None:
        """Queue one trace line (``failure``: '' for a good cell, else why it failed); waits while the queue is full.

        The file needs only the line (``run_key`` is for sinks that keep count of cells).

        A player stopped (Ctrl-C) while it waits hands its finished line over all the same: it is
        written when the writer closes.
        """
        if self.task is not None and self.task.done():
            return  # the writer is gone: nothing can be written any more
        try:
            await self.queue.put((line, failure))
        except asyncio.CancelledError:
            self._late.append((line, failure))
            raise

    async def _run(self) -> None:
        while True:
            first = await self.queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while not self.queue.empty():
                item = self.queue.get_nowait()
                if item is None:
                    stop = True
                    break
                batch.append(item)
            await self._write(batch)
            if stop:
                return

    async def _write(self, batch: list[tuple[str, str]]) -> None:
        if self.error is not None or not batch:
            return
        try:
            await asyncio.to_thread(jsonl.append_lines, self.path, [line for line, _ in batch])
        except Exception as exc:  # disk full, read-only, I/O error: the run cannot go on
            self.error = f"cannot write {self.path}: {type(exc).__name__}: {exc}"
            self.on_error(self.error)
            return
        self.written += len(batch)
        for _, failure in batch:
            if failure:
                self.counters.fail(failure)
            else:
                self.counters.done += 1

    async def close(self) -> None:
        """Write what is queued (and the lines of players stopped while waiting), then stop."""
        if self.task is None:
            return
        if not self.task.done():
            await self.queue.put(None)
        await asyncio.shield(self.task)
        late, self._late = self._late, []
        await self._write(late)
