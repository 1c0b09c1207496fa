"""The forked pool the readers of large runs share: results in order, a bounded number in flight, errors raised
where the result's turn comes, a worker that dies reported instead of waited for."""

from __future__ import annotations

import fcntl
import gc
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from commitbench.forkpool import RESULT_PIPE_BYTES, can_fork, ordered_map, widen_result_pipe

pytestmark = pytest.mark.skipif(not can_fork(), reason="the pool forks its processes")

_MARKS: Path | None = None  # set before the pool forks: where each task leaves a file when it starts


def _square(item: int) -> int:
    if _MARKS is not None:
        (_MARKS / str(item)).touch()
    time.sleep(0.002 * (item % 3))  # uneven tasks: a later one often ends first
    return item * item


def _fails_at_five(item: int) -> int:
    if item == 5:
        raise ValueError(f"item {item} is bad")
    return item


def _dies_at_three(item: int) -> int:
    if item == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return item


def _inherited_and_collected(item: int) -> tuple[int, int]:
    """In a worker: the objects frozen (inherited), and whether a cycle made here is still collected."""

    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]
    del node
    return gc.get_freeze_count(), gc.collect()


def test_a_worker_keeps_the_collector_off_what_it_inherited_and_collects_what_it_makes() -> None:
    already = gc.get_freeze_count()  # frozen here before (a command run earlier in this process)
    tracked = len(gc.get_objects())  # tracked now: a worker inherits these at its fork, and most are still alive
    for frozen, collected in ordered_map(_inherited_and_collected, range(4), workers=2):
        assert frozen >= already + tracked * 0.9, (frozen, already, tracked)
        assert collected >= 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_the_executors_result_pipe_is_found_and_widened() -> None:
    """The pipe is the executor's own attribute: if a Python release moved it, this says so (the pool would only
    be slower)."""
    limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    wanted = min(RESULT_PIPE_BYTES, limit)
    executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    try:
        size = widen_result_pipe(executor, wanted)
        assert size is not None and size >= wanted
        reader = executor._result_queue._reader  # type: ignore[attr-defined]
        assert fcntl.fcntl(reader.fileno(), fcntl.F_GETPIPE_SZ) == size
        assert widen_result_pipe(executor, limit * 2) is None  # over the system's limit: left as it was
        assert fcntl.fcntl(reader.fileno(), fcntl.F_GETPIPE_SZ) == size
    finally:
        executor.shutdown()


def test_results_come_in_the_order_of_the_items() -> None:
    assert list(ordered_map(_square, range(40), workers=2)) == [i * i for i in range(40)]


def test_no_items_no_results() -> None:
    assert list(ordered_map(_square, [], workers=2)) == []


def test_a_task_error_is_raised_when_its_turn_comes() -> None:
    seen: list[int] = []
    with pytest.raises(ValueError, match="item 5 is bad"):
        for value in ordered_map(_fails_at_five, range(20), workers=2):
            seen.append(value)
    assert seen == [0, 1, 2, 3, 4]  # every result before the failing one was given


def test_a_worker_that_dies_is_an_error_not_a_wait() -> None:
    started = time.monotonic()
    with pytest.raises(BrokenProcessPool):
        list(ordered_map(_dies_at_three, range(20), workers=2))
    assert time.monotonic() - started < 60


def test_at_most_ahead_tasks_a_process_start_and_a_consumer_that_stops_cancels_the_rest(tmp_path: Path) -> None:
    global _MARKS
    _MARKS = tmp_path
    try:
        results = ordered_map(_square, range(100), workers=2, ahead=2)
        assert next(results) == 0
        time.sleep(0.5)  # the pool has had time to run whatever it was given
        assert len(list(tmp_path.iterdir())) <= 5  # four in flight at first, one more for the result taken
        results.close()
        time.sleep(0.2)
        assert len(list(tmp_path.iterdir())) <= 5  # nothing started after the consumer stopped
    finally:
        _MARKS = None
