"""Indexes of large files kept between processes: reused only for the file in the same state and context, and
never changing what a reader finds."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from commitbench import readindex, traces
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.jsonl import file_state
from commitbench.judges import stored as stored_module
from commitbench.judges.labelling import LabelRecord
from commitbench.judges.stored import StoredLabels
from commitbench.runcells import trace_file_checked
from commitbench.rundir import read_manifest
from commitbench.rundir import reader as run_reader
from commitbench.runner import run_experiment
from commitbench.traces import LatestLines, TraceFileError, iter_latest_traces, iter_traces

SLICE = [e.id for e in load_episodes() if e.split.value == "test" and e.variant == 0][:12]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store of this test's own, keeping the index of every file however small."""
    where = tmp_path / "index"
    monkeypatch.setenv(readindex.CACHE_DIR_ENV, str(where))
    monkeypatch.setattr(readindex, "INDEXED_BYTES", 1)
    return where


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("readindex") / "run"
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule", "rank-wins"], episodes={"ids": SLICE})
    run_experiment(config, out)
    return out


@pytest.fixture
def run_dir(played: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(played, copy)
    return copy


def test_an_index_is_found_under_its_kind_state_and_context_only(store: Path, tmp_path: Path) -> None:
    state = ("/a/file", 1, 2, 30, 4, 5)
    readindex.save_index("kind", state, b"\x00data", context="c1")
    assert readindex.load_index("kind", state, "c1") == b"\x00data"
    assert readindex.load_index("kind", state, "c2") is None
    assert readindex.load_index("other", state, "c1") is None
    assert readindex.load_index("kind", (*state[:3], 31, *state[4:]), "c1") is None  # the file grew
    later = (*state[:3], 31, 6, 7)
    readindex.save_index("kind", later, b"later", context="c1")  # the same file in a later state
    assert readindex.load_index("kind", later, "c1") == b"later"
    assert readindex.load_index("kind", state, "c1") is None  # an earlier state's index is let go
    assert (store / readindex.INDEX_FILE).is_file()


def test_at_most_keep_indexes_are_kept_the_least_recently_used_going_first(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readindex, "KEEP", 3)
    states = [(f"/file/{i}", 0, i, 10, 0, 0) for i in range(4)]
    for state in states[:3]:
        readindex.save_index("kind", state, b"x")
    assert readindex.load_index("kind", states[0]) == b"x"  # used again: the most recent now
    readindex.save_index("kind", states[3], b"x")
    kept = [readindex.load_index("kind", state) is not None for state in states]
    assert kept == [True, False, True, True]


def test_off_keeps_nothing_and_a_store_that_cannot_be_written_is_reported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(readindex.CACHE_DIR_ENV, "off")
    readindex.save_index("kind", ("/f", 0, 0, 9, 0, 0), b"x")
    assert readindex.index_dir() is None and readindex.load_index("kind", ("/f", 0, 0, 9, 0, 0)) is None
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    monkeypatch.setenv(readindex.CACHE_DIR_ENV, str(blocked))
    for _ in range(2):
        readindex.save_index("kind", ("/f", 0, 0, 9, 0, 0), b"x")
        assert readindex.load_index("kind", ("/f", 0, 0, 9, 0, 0)) is None
    err = capsys.readouterr().err
    assert err.count("cannot be used") == 1 and str(blocked) in err and readindex.CACHE_DIR_ENV in err


def test_the_default_store_is_under_the_users_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(readindex.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert readindex.index_dir() == tmp_path / "xdg" / "commitbench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert readindex.index_dir() == Path.home() / ".cache" / "commitbench"


def test_the_lines_that_count_read_back_as_they_were_kept() -> None:
    lines = LatestLines()
    for number, (key, good) in enumerate([("a", True), ("b", False), ("a", False), ("c", True), ("b", True)], 1):
        lines.add(number, 100 * number, key, good)
    lines.finish()
    back = LatestLines.from_bytes(lines.to_bytes())
    assert back is not None
    assert (list(back.offsets), list(back.numbers), bytes(back.good)) == (
        list(lines.offsets), list(lines.numbers), bytes(lines.good)) == ([100, 400, 500], [1, 4, 5], b"\x01\x01\x01")
    assert LatestLines.from_bytes(lines.to_bytes()[:-1]) is None and LatestLines.from_bytes(b"") is None


def _as_a_new_process() -> None:
    """Forget what this process remembers of files it read (a later command starts without it)."""
    traces._SCANNED.clear()
    stored_module._INDEXES.clear()


def test_a_checked_trace_file_is_not_checked_again_until_it_or_its_cells_change(
    store: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = run_dir / "traces.jsonl"
    expected = [t.model_dump_json() for t in iter_latest_traces(run_dir, include_failed=True)]
    _as_a_new_process()
    run_reader.run_suite(run_dir)  # checks every line, and keeps that it did
    context = run_reader.cells_context(run_dir, read_manifest(run_dir))  # type: ignore[arg-type]
    assert context is not None and trace_file_checked(file, context)
    _as_a_new_process()
    checks: list[Path] = []
    real = run_reader.check_trace_file
    monkeypatch.setattr(run_reader, "check_trace_file", lambda *args: checks.append(args[0]) or real(*args))
    run_reader.run_suite(run_dir)
    assert checks == []  # unchanged: the kept check stands
    assert [t.model_dump_json() for t in iter_latest_traces(run_dir, include_failed=True)] == expected
    cells = run_dir / "cells.jsonl"
    cells.write_bytes(cells.read_bytes())  # the same cells, written again: another state of the table
    _as_a_new_process()
    run_reader.run_suite(run_dir)
    assert checks == [file]
    # A line added after the check that is no trace of a cell: the next reader refuses it, as without an index.
    first = next(iter_traces(file))
    with file.open("a", encoding="utf-8") as handle:
        handle.write(first.model_copy(update={"run_key": "f" * 64}).model_dump_json() + "\n")
    _as_a_new_process()
    with pytest.raises(TraceFileError, match="no cell of the experiment"):
        run_reader.run_suite(run_dir)


def test_lines_found_by_one_process_serve_the_next_and_a_changed_file_is_read_afresh(
    store: Path, run_dir: Path
) -> None:
    file = run_dir / "traces.jsonl"
    _as_a_new_process()
    expected = [t.run_key for t in iter_latest_traces(run_dir, include_failed=True)]
    _as_a_new_process()
    assert traces.stored_latest_lines(file_state(file)) is not None  # kept by the pass above
    assert [t.run_key for t in iter_latest_traces(run_dir, include_failed=True)] == expected
    first = next(iter_traces(file))
    traces.append_traces(file, [first.model_copy(update={"run_key": "b" * 64})])
    _as_a_new_process()
    assert traces.stored_latest_lines(file_state(file)) is None
    assert [t.run_key for t in iter_latest_traces(run_dir, include_failed=True)] == [*expected, "b" * 64]


def _labels(path: Path, keys: list[str]) -> Path:
    lines = [LabelRecord(run_key=key, labeller="rules", labeller_version="v1" if i % 3 else "v2",
                         judge_errors=i).model_dump_json() + "\n" for i, key in enumerate(keys)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_a_labels_index_kept_by_one_process_reads_as_the_one_made_from_the_file(store: Path, tmp_path: Path) -> None:
    keys = [hashlib.sha256(str(i % 40).encode()).hexdigest() for i in range(100)]
    path = _labels(tmp_path / "labels-rules.jsonl", keys)
    _as_a_new_process()
    made = StoredLabels(path, LabelRecord)
    _as_a_new_process()
    kept = StoredLabels(path, LabelRecord)
    assert kept._where is not made._where  # read back from the store, not shared in the process
    assert list(kept) == list(made) and {k: r.judge_errors for k, r in kept.items()} == {
        k: r.judge_errors for k, r in made.items()}
    # The latest lines are 60 to 99, and 14 of them are multiples of 3 (version v2).
    assert kept.versions() == made.versions() == Counter({"v1": 26, "v2": 14})
    assert (kept.labellers, kept.records_read, kept.first_version) == (made.labellers, 100, "v2")
    assert "0" * 64 not in kept and kept.get("zz") is None
    with path.open("a", encoding="utf-8") as handle:  # changed: indexed afresh
        handle.write(LabelRecord(run_key="0" * 64, labeller="rules", labeller_version="v2").model_dump_json() + "\n")
    _as_a_new_process()
    assert "0" * 64 in StoredLabels(path, LabelRecord)


def test_a_labels_file_with_keys_of_another_shape_is_not_kept(store: Path, tmp_path: Path) -> None:
    path = _labels(tmp_path / "labels-rules.jsonl", ["plain-key", "another"])
    _as_a_new_process()
    StoredLabels(path, LabelRecord)
    context = stored_module._index_context(LabelRecord, "labels record")
    assert not os.path.exists(store / readindex.INDEX_FILE) or readindex.load_index(
        stored_module.LABELS_INDEX, file_state(path), context) is None
    _as_a_new_process()
    assert list(StoredLabels(path, LabelRecord)) == ["plain-key", "another"]


def test_a_damaged_store_is_reported_once_and_the_files_are_indexed_afresh(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.mkdir(parents=True)
    (store / readindex.INDEX_FILE).write_bytes(b"this is no SQLite database" * 100)
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(5)]
    path = _labels(tmp_path / "labels-rules.jsonl", keys)
    for _ in range(2):
        _as_a_new_process()
        assert list(StoredLabels(path, LabelRecord)) == keys
    err = capsys.readouterr().err
    assert err.count("cannot be used") == 1 and str(store / readindex.INDEX_FILE) in err
