"""The progress display's estimate of the time left, on the bar and on the plain lines."""

from __future__ import annotations

import time

import pytest

from commitbench.llm import ClientStats
from commitbench.progress import ProgressBar, ProgressLines, time_left


class Source:
    name = "demo"

    def failed_cells(self) -> int:
        return 0

    def client_totals(self) -> ClientStats | None:
        return None


def test_time_left_is_the_mean_pace_times_the_cells_left() -> None:
    assert time_left(0, 8, 12.0) is None
    assert time_left(2, 8, 60.0) == pytest.approx(180.0)
    assert time_left(8, 8, 240.0) == 0.0


def test_the_lines_estimate_once_a_cell_is_done() -> None:
    lines = ProgressLines(Source(), total=4)
    assert "left" not in lines.line()
    lines.started = time.monotonic() - 90.0
    lines.advance()
    assert "about 4:30 left" in lines.line()


def test_the_bar_shows_the_same_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    bar = ProgressBar(Source(), total=4)
    try:
        assert bar.left_text() == "time left: after the first cell"
        bar.started = time.monotonic() - 90.0
        bar.advance()
        assert bar.left_text() == "about 4:30 left"
        for _ in range(3):
            bar.advance()
        assert bar.left_text() == "done"
    finally:
        bar.close()
    assert "done" in capsys.readouterr().err
