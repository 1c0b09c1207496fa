"""One piece of work done in a forked process while this one goes on (a report's figure drawn while its tables
are computed on the other core).

:func:`aside` starts ``work()`` in a forked child (which sees this process's memory as it is now, so the
work needs no pickling; only its result is pickled back) and returns at once; :meth:`Aside.result` waits for
the result, or raises the error ``work()`` raised, as if it had run here. The child dies with this process,
however it ends. Where a second process would not help (one core) or cannot be forked (no ``fork``; a pool's
worker, which may not have children), ``work()`` runs here, at once, and :meth:`Aside.result` gives what it
gave.
"""

from __future__ import annotations

import os
import pickle
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

__all__ = ["Aside", "aside", "can_fork_aside"]

T = TypeVar("T")
_OK, _ERROR = "ok", "error"


def can_fork_aside() -> bool:
    """Whether :func:`aside` forks: at least two cores this process may use, ``fork`` available, and this process
    not a daemonic one (a pool's worker, which multiprocessing forbids to have children)."""
    import multiprocessing

    from commitbench.traces import pool_workers

    return (pool_workers() >= 2 and "fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _child(work: Callable[[], Any], writer: Connection, parent: int) -> None:
    from commitbench.memory import keep_inherited
    from commitbench.processes import end_with_parent

    keep_inherited()
    end_with_parent(parent)
    try:
        answer: tuple[str, Any] = (_OK, work())
    except BaseException as exc:  # handed to the parent, which raises it where it asks for the result
        text = "".join(traceback.format_exception(exc))
        try:
            pickle.dumps(exc)
            answer = (_ERROR, (exc, text))
        except Exception:  # an exception that does not pickle: its type's name and words, as a RuntimeError
            answer = (_ERROR, (RuntimeError(f"{type(exc).__name__}: {exc}"), text))
    try:
        writer.send(answer)
    except Exception as exc:  # the result itself does not pickle
        writer.send((_ERROR, (RuntimeError(f"the result of {work!r} could not be sent back: {exc}"), "")))
    finally:
        writer.close()


class Aside(Generic[T]):
    """``work()`` under way in a forked process, or already done here (see the module doc)."""

    def __init__(self, work: Callable[[], T], fork: bool) -> None:
        self._name = getattr(work, "__qualname__", repr(work))
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._process: Any = None
        self._reader: Connection | None = None
        if not fork:
            try:
                self._value = work()
            except Exception as exc:  # raised where the result is asked for, as a forked run would
                self._error = exc
            self._done = True
            return
        import multiprocessing

        context = multiprocessing.get_context("fork")
        reader, writer = context.Pipe(duplex=False)
        self._process = context.Process(target=_child, args=(work, writer, os.getpid()), daemon=True,
                                        name=f"aside: {self._name}")
        self._process.start()
        writer.close()  # the child holds the only writing end: its death reads as the end of the pipe
        self._reader = reader

    @property
    def forked(self) -> bool:
        """Whether the work ran in a forked process."""
        return self._process is not None

    def cancel(self) -> None:
        """Stop the work if it is still under way: its process is killed and waited for, and its result, if asked
        for, is an error. Work already done (or done here) is left as it is."""
        if self._done:
            return
        self._process.kill()
        self._process.join()
        assert self._reader is not None
        self._reader.close()
        self._error = RuntimeError(f"{self._name} was cancelled")
        self._done = True

    def result(self) -> T:
        """The work's result (waiting for it); the work's error is raised here, with the child's traceback as a
        note."""
        if not self._done:
            assert self._reader is not None
            try:
                kind, payload = self._reader.recv()
            except EOFError:
                self._process.join()
                self._error = RuntimeError(
                    f"the process doing {self._name} ended (exit code {self._process.exitcode}) without an answer")
            else:
                self._process.join()
                if kind == _OK:
                    self._value = payload
                else:
                    error, text = payload
                    if text:
                        error.add_note(f"raised in the forked process doing {self._name}:\n{text}")
                    self._error = error
            finally:
                self._reader.close()
                self._done = True
        if self._error is not None:
            raise self._error
        return self._value


def aside(work: Callable[[], T], fork: bool | None = None) -> Aside[T]:
    """Start ``work()`` in a forked process (``fork``: None, where :func:`can_fork_aside`; False, here and now)."""
    return Aside(work, can_fork_aside() if fork is None else fork)
