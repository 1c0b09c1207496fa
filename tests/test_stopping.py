"""SIGTERM stops a command as Ctrl-C does (commitbench.stopping): the command unwinds, its forked children do not."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest

from commitbench.stopping import Terminated, sigterm_unwinds

pytestmark = pytest.mark.skipif(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL,
                                reason="this test process already handles SIGTERM")


def test_sigterm_in_the_block_unwinds_it_and_the_default_comes_back_after(tmp_path: Path) -> None:
    made: list[Path] = []
    with pytest.raises(Terminated), sigterm_unwinds(), tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        made.append(Path(scratch))
        (Path(scratch) / "half-written").write_text("x")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler raises here, at the latest
    assert made and not made[0].exists()  # the with block's cleanup ran
    assert isinstance(Terminated(), KeyboardInterrupt)  # whatever stops on Ctrl-C stops on it too
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_process_forked_in_the_block_keeps_the_default_and_dies_of_sigterm() -> None:
    with sigterm_unwinds():
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:  # the child: say whether SIGTERM has its default, then wait to be sent it
            os.close(reader)
            os.write(writer, b"default" if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else b"handled")
            os.close(writer)
            time.sleep(30)
            os._exit(0)
        os.close(writer)
        said = os.read(reader, 16)
        os.close(reader)
        os.kill(child, signal.SIGTERM)
        _, status = os.waitpid(child, 0)
    assert said == b"default"
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


def test_a_handler_already_installed_is_left_as_it_is() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with sigterm_unwinds():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGTERM)  # ignored, as before: no Terminated
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_outside_the_main_thread_nothing_changes() -> None:
    seen: list[object] = []

    def other() -> None:
        with sigterm_unwinds():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [signal.SIG_DFL]
