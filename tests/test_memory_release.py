"""Freed memory handed back to the system between a report's phases; the collector kept off the imports' objects."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

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


def test_a_command_freezes_what_its_imports_made_once_and_later_objects_are_still_collected() -> None:
    """In a fresh process (this one's collector is left as it is): the command line freezes the objects alive when
    the command starts and again when the suites are imported, a second freeze of a stage does nothing, and a cycle
    made afterwards is still collected."""
    script = textwrap.dedent("""
        import gc, weakref
        from commitbench.cli import main
        from commitbench.memory import freeze_startup_objects
        assert gc.get_freeze_count() == 0
        assert main(["plugins"]) == 0
        frozen = gc.get_freeze_count()
        assert frozen > 10_000, frozen
        assert freeze_startup_objects() is False and gc.get_freeze_count() == frozen
        assert freeze_startup_objects("suites") is False  # the plug-ins command imported the suites: frozen then
        assert freeze_startup_objects("another stage") is True and gc.get_freeze_count() >= frozen
        class Node:
            pass
        node = Node(); node.self = node
        gone = weakref.ref(node)
        del node
        gc.collect()
        assert gone() is None
        print("ok", frozen)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("ok ")
