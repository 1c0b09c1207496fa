"""Child processes that end with the process that started them, and that say when they are ready.

A model server, a mock server or a self-test started by the harness must not outlive it, however it
ends (an exception, Ctrl-C, SIGKILL). On Linux the kernel can send the child a signal when its parent
dies (``PR_SET_PDEATHSIG``); :func:`die_with_parent` returns the ``preexec_fn`` that asks for it.
Servers that print a line when they listen (the mock server, the gateway) are waited for by
:func:`wait_for_line`, which gives up at its deadline even when the child prints nothing.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ReadyLine", "die_with_parent", "end_with_parent", "wait_for_line"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when its parent dies (Linux; else None).

    libc is looked up here, in the parent; the child only makes one system call and checks that the
    parent did not die before it was made (then nobody would send the signal). The kernel watches the
    thread that started the child: start long-lived children from a thread that lives as long as they
    are needed (the main thread).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def end_with_parent(parent: int) -> None:
    """In a child already running (a pool's worker): have the kernel SIGKILL it when ``parent`` dies (Linux).

    ``parent`` is the pid the child expects as its parent; a child whose parent is already gone ends now.
    Elsewhere, or where libc cannot be reached, nothing is asked (the child ends when its work queue closes).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


@dataclass(frozen=True)
class ReadyLine:
    """What :func:`wait_for_line` saw: the awaited line's text after the prefix (None when it never came),
    and the last line the child printed (for the error message)."""

    value: str | None
    last_line: str


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout_s: float) -> ReadyLine:
    """Read ``proc``'s text stdout until a line starts with ``prefix``, the child ends, or ``timeout_s`` pass.

    The lines are read by a daemon thread, so the deadline holds even when the child stays alive and
    prints nothing (a blocking read would wait for it). The thread stops reading at the awaited line;
    after a timeout it ends when the caller stops the child (its stdout then closes).
    """
    if proc.stdout is None:
        raise ValueError("the child's stdout is not a pipe")
    stdout = proc.stdout
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stdout:
            lines.put(line)
            if line.startswith(prefix):
                return
        lines.put("")  # end of output: the child closed its stdout or ended

    threading.Thread(target=read, name="wait-for-line", daemon=True).start()
    deadline = time.monotonic() + timeout_s
    last = ""
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if not line:
            break
        last = line
        if line.startswith(prefix):
            return ReadyLine(line[len(prefix):].strip(), last)
    return ReadyLine(None, last)

