"""Work done in a forked process while the caller goes on: its result, its errors, its death, and a report's
figure drawn that way (the same file as one drawn in place)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from commitbench.analysis.followup.metrics import LabelledResponse
from commitbench.analysis.followup.report import (
    FIGURE_FILE,
    build_followup_report,
    outcome_figure,
    write_followup_files,
)
from commitbench.analysis.tables import ReportFigure, started_figure
from commitbench.aside import aside, can_fork_aside

needs_fork = pytest.mark.skipif(not can_fork_aside(), reason="one core, or no fork: aside runs the work in place")


class Unpicklable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()  # a lock does not pickle

    def __reduce__(self) -> tuple[type, tuple[str]]:
        raise TypeError("this error does not pickle")


def _fail() -> None:
    raise KeyError("episode e7 is not in the compiled episodes")


def _unpicklable() -> None:
    raise Unpicklable("held a lock")


@needs_fork
def test_the_work_runs_in_another_process_and_its_result_comes_back() -> None:
    big = list(range(100_000))  # what the work reads is this process's memory at the fork: nothing is sent
    running = aside(lambda: (os.getpid(), os.getppid(), sum(big)))
    assert running.forked
    pid, parent, total = running.result()
    assert pid != os.getpid() and parent == os.getpid()
    assert total == sum(big)
    assert running.result() == (pid, parent, total)  # asked again: the same answer, not a second wait


@needs_fork
def test_the_work_keeps_the_collector_off_what_it_inherited() -> None:
    import gc

    already, tracked = gc.get_freeze_count(), len(gc.get_objects())
    frozen = aside(gc.get_freeze_count).result()
    assert frozen >= already + tracked * 0.9, (frozen, already, tracked)


@needs_fork
def test_an_error_of_the_work_is_raised_where_the_result_is_asked_for() -> None:
    running = aside(_fail)
    with pytest.raises(KeyError, match="e7 is not in the compiled episodes") as caught:
        running.result()
    assert any("raised in the forked process doing _fail" in note and "_fail" in note
               for note in caught.value.__notes__)


@needs_fork
def test_an_error_that_does_not_pickle_comes_back_as_a_runtime_error_naming_it() -> None:
    with pytest.raises(RuntimeError, match="Unpicklable: held a lock"):
        aside(_unpicklable).result()


@needs_fork
def test_a_result_that_does_not_pickle_is_an_error_not_a_hang() -> None:
    with pytest.raises(RuntimeError, match="could not be sent back"):
        aside(threading.Lock).result()


@needs_fork
def test_a_child_that_dies_without_answering_is_an_error_naming_its_exit() -> None:
    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(RuntimeError, match=r"ended \(exit code -9\) without an answer"):
        aside(die).result()


def test_without_a_fork_the_work_runs_here_at_once_and_its_error_waits_for_the_result() -> None:
    done: list[int] = []
    running = aside(lambda: done.append(os.getpid()) or len(done), fork=False)
    assert not running.forked
    assert done == [os.getpid()]  # ran before aside returned
    assert running.result() == 1
    failed = aside(_fail, fork=False)  # no error yet
    with pytest.raises(KeyError, match="e7"):
        failed.result()


def _rows() -> list[LabelledResponse]:
    out = []
    for i, (setup, outcome) in enumerate([("C0", "empty"), ("C0", "deferral"), ("C1", "false_claim"),
                                          ("C1", "anchored"), ("C2", "done_now"), ("C2", "empty")]):
        out.append(LabelledResponse(
            request_id=f"r{i}", category="reminder", source="slurp", setup=setup, variant="inferred",
            persona="generic", model="m", outcome=outcome, doability="not_doable", false_action_claim=False,
            asks_clarification=False, n_agent_commitments=1, n_user_conditional=0, n_empty=int(outcome == "empty"),
            n_empty_capability=0, n_empty_agentive=0, n_empty_temporal=0, n_needing_call=0, n_unanchored=0))
    return out


@pytest.mark.parametrize("fork", [True, False])
def test_a_started_figure_is_the_file_a_figure_drawn_in_place_is(tmp_path: Path, fork: bool) -> None:
    if fork and not can_fork_aside():
        pytest.skip("one core, or no fork")
    rows = _rows()
    report = build_followup_report(rows, 0, "run", "rules", "offline baseline checker", n_boot=10)
    in_place = write_followup_files(report, rows, tmp_path / "in-place")
    started = started_figure(outcome_figure(rows, "rules", "offline baseline checker"), tmp_path / "started") \
        if fork else outcome_figure(rows, "rules", "offline baseline checker")
    aside_files = write_followup_files(report, rows, tmp_path / "started", outcome=started)
    assert Path(aside_files["figure"][0]) == tmp_path / "started" / FIGURE_FILE
    assert set(in_place) == set(aside_files)
    for name, paths in in_place.items():
        for path in paths:
            twin = tmp_path / "started" / Path(path).name
            assert twin.read_bytes() == Path(path).read_bytes(), name


@needs_fork
def test_a_started_figure_asked_for_at_another_path_or_failing_raises(tmp_path: Path) -> None:
    started = started_figure(ReportFigure("figure", "f.png", lambda path: path.write_bytes(b"png") and path),
                             tmp_path / "a")
    with pytest.raises(ValueError, match="was started at"):
        started.draw(tmp_path / "b" / "f.png")
    assert started.draw(tmp_path / "a" / "f.png") == tmp_path / "a" / "f.png"
    assert (tmp_path / "a" / "f.png").read_bytes() == b"png"

    def broken(path: Path) -> Path:
        raise ValueError("no labelled responses to plot")

    failing = started_figure(ReportFigure("figure", "g.png", broken), tmp_path / "a")
    with pytest.raises(ValueError, match="no labelled responses to plot"):
        failing.draw(tmp_path / "a" / "g.png")


@needs_fork
def test_cancelled_work_is_killed_and_its_result_is_an_error() -> None:
    import time

    running = aside(lambda: time.sleep(60))
    started = time.monotonic()
    running.cancel()
    assert time.monotonic() - started < 10  # killed, not waited for
    assert not running._process.is_alive()
    with pytest.raises(RuntimeError, match="was cancelled"):
        running.result()
    done = aside(lambda: 7)
    assert done.result() == 7
    done.cancel()  # done already: its result stays
    assert done.result() == 7


@needs_fork
def test_a_report_that_fails_stops_the_figure_it_started(tmp_path: Path) -> None:
    """A figure started on another core, then an error before it is waited for: the drawing is stopped, so it
    writes nothing into its folder afterwards (a caller may have removed that folder by then)."""
    import time

    from commitbench.analysis.tables import cancelled_on_error

    def slow(path: Path) -> Path:
        time.sleep(3)
        path.write_bytes(b"png")
        return path

    started = started_figure(ReportFigure("figure", "f.png", slow), tmp_path / "files")
    with pytest.raises(ValueError, match="no labelled response"), cancelled_on_error(started):
        raise ValueError("no labelled response")
    time.sleep(3.5)  # past the time the drawing would have written the figure
    assert not (tmp_path / "files" / "f.png").exists()
    with cancelled_on_error(None):  # no figure started: nothing to stop
        pass


def _in_a_pool_worker(_: int) -> tuple[bool, int, int]:
    running = aside(os.getpid)
    return running.forked, running.result(), os.getpid()


def test_in_a_pools_worker_the_work_runs_in_place() -> None:
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork")
    with multiprocessing.get_context("fork").Pool(1) as pool:
        forked, pid, worker = pool.map(_in_a_pool_worker, [0])[0]
    assert not forked and pid == worker  # a daemonic process may not have children: no error, no fork


def test_the_follow_up_tables_made_on_another_core_are_those_made_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The headline, pooled and failure-type tables are computed in a forked process while the others are computed
    here: the report is the one made in one process, and a failure in this process's tables waits for the other's."""
    import functools
    import multiprocessing

    from commitbench import aside as aside_module
    from commitbench.analysis.followup import report as report_module

    rows = _rows()
    started: list[bool] = []

    def forking(work, fork=None):  # type: ignore[no-untyped-def]
        started.append(True)
        return aside_module.aside(work, fork=True)

    monkeypatch.setattr(report_module, "aside", forking)
    forked = report_module.build_followup_report(rows, 0, "run", "rules", "offline baseline checker", n_boot=50)
    monkeypatch.setattr(report_module, "aside", functools.partial(aside_module.aside, fork=False))
    here = report_module.build_followup_report(rows, 0, "run", "rules", "offline baseline checker", n_boot=50)
    assert started == [True] and forked.model_dump() == here.model_dump() and forked.headline and forked.pooled
    assert forked.failure_types
    monkeypatch.setattr(report_module, "aside", forking)
    monkeypatch.setattr(report_module, "outcome_table",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("outcomes")))
    with pytest.raises(RuntimeError, match="outcomes"):
        report_module.build_followup_report(rows, 0, "run", "rules", "offline baseline checker", n_boot=50)
    assert multiprocessing.active_children() == []  # the other core's work was waited for
