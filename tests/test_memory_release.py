"""Freed memory handed back to the system between a report's phases."""

from __future__ import annotations

import platform
import sys

import pytest

from commitbench.memory import release_freed_memory


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's")
def test_memory_freed_in_small_pieces_goes_back_to_the_system() -> None:
    """Many small blocks freed (as parsed traces and rows are) stay with the C allocator until it is asked."""
    release_freed_memory()
    before = _rss_kib()
    pieces, kept = [], []
    for i in range(200_000):  # ~120 MiB of blocks, with a few small survivors among them (as a pass leaves)
        pieces.append(bytearray(600))
        if i % 50 == 0:
            kept.append(bytearray(40))
    grown = _rss_kib()
    del pieces
    assert release_freed_memory() is True
    assert grown - before > 60_000 and _rss_kib() < grown - 60_000, (before, grown, _rss_kib())
    assert len(kept) == 4_000
