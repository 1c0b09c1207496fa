"""Freed memory handed back to the system between the phases of a long read.

A report streams a run's traces into a frame and then computes its tables. The streaming phase frees
most of what it allocated (parsed traces, rows, the columns a frame is assembled from), but the C
allocator keeps freed memory for its own reuse, so a process's resident memory stays at its high-water
mark and the tables are computed on top of it. :func:`release_freed_memory` runs the collector and asks
glibc's allocator to give its free pages back (``malloc_trim``): the phase after starts from what is
still in use, not from the peak of the phase before.

:func:`freeze_startup_objects` keeps the collector off what a command's imports made (modules, classes,
schemas: about 110,000 tracked objects for ``report``, alive until the process ends). Without it, every full
collection walks them with all made since (about 50 ms each, ten or so in a report over 100,000 traces).
The command line freezes when a command starts, and the suite registry again when it has imported the
suites' plug-ins, which ``view`` and ``report`` do after they started: before that second freeze, the full
collections of the main process of a ``view`` of 100,000 traces took 0.39 s, after it 0.07 s.

:func:`keep_inherited` does the same in a forked child for everything it inherited (a read's worker inherits
the command's modules and what the command set up before it forked, and frees none of it): its collections
walk only what it makes itself. A full collection in a worker of a read of 100,000 traces took about 40 ms,
four times in each worker, and touched (so copied) the pages it shared with its parent.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from functools import cache

__all__ = ["freeze_startup_objects", "keep_inherited", "release_freed_memory"]

_frozen: set[str] = set()  # the stages frozen in this process


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


def freeze_startup_objects(stage: str = "command") -> bool:
    """Move every object tracked now to the collector's permanent generation (``gc.freeze``), once per process and
    ``stage`` (a later call for the same stage does nothing and returns False): call it when a stage's imports are
    done and the work begins. The command line does it when a command starts (stage ``command``) and the suite
    registry when it has imported the suites' plug-ins (stage ``suites``: most of the package, imported by the
    commands that read runs after they started). Objects made afterwards are collected as before."""
    if stage in _frozen:
        return False
    gc.freeze()
    _frozen.add(stage)
    return True


def keep_inherited() -> None:
    """In a forked child, first thing: move every object tracked now (what the parent made) to the collector's
    permanent generation. The move relinks the generations' lists only, so the pages the child shares with its
    parent stay shared."""
    gc.freeze()
