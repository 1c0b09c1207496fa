"""Whole files written by a thread of their own while the caller makes the next ones.

``commitbench view`` writes a thousand files of about half a megabyte while it reads a large run. Creating a
file in a folder that is being filled waits on the file system (a third of a millisecond at the median,
several milliseconds at times, while the disk takes what came before: 0.67 s in all for a site of 100,000
runs), and a build that waits there makes no progress meanwhile. :class:`FileThread` takes each file's
bytes and writes them from one thread, in the order given, so that the wait overlaps the building of the
files after it (the wait releases the interpreter's lock).

At most :data:`WAITING` files wait for the thread (a caller that gets ahead waits for it: memory stays
bounded). A write that fails is raised to the caller at its next :meth:`FileThread.put` or at
:meth:`FileThread.close`, as the error it was (an :class:`OSError`, say); the files after it are not written.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["WAITING", "FileThread"]

WAITING = 8  # files handed over and not yet written, at most


class FileThread:
    """A thread writing whole files in the order given; use as a context manager (its exit waits for them)."""

    def __init__(self, name: str = "commitbench-files", waiting: int = WAITING) -> None:
        self._queue: queue.Queue[tuple[Path, bytes] | None] = queue.Queue(maxsize=waiting)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is not None:  # drained without writing: a caller waiting on a full queue goes on
                continue
            path, data = item
            try:
                path.write_bytes(data)
            except BaseException as exc:  # kept for the caller; the thread goes on draining
                self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def put(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` (its folder must exist) after the files handed over before it; raises the
        error of a write that failed before."""
        if self._closed:
            raise RuntimeError("this file thread is closed")
        self._raise()
        self._queue.put((path, data))

    def close(self) -> None:
        """Wait until every file handed over is written (or the thread stopped at an error), then raise that
        error, if any. A second call only raises it again."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
        self._raise()

    def __enter__(self) -> FileThread:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.close()
            return
        # Leaving on an error: the files already handed over are still written (or given up), and the error that
        # ends the block is the one raised.
        with contextlib.suppress(Exception):
            self.close()
