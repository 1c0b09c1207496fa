"""Freed memory handed back to the system between the phases of a long read.

A report streams a run's traces into a frame and then computes its tables. The streaming phase frees
most of what it allocated (parsed traces, rows, the columns a frame is assembled from), but the C
allocator keeps freed memory for its own reuse, so a process's resident memory stays at its high-water
mark and the tables are computed on top of it. :func:`release_freed_memory` runs the collector and asks
glibc's allocator to give its free pages back (``malloc_trim``): the phase after starts from what is
still in use, not from the peak of the phase before.

:func:`freeze_startup_objects` keeps the collector off what a command's imports made (modules, classes,
schemas: about 110,000 tracked objects for ``report``, alive until the process ends). Without it, every full
collection walks them with all made since (about 50 ms each, ten or so in a report over 100,000 traces), and
so does each collection in a forked worker, which also copies the pages it touches.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from functools import cache

__all__ = ["freeze_startup_objects", "release_freed_memory"]

_frozen = False


@cache
def _malloc_trim() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # another C library (musl has none)
        return None


def release_freed_memory() -> bool:
    """Collect garbage, then have the C allocator return its free memory to the system; False where the C
    library cannot be asked (the collection still ran)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)  # type: ignore[operator]
    return True


def freeze_startup_objects() -> bool:
    """Move every object tracked now to the collector's permanent generation (``gc.freeze``), once per process
    (a later call does nothing and returns False): call it when the imports are done and the work begins.
    Objects made afterwards are collected as before."""
    global _frozen
    if _frozen:
        return False
    gc.freeze()
    _frozen = True
    return True
