"""Waiting for a child server's ready line: it comes, the child dies first, or the child stays silent."""

from __future__ import annotations

import subprocess
import sys

import pytest

from commitbench.processes import die_with_parent, wait_for_line


def child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, bufsize=1,
                            preexec_fn=die_with_parent())


def test_the_ready_line_is_found_after_other_output() -> None:
    proc = child("print('starting'); print('listening on http://127.0.0.1:1/v1', flush=True); "
                 "import time; time.sleep(30)")
    try:
        ready = wait_for_line(proc, "listening on ", timeout_s=30)
        assert ready.value == "http://127.0.0.1:1/v1"
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_child_that_ends_first_gives_its_last_line() -> None:
    proc = child("print('port already in use', flush=True)")
    ready = wait_for_line(proc, "listening on ", timeout_s=30)
    assert ready.value is None
    assert ready.last_line.strip() == "port already in use"
    assert proc.wait(timeout=30) == 0


SILENT = "import time; time.sleep(60)"


@pytest.mark.parametrize("code", [SILENT, "print('loading', flush=True); " + SILENT])
def test_a_silent_child_does_not_hold_the_caller_past_the_deadline(code: str) -> None:
    proc = child(code)
    try:
        ready = wait_for_line(proc, "listening on ", timeout_s=0.5)
        # The child is still alive: a blocking read of its stdout would still be waiting.
        assert proc.poll() is None
        assert ready.value is None
    finally:
        proc.kill()
        proc.wait()
