"""Whole files written by a thread while the caller makes the next: all written when the block ends, a failed
write raised to the caller, the caller's own error kept."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from commitbench.filethread import FileThread


def test_every_file_handed_over_is_written_when_the_block_ends(tmp_path: Path) -> None:
    with FileThread(waiting=2) as files:  # more files than may wait: the caller waits for the thread
        for number in range(20):
            files.put(tmp_path / f"{number}.bin", bytes([number]) * (number * 1000 + 1))
    assert sorted(int(p.stem) for p in tmp_path.iterdir()) == list(range(20))
    assert all((tmp_path / f"{n}.bin").read_bytes() == bytes([n]) * (n * 1000 + 1) for n in range(20))
    assert not any(t.name == "commitbench-files" for t in threading.enumerate())


def test_a_failed_write_is_raised_to_the_caller_and_nothing_after_it_is_written(tmp_path: Path) -> None:
    files = FileThread()
    files.put(tmp_path / "first.bin", b"1")
    files.put(tmp_path / "missing" / "second.bin", b"2")  # no such folder
    files.put(tmp_path / "third.bin", b"3")
    with pytest.raises(FileNotFoundError, match=r"second\.bin"):
        files.close()
    assert (tmp_path / "first.bin").read_bytes() == b"1"
    assert not (tmp_path / "third.bin").exists()
    with pytest.raises(FileNotFoundError):  # asked again: the same error
        files.close()
    with pytest.raises(RuntimeError, match="closed"):
        files.put(tmp_path / "late.bin", b"4")


def test_a_failed_write_is_raised_at_the_next_put(tmp_path: Path) -> None:
    files = FileThread(waiting=1)
    files.put(tmp_path / "missing" / "a.bin", b"a")
    with pytest.raises(FileNotFoundError):  # within a few puts at most: the thread writes in order
        for number in range(1000):
            files.put(tmp_path / f"{number}.bin", b"x")
    with pytest.raises(FileNotFoundError):
        files.close()


def test_the_callers_error_is_the_one_raised_and_what_it_handed_over_is_written(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="stop"), FileThread() as files:
        files.put(tmp_path / "kept.bin", b"k")
        files.put(tmp_path / "missing" / "lost.bin", b"l")
        raise KeyError("stop")
    assert (tmp_path / "kept.bin").read_bytes() == b"k"
