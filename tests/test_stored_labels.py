"""Stored labels read as a mapping of byte offsets: the same records, checks and errors as a dict of them."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from commitbench.jsonl import JsonlError
from commitbench.judges.labelling import (
    LabelRecord,
    MixedLabellersError,
    StaleLabelsError,
    check_versions,
    label_run,
    one_labeller_labels,
)
from commitbench.judges.stored import Overlaid, Projected, StoredLabels
from commitbench.traces import EpisodeTrace


def _line(key: str, labeller: str = "rules", version: str = "v2", errors: int = 0) -> str:
    record = LabelRecord(run_key=key, labeller=labeller, labeller_version=version, judge_errors=errors)
    return record.model_dump_json() + "\n"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_the_latest_record_of_each_run_key_in_first_seen_order(tmp_path: Path) -> None:
    path = _write(tmp_path / "labels-rules.jsonl",
                  [_line("a"), _line("b", errors=1), "\n", _line("c"), _line("a", errors=3)])
    stored = StoredLabels(path, LabelRecord)
    assert list(stored) == ["a", "b", "c"] and len(stored) == 3 and stored.records_read == 4
    assert stored["a"].judge_errors == 3 and stored["b"].judge_errors == 1 and "d" not in stored
    assert stored.get("d") is None
    expected = {"a": 3, "b": 1, "c": 0}
    assert {key: record.judge_errors for key, record in stored.items()} == expected
    with pytest.raises(KeyError):
        stored["d"]


def test_versions_count_the_latest_records_only(tmp_path: Path) -> None:
    lines = [_line("a", version="v1"), _line("b", version="v1"), _line("a", version="v2"), _line("c", version="")]
    path = _write(tmp_path / "labels-rules.jsonl", lines)
    stored = StoredLabels(path, LabelRecord)
    assert stored.versions() == {"v1": 1, "v2": 1, "": 1}
    assert check_versions(stored, "rules", "v2", True, tmp_path) is None  # an offline labeller: made anew
    with pytest.raises(StaleLabelsError, match=r"2 of 3 labels of 'llm:m' .* \(unversioned, v1; now v2"):
        check_versions(stored, "llm:m", "v2", False, tmp_path)
    current = _write(tmp_path / "labels-current.jsonl", [_line("a", version="v1"), _line("a", version="v2")])
    assert check_versions(StoredLabels(current, LabelRecord), "rules", "v2", True, tmp_path) is not None


def test_a_bad_line_is_named_when_the_file_is_read_and_a_torn_tail_is_skipped(tmp_path: Path) -> None:
    bad = _write(tmp_path / "labels-bad.jsonl", [_line("a"), '{"run_key": "b"}\n', _line("c")])
    with pytest.raises(JsonlError, match=r"labels-bad\.jsonl:2: not a valid labels record: labeller"):
        StoredLabels(bad, LabelRecord)
    torn = _write(tmp_path / "labels-torn.jsonl", [_line("a"), _line("b")[:20]])
    assert list(StoredLabels(torn, LabelRecord)) == ["a"]


def test_another_labellers_records_are_refused_with_their_counts(tmp_path: Path) -> None:
    lines = [_line("a"), _line("b", labeller="llm:x"), _line("c", labeller="llm:x")]
    path = _write(tmp_path / "labels-rules.jsonl", lines)
    with pytest.raises(MixedLabellersError, match=r"'llm:x': 2 records, the first is record 2"):
        one_labeller_labels(path, LabelRecord, "rules")


def test_a_line_changed_after_it_was_read_is_an_error_naming_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "labels-rules.jsonl", [_line("a"), _line("b")])
    stored = StoredLabels(path, LabelRecord)
    _write(path, [_line("b"), _line("a")])  # same lengths, other run keys at the offsets
    with pytest.raises(JsonlError, match=r"labels-rules\.jsonl:1: changed since it was read"):
        stored["a"]


def _read_in_child(stored: StoredLabels[LabelRecord], out: multiprocessing.queues.Queue[list[int]]) -> None:
    out.put([stored[key].judge_errors for key in ("c", "a")])


def test_a_forked_worker_reads_through_a_handle_of_its_own(tmp_path: Path) -> None:
    path = _write(tmp_path / "labels-rules.jsonl", [_line("a", errors=1), _line("b"), _line("c", errors=2)])
    stored = StoredLabels(path, LabelRecord)
    assert stored["b"].judge_errors == 0  # the parent's handle is open before the fork
    context = multiprocessing.get_context("fork")
    out: multiprocessing.queues.Queue[list[int]] = context.Queue()
    child = context.Process(target=_read_in_child, args=(stored, out))
    child.start()
    assert out.get(timeout=30) == [2, 1]
    child.join(30)
    assert child.exitcode == 0 and stored["a"].judge_errors == 1


def test_two_files_of_one_labeller_overlay_as_a_dict_update(tmp_path: Path) -> None:
    below = StoredLabels(_write(tmp_path / "labels-a.jsonl", [_line("a"), _line("b", errors=1)]), LabelRecord)
    top = StoredLabels(_write(tmp_path / "labels-b.jsonl", [_line("c"), _line("b", errors=5)]), LabelRecord)
    merged = Overlaid(top, below)
    expected = dict(below) | dict(top)
    assert list(merged) == list(expected) and len(merged) == len(expected)
    assert {k: r.judge_errors for k, r in merged.items()} == {k: r.judge_errors for k, r in expected.items()}
    projected = Projected(merged, lambda record: record.judge_errors)
    assert dict(projected) == {"a": 0, "b": 5, "c": 0} and "c" in projected and len(projected) == 3


def test_values_come_in_key_order_and_lines_appended_later_are_not_among_them(tmp_path: Path) -> None:
    path = _write(tmp_path / "labels-rules.jsonl", [_line("a", errors=1), _line("b", errors=2), _line("c")])
    stored = StoredLabels(path, LabelRecord)
    with path.open("a", encoding="utf-8") as handle:  # a labelling pass still appending
        handle.write(_line("d", errors=4) + _line("a", errors=9))
    assert [r.judge_errors for r in stored.values()] == [1, 2, 0] and len(stored.values()) == 3
    assert [key for key, _ in stored.items()] == ["a", "b", "c"]
    again = StoredLabels(path, LabelRecord)  # "a" has two records now: its latest, at its first place
    assert [(key, r.judge_errors) for key, r in again.items()] == [("a", 9), ("b", 2), ("c", 0), ("d", 4)]


class _SlowLabeller:
    """Labels a trace after a pause, and notes how many traces the loop had taken from its stream by then."""

    name, version, cheap = "rules", "v2", True

    def __init__(self, pulled: list[int]) -> None:
        self.pulled, self.seen = pulled, []

    async def label(self, trace: EpisodeTrace) -> LabelRecord:
        await asyncio.sleep(0.001)
        self.seen.append(self.pulled[0])
        return LabelRecord(run_key=trace.run_key, labeller=self.name)


def test_the_labelling_loop_streams_its_traces_and_keeps_the_counts(tmp_path: Path) -> None:
    path = _write(tmp_path / "labels-rules.jsonl", [_line("k0"), _line("k1", version="v1")])  # k1: stale
    pulled = [0]

    def traces() -> Iterator[EpisodeTrace]:
        for i in range(200):
            pulled[0] += 1
            yield EpisodeTrace(env_id="commitbench/FollowUp-v0", episode_id="e", run_key=f"k{i}", factors={},
                               infra_error="timeout" if i == 7 else None)

    labeller = _SlowLabeller(pulled)
    summary = asyncio.run(label_run(traces(), labeller, path, concurrency=4, limit=150))
    counts = summary.runs_total, summary.runs_skipped, summary.runs_labelled, summary.runs_relabelled
    assert counts == (199, 1, 150, 1)
    assert labeller.seen[0] <= 2 * 4 + 3  # the first label came after a window of 8 (and the 2 lines skipped)
    stored = StoredLabels(path, LabelRecord)
    assert len(stored) == 1 + 150 and stored["k1"].labeller_version == "v2" and "k7" not in stored


def _hex(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


@pytest.mark.parametrize("other", [None, "plain-key", "A" * 64])
def test_run_keys_kept_as_bytes_behave_as_a_dict_of_the_latest_lines(tmp_path: Path, other: str | None) -> None:
    """Keys as commitbench makes them (64 lowercase hex digits) are kept compactly; a key of any other shape, at any
    line, turns the index into a dict: either way the mapping is the dict of each key's latest record."""
    rng = random.Random(len(other or ""))
    keys = [_hex(rng.randint(0, 40)) for _ in range(150)]
    keys[0] = "00" * 32  # a key whose bytes are all zero: compared on all 32 of them
    keys[1] = "00" * 31 + "01"
    if other is not None:
        keys[90] = other
    lines = [_line(key, version="v1" if i % 11 == 0 else "v2", errors=i) for i, key in enumerate(keys)]
    stored = StoredLabels(_write(tmp_path / "labels-rules.jsonl", lines), LabelRecord)
    assert (stored._where._dict is None) == (other is None)  # compact only while every key is a digest
    expected: dict[str, int] = {}
    for i, key in enumerate(keys):
        expected[key] = i
    assert list(stored) == list(expected) and len(stored) == len(expected)
    assert {key: record.judge_errors for key, record in stored.items()} == expected
    latest_versions = Counter("v1" if i % 11 == 0 else "v2" for i in expected.values())
    assert stored.versions() == latest_versions
    for missing in (_hex(999), "00" * 32 + "00", "zz", "", "00" * 30):
        assert missing not in stored and stored.get(missing) is None
    with pytest.raises(KeyError):
        stored[_hex(999)]


def test_a_file_indexed_before_and_unchanged_shares_its_index_and_a_changed_one_is_indexed_again(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path / "labels-rules.jsonl", [_line("a"), _line("b", errors=1)])
    first = StoredLabels(path, LabelRecord)
    second = StoredLabels(path, LabelRecord)  # the viewer's labels and its report's: one index
    assert second._where is first._where and dict(second.items()) == dict(first.items())
    assert second._reader() is not first._reader()  # each reads through a handle of its own
    with path.open("a", encoding="utf-8") as handle:
        handle.write(_line("c", errors=2))
    third = StoredLabels(path, LabelRecord)
    assert third._where is not first._where and list(third) == ["a", "b", "c"] and third["c"].judge_errors == 2
    assert list(first) == ["a", "b"]  # an index made before the append is as it was
    other = StoredLabels(path, LabelRecord, what="another record")  # another kind of reading: its own index
    assert other._where is not third._where
