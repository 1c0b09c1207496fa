"""Tasks made in a pool of forked processes, their results given back in order, a few in flight at a time.

The readers of a large run (:func:`commitbench.traces.map_latest_traces`, the line check of
:func:`commitbench.linechunks.map_line_chunks`) hand ranges of a file to one process per core and use what
comes back in file order. :func:`ordered_map` is that loop, once: at most ``ahead`` tasks a process are in
flight (what waits in this process stays bounded however slowly the results are used), the processes are
forked (what ``task`` reads was set up before the first task and is inherited, not sent; the collector leaves
what they inherited alone) and die with this process, however it ends.

It runs on :class:`concurrent.futures.ProcessPoolExecutor`. :class:`multiprocessing.pool.Pool` was used
before: its worker-handling thread wakes whenever a result waits to be read, so while large results stream
back it spins, taking about a second and a half of one core (and the interpreter's lock) from a read of
100,000 traces. The executor reads each result as it arrives, and a worker that dies (killed, out of memory)
raises :class:`~concurrent.futures.process.BrokenProcessPool` here instead of leaving the read waiting.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import TypeVar

from commitbench.memory import keep_inherited
from commitbench.processes import die_with_parent

__all__ = ["can_fork", "ordered_map", "widen_result_pipe"]

A = TypeVar("A")
R = TypeVar("R")

AHEAD = 2  # tasks in flight per process


def _worker_start(bound: Callable[[], None] | None) -> Callable[[], None]:
    """What a worker does first: keep the collector off what it inherited (:func:`commitbench.memory.keep_inherited`),
    then ``bound`` (:func:`commitbench.processes.die_with_parent`'s call, when there is one)."""

    def start() -> None:
        keep_inherited()
        if bound is not None:
            bound()

    return start


# The pipe the results come back through, widened to this many bytes where the system allows (Linux): a chunk's
# result of about a megabyte then crosses in one or two writes instead of sixteen, each waking the reader.
RESULT_PIPE_BYTES = 1 << 20


def widen_result_pipe(executor: ProcessPoolExecutor, size: int = RESULT_PIPE_BYTES) -> int | None:
    """Widen the pipe ``executor``'s workers send their results through to ``size`` bytes; the size it has then,
    or None where it cannot be changed (no ``F_SETPIPE_SZ``, a size over the system's limit, or an executor made
    otherwise). Only the speed depends on it: a pipe left as it is carries the same results.

    The pipe is the executor's own (``_result_queue``, a :class:`multiprocessing.SimpleQueue`): a test checks
    that it is still found there.
    """
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        return None
    command = getattr(fcntl, "F_SETPIPE_SZ", None)
    reader = getattr(getattr(executor, "_result_queue", None), "_reader", None)
    if command is None or reader is None:
        return None
    try:
        return int(fcntl.fcntl(reader.fileno(), command, size))
    except OSError:  # over /proc/sys/fs/pipe-max-size for this user, or the pipe's pages are not to be had
        return None


def can_fork() -> bool:
    """Whether this platform can fork processes (the pool needs it: its tasks read what was set up before)."""
    return "fork" in multiprocessing.get_all_start_methods()


def ordered_map(
    task: Callable[[A], R], items: Iterable[A], workers: int, ahead: int = AHEAD,
) -> Generator[R, None, None]:
    """``task(item)`` of each item, made in ``workers`` forked processes, in the order of ``items``.

    ``task`` must be a module-level function (it is sent by name); whatever it reads besides its item is set
    before this generator starts and is inherited by the processes. An exception raised by a task is raised
    here, when its result's turn comes. At most ``ahead`` tasks a process are in flight. Leaving early (an
    error, a consumer that stops) cancels what has not started and waits for the tasks still running (at most
    ``ahead`` a process).
    """
    pending: deque[Future[R]] = deque()
    executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_worker_start(die_with_parent()))
    widen_result_pipe(executor)
    try:
        source = iter(items)
        pending.extend(executor.submit(task, item) for item in islice(source, ahead * workers))
        while pending:
            result = pending.popleft().result()
            pending.extend(executor.submit(task, item) for item in islice(source, 1))  # the next one, if any
            yield result
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
