"""Large JSON-lines files checked in byte ranges by a pool: the same rows, numbers and errors as one pass."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import pytest

from commitbench import linechunks
from commitbench.jsonl import JsonlError, iter_lines_at
from commitbench.judges.labelling import LabelRecord
from commitbench.judges.stored import StoredLabels, _heads, _heads_in_pool
from commitbench.linechunks import ChunkResult, line_ranges, map_line_chunks
from commitbench.runcells import _rows_in_pool, iter_trace_rows, scan_trace_file
from commitbench.traces import EpisodeTrace, TraceFileError


def _label(key: str, version: str = "v2", labeller: str = "rules") -> str:
    return LabelRecord(run_key=key, labeller=labeller, labeller_version=version).model_dump_json() + "\n"


def _trace(key: str, failed: bool = False) -> str:
    trace = EpisodeTrace(env_id="commitbench/FollowUp-v0", episode_id="e", run_key=key, factors={},
                         infra_error="timeout" if failed else None)
    return trace.model_dump_json() + "\n"


def _small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of a few hundred bytes, and the pool for files of any size."""
    monkeypatch.setattr(linechunks, "MIN_CHUNK_BYTES", 300)
    monkeypatch.setattr(linechunks, "MIN_PARALLEL_BYTES", 0)


@pytest.mark.parametrize("seed", range(6))
def test_ranges_start_at_line_starts_and_cover_the_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = ["x" * rng.randint(0, 90) + "\n" for _ in range(rng.randint(1, 60))]
    if seed % 2:
        lines[-1] = lines[-1].rstrip("\n")  # no newline at the end
    path = tmp_path / "f.jsonl"
    path.write_text("".join(lines))
    data = path.read_bytes()
    ranges = line_ranges(path, rng.randint(1, 12), min_bytes=rng.randint(1, 200))
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    assert all(a < b for a, b in ranges) and all(b == c for (_, b), (c, _) in itertools.pairwise(ranges))
    assert all(start == 0 or data[start - 1:start] == b"\n" for start, _ in ranges)


def test_lines_read_by_range_are_the_lines_read_at_once(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"a": 1}\n\n{"b": 2}\n   \n{"c": 3}\n{"d": 4}')
    whole = list(iter_lines_at(path))
    pieces, number = [], 1
    for start, stop in line_ranges(path, 4, min_bytes=1):
        counted = [0]
        pieces.extend(iter_lines_at(path, start, stop, number, counted))
        number += counted[0]
    assert pieces == whole and [n for n, _, _ in whole] == [1, 3, 5, 6]
    assert number == 7  # every line counted, blank ones too


def _pid_and_lines(path: Path, start: int, stop: int) -> ChunkResult[tuple[int, list[str]]]:
    counted = [0]
    texts = [line for _, _, line in iter_lines_at(path, start, stop, counted=counted)]
    return ChunkResult(lines=counted[0], ok=True, value=(os.getpid(), texts))


def test_the_pool_gives_every_range_in_file_order_with_its_first_line_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_ranges(monkeypatch)
    path = tmp_path / "f.jsonl"
    lines = [f'{{"n": {i}, "pad": "{"y" * (i % 40)}"}}\n' for i in range(400)]
    path.write_text("".join(lines))
    seen, pids = [], set()
    for start, _, first, result in map_line_chunks(path, _pid_and_lines, workers=2):
        pid, texts = result.value
        pids.add(pid)
        assert texts and texts[0] == lines[first - 1] and path.read_bytes()[start:].startswith(texts[0].encode())
        seen.extend(texts)
    assert seen == lines
    assert os.getpid() not in pids  # made in the pool's processes


def test_labels_indexed_by_the_pool_are_those_indexed_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _small_ranges(monkeypatch)
    lines = [_label(f"k{i % 70}", version="v1" if i % 9 == 0 else "v2") for i in range(150)]
    lines.insert(40, "\n")
    path = tmp_path / "labels-rules.jsonl"
    path.write_text("".join(lines) + _label("torn")[:30])  # a torn tail
    assert list(_heads_in_pool(path, LabelRecord, "labels record")) == list(_heads(path, LabelRecord, "labels record"))
    pooled = StoredLabels(path, LabelRecord)
    monkeypatch.setattr(linechunks, "MIN_PARALLEL_BYTES", 1 << 40)
    alone = StoredLabels(path, LabelRecord)
    assert list(pooled) == list(alone) and pooled.versions() == alone.versions()
    assert pooled.labellers == alone.labellers and pooled.records_read == alone.records_read == 150
    assert all(pooled[key] == alone[key] for key in alone)


def test_trace_lines_checked_by_the_pool_are_those_checked_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_ranges(monkeypatch)
    lines = [_trace(f"r{i % 30}", failed=i % 7 == 0) for i in range(90)]
    lines.insert(11, "\n")
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(lines) + _trace("torn")[:50])
    alone = list(iter_trace_rows(path))
    assert list(_rows_in_pool(path, None)) == alone and len(alone) == 90
    pooled = scan_trace_file(path)
    monkeypatch.setattr(linechunks, "MIN_PARALLEL_BYTES", 1 << 40)
    assert pooled == scan_trace_file(path)


@pytest.mark.parametrize("kind", ["labels", "traces"])
def test_a_bad_line_in_a_late_range_is_named_as_one_pass_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    _small_ranges(monkeypatch)
    labels = kind == "labels"
    lines = [_label(f"k{i}") if labels else _trace(f"r{i}") for i in range(120)]
    lines[97] = '{"run_key": "k97"}\n' if labels else '{"run_key": 5}\n'
    path = tmp_path / f"{kind}.jsonl"
    path.write_text("".join(lines))
    error = JsonlError if labels else TraceFileError
    with pytest.raises(error) as alone:
        list(_heads(path, LabelRecord, "labels record") if labels else iter_trace_rows(path))
    with pytest.raises(error) as pooled:
        StoredLabels(path, LabelRecord) if labels else scan_trace_file(path)
    assert str(pooled.value) == str(alone.value) and f"{kind}.jsonl:98:" in str(pooled.value)
