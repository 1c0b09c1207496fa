"""A command asked to stop by SIGTERM stops as it does on Ctrl-C.

Python turns Ctrl-C (SIGINT) into :class:`KeyboardInterrupt`, so ``with`` blocks and ``finally`` clauses run on the
way out: scratch directories are removed, pools are shut down, a half-written site is left marked as such. SIGTERM
(``kill``, ``timeout``, a batch scheduler ending a job) kills the process outright by default, and all of that is
skipped. While :func:`sigterm_unwinds` is active, SIGTERM raises :class:`Terminated` (a KeyboardInterrupt) in the
main thread instead.

Only the process that entered the block is changed: a process forked from it is given SIGTERM's default back
as it starts, so pool workers and forked helpers still end at once when they are sent it. Code that installs
its own SIGTERM handler while the block is active (an asyncio loop's, a server's) takes precedence while it is
installed.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["TERMINATED_EXIT", "Terminated", "sigterm_unwinds"]

TERMINATED_EXIT = 128 + signal.SIGTERM  # the exit status a shell reports for a process ended by SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised in the main thread so that the command stops as on Ctrl-C."""


_owner: int | None = None  # the process whose handler is ours (None: none installed)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _owner:  # a forked process that has not reset its handler yet: the default, at once
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise Terminated()


def _default_in_child() -> None:
    if signal.getsignal(signal.SIGTERM) is _raise_terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_in_child)


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (see the module doc). Elsewhere than
    in the main thread, or where SIGTERM already has a handler other than the default, nothing changes."""
    global _owner
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    _owner = os.getpid()
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is _raise_terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _owner = None
