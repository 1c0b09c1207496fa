"""Child processes that end with the process that started them.

A model server, a mock server or a self-test started by the harness must not outlive it, however it
ends (an exception, Ctrl-C, SIGKILL). On Linux the kernel can send the child a signal when its parent
dies (``PR_SET_PDEATHSIG``); :func:`die_with_parent` returns the ``preexec_fn`` that asks for it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["die_with_parent"]

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
