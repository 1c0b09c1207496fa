"""A labels file read as a mapping from run key to its latest record, holding byte offsets, not records.

A report of a run of 100,000 traces reads as many stored label records. Held as objects they take over a
gigabyte, and Python's cyclic collector walks them again and again while they pile up (five times the
time of parsing them). :class:`StoredLabels` reads the file once, parsing and checking every line as the
record it is (a bad line is named as before, with its file and line), and keeps of each run key only
where its latest line starts; a record is parsed again from the file when it is asked for, and dropped by
the caller after use. The mapping also knows the labellers and versions of its latest records, so the
checks a report makes of a labels file (one labeller, one version) need no second read.

Each process reads through a handle of its own, so the mapping can be handed to forked workers. The
labels loop only appends to a labels file: a line once indexed stays where it is.
"""

from __future__ import annotations

import functools
import os
import re
from array import array
from collections import Counter
from collections.abc import Callable, ItemsView, Iterator, Mapping, ValuesView
from pathlib import Path
from typing import IO, TYPE_CHECKING, Generic, TypeVar

import numpy as np
import orjson

from commitbench.jointread import conversion_work
from commitbench.jsonl import JsonlError, file_state, iter_lines_at, parse_line
from commitbench.linechunks import ChunkResult, map_line_chunks, parallel_lines
from commitbench.readindex import load_index, save_index, worth_indexing
from commitbench.sourcelines import remember

if TYPE_CHECKING:
    from commitbench.judges.labelling import LabelRecord

RecordT = TypeVar("RecordT", bound="LabelRecord")

__all__ = ["Overlaid", "Projected", "StoredLabels"]

_RECORD_WORK = "stored labels record"  # a record's key in a joint read's shared work (with its file and run key)
_NUMBER_BITS = 32  # a line's number in the low bits of its entry, its byte offset above them


# What the index keeps of a record: its line's number and offset, its run key, labeller and labeller version.
_Head = tuple[int, int, str, str, str]


def _heads(
    path: Path, record_type: type[LabelRecord], what: str, start: int = 0, stop: int | None = None,
    first_number: int = 1, counted: list[int] | None = None,
) -> Iterator[_Head]:
    """Every record of the lines that start in ``[start, stop)``, parsed and checked, as what the index keeps."""
    for number, offset, line in iter_lines_at(path, start, stop, first_number, counted):
        record = parse_line(path, record_type, what, number, line)
        if record is not None:  # None: a torn tail
            yield number, offset, record.run_key, record.labeller, record.labeller_version


def _heads_of_range(record_type: type[LabelRecord], what: str, path: Path, start: int, stop: int
                    ) -> ChunkResult[list[_Head]]:
    """:func:`_heads` of one byte range, in a pool's process (not ok when a line is bad)."""
    counted = [0]
    names: dict[str, str] = {}  # each labeller and version once, so that they pickle once
    try:
        found = [(number, offset, key, names.setdefault(labeller, labeller), names.setdefault(version, version))
                 for number, offset, key, labeller, version in _heads(path, record_type, what, start, stop,
                                                                      counted=counted)]
    except JsonlError:
        return ChunkResult(lines=counted[0], ok=False, value=[])
    return ChunkResult(lines=counted[0], ok=True, value=found)


def _heads_in_pool(path: Path, record_type: type[LabelRecord], what: str) -> Iterator[_Head]:
    """:func:`_heads` of a large file, its byte ranges parsed by a pool of processes; a range with a bad line is
    read again here, so the error names the same line in the same words."""
    work = functools.partial(_heads_of_range, record_type, what)
    for start, stop, first, result in map_line_chunks(path, work):
        if not result.ok:
            yield from _heads(path, record_type, what, start, stop, first)  # raises
            continue
        for number, offset, key, labeller, version in result.value:
            yield number + first - 1, offset, key, labeller, version


_DIGEST = re.compile(r"[0-9a-f]{64}")  # a run key as commitbench makes it: a SHA-256 in lowercase hex


class _KeyEntries:
    """Each run key's latest entry, in the order the keys were first seen, added a line at a time in file order.

    While every key is a run key as commitbench makes it (64 lowercase hex digits), the keys are kept as their 32
    bytes, sorted, with their entries beside them: about 50 bytes a key, where a dict of texts takes about 200.
    The first other key turns the index into that dict (any text is a key there).
    """

    def __init__(self) -> None:
        self._digests = bytearray()  # while adding: a key's 32 bytes a line
        self._lines = array("q")  # while adding: a line's entry
        self._dict: dict[str, int] | None = None
        self._sorted = np.empty(0, dtype="S32")  # once finished: each key's bytes, sorted
        self._latest = np.empty(0, dtype=np.int64)  # its latest entry
        self._seen = np.empty(0, dtype=np.int64)  # positions in _sorted, in the order the keys were first seen

    def add(self, key: str, entry: int) -> None:
        if self._dict is None:
            if _DIGEST.fullmatch(key):
                self._digests += bytes.fromhex(key)
                self._lines.append(entry)
                return
            self._dict = self._as_dict()
        self._dict[key] = entry

    def _as_dict(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for index, entry in enumerate(self._lines):
            found[self._digests[32 * index:32 * index + 32].hex()] = entry
        self._digests, self._lines = bytearray(), array("q")
        return found

    def finish(self) -> None:
        """Sort the keys (once every line is added)."""
        if self._dict is not None or not self._lines:
            return
        digests = np.frombuffer(self._digests, dtype="S32")  # fixed width: compared on all 32 bytes
        order = np.argsort(digests, kind="stable")  # a key's lines together, in file order
        ordered = digests[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        ends = np.append(starts[1:], len(ordered)) - 1
        self._sorted = ordered[starts]
        self._latest = np.frombuffer(self._lines, dtype=np.int64)[order[ends]].copy()
        self._seen = np.argsort(order[starts], kind="stable")
        self._digests, self._lines = bytearray(), array("q")

    def get(self, key: str) -> int | None:
        if self._dict is not None:
            return self._dict.get(key)
        if not _DIGEST.fullmatch(key) or not len(self._sorted):
            return None
        digest = bytes.fromhex(key)
        at = self._sorted.searchsorted(digest)
        # An element reads back without its trailing zero bytes (all 32 are compared in the search and the sort).
        if at < len(self._sorted) and self._sorted[at] == digest.rstrip(b"\0"):
            return int(self._latest[at])
        return None

    def __len__(self) -> int:
        return len(self._dict) if self._dict is not None else len(self._sorted)

    def __iter__(self) -> Iterator[str]:
        if self._dict is not None:
            yield from self._dict
            return
        for at in self._seen:
            yield self._sorted[at:at + 1].tobytes().hex()


# The indexes of the last labels files read in this process, by the file's state, record type and name: the
# viewer's labels and its report's read one file, unchanged, and share its index (read-only once made).
_INDEXES: dict[tuple[object, ...], tuple[_KeyEntries, dict[str, str], str | None, int, dict[str, tuple[int, int]]]] = {}
_INDEXES_KEPT = 4


_Index = tuple[_KeyEntries, dict[str, str], str | None, int, dict[str, tuple[int, int]]]
LABELS_INDEX = "labels/1"  # a labels file's index in the read index (:mod:`commitbench.readindex`)


def _keep(key: tuple[object, ...], index: _Index) -> None:
    if key not in _INDEXES and len(_INDEXES) >= _INDEXES_KEPT:
        _INDEXES.pop(next(iter(_INDEXES)))
    _INDEXES[key] = index


def _index_context(record_type: type[LabelRecord], what: str) -> str:
    """What else an index depends on: the records' type (its fields), and what the file's records are called."""
    return repr((f"{record_type.__module__}.{record_type.__qualname__}", sorted(record_type.model_fields), what))


def _index_bytes(index: _Index) -> bytes | None:
    """An index as the read index keeps it (None for one whose keys are not all run keys as commitbench makes
    them: those are kept only in this process)."""
    where, version_of, first_version, records_read, labellers = index
    if where._dict is not None:
        return None
    head = orjson.dumps({"keys": len(where._sorted), "version_of": version_of, "first_version": first_version,
                         "records_read": records_read, "labellers": labellers})
    return (len(head).to_bytes(8, "little") + head + where._sorted.tobytes() + where._latest.tobytes()
            + where._seen.tobytes())


def _stored_index(state: tuple[object, ...], record_type: type[LabelRecord], what: str) -> _Index | None:
    """The index of a labels file in ``state`` kept in the read index; None when there is none (or it does not
    read as :func:`_index_bytes` writes)."""
    if not worth_indexing(state):
        return None
    data = load_index(LABELS_INDEX, state, _index_context(record_type, what))
    if data is None or len(data) < 8:
        return None
    size = int.from_bytes(data[:8], "little")
    try:
        head = orjson.loads(data[8:8 + size])
        count = int(head["keys"])
        body = data[8 + size:]
        if len(body) != count * (32 + 8 + 8):
            return None
        where = _KeyEntries()
        where._sorted = np.frombuffer(body[:32 * count], dtype="S32")
        where._latest = np.frombuffer(body[32 * count:40 * count], dtype=np.int64)
        where._seen = np.frombuffer(body[40 * count:], dtype=np.int64)
        labellers = {str(name): (int(pair[0]), int(pair[1])) for name, pair in head["labellers"].items()}
        return (where, {str(k): str(v) for k, v in head["version_of"].items()}, head["first_version"],
                int(head["records_read"]), labellers)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None


class StoredLabels(Mapping[str, RecordT], Generic[RecordT]):
    """One labels file's latest record of each run key, read from the file when asked for (see the module doc)."""

    def __init__(self, path: Path | str, record_type: type[RecordT], what: str = "labels record") -> None:
        self.path = Path(path)
        self.record_type = record_type
        self.what = what
        self._where = _KeyEntries()
        self._version_of: dict[str, str] = {}  # run keys whose latest record is not of the first record's version
        self.first_version: str | None = None
        self.records_read = 0
        # Every labeller of the file's records: (its records, the number of its first record, counting records).
        self.labellers: dict[str, tuple[int, int]] = {}
        self._handle: tuple[int, IO[bytes]] | None = None
        state = file_state(self.path)
        self._index_key = (state, record_type, what)
        known = _INDEXES.get((state, record_type, what)) or _stored_index(state, record_type, what)
        if known is not None:  # indexed before (in this process, or kept in the read index), unchanged since
            self._where, self._version_of, self.first_version, self.records_read, self.labellers = known
            _keep(self._index_key, known)
            return
        heads = _heads_in_pool(self.path, record_type, what) if parallel_lines(self.path) else _heads(
            self.path, record_type, what)
        for number, offset, key, labeller, version in heads:
            self.records_read += 1
            self._where.add(key, (offset << _NUMBER_BITS) | number)
            count, first = self.labellers.get(labeller, (0, self.records_read))
            self.labellers[labeller] = (count + 1, first)
            if self.first_version is None:
                self.first_version = version
            if version == self.first_version:
                self._version_of.pop(key, None)
            else:
                self._version_of[key] = version

        self._where.finish()
        made = (self._where, self._version_of, self.first_version, self.records_read, self.labellers)
        _keep(self._index_key, made)
        if worth_indexing(state):
            data = _index_bytes(made)
            if data is not None:
                save_index(LABELS_INDEX, state, data, _index_context(record_type, what))

    def versions(self) -> Counter[str]:
        """The labeller versions of the latest records, with their counts."""
        counts: Counter[str] = Counter(self._version_of.values())
        usual = len(self._where) - len(self._version_of)
        if usual and self.first_version is not None:
            counts[self.first_version] += usual
        return counts

    def __len__(self) -> int:
        return len(self._where)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._where.get(key) is not None

    def __getitem__(self, key: str) -> RecordT:
        """The latest record of ``key``, read from the file. While both readers of a joint read convert one trace
        (:mod:`commitbench.jointread`), the record the first of them read from this file (unchanged since it was
        indexed) is handed to the second as it is (without a second search of the index): neither changes it."""
        shared = conversion_work()
        if shared is not None:
            found = shared.get((_RECORD_WORK, self._index_key, key))
            if found is not None:
                return found
        entry = self._where.get(key)
        if entry is None:
            raise KeyError(key)
        record = self._read(key, entry)
        if shared is not None:
            shared[(_RECORD_WORK, self._index_key, key)] = record
        return record

    def _read(self, key: str, entry: int) -> RecordT:
        offset, number = entry >> _NUMBER_BITS, entry & ((1 << _NUMBER_BITS) - 1)
        handle = self._reader()
        handle.seek(offset)
        raw = handle.readline()
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonlError(f"{self.path}:{number}: changed since it was read (no longer UTF-8 text)") from None
        record = parse_line(self.path, self.record_type, self.what, number, line)
        if record is None or record.run_key != key:
            raise JsonlError(f"{self.path}:{number}: changed since it was read (not the {self.what} of run {key})")
        remember(record, raw)  # for a reader that writes the record out again (commitbench.sourcelines)
        return record

    def values(self) -> ValuesView[RecordT]:
        return _Values(self)

    def items(self) -> ItemsView[str, RecordT]:
        return _Items(self)

    def in_order(self) -> Iterator[tuple[str, RecordT]]:
        """Every run key and its latest record, in the order of the keys. When no run key has two records (the
        usual case), that is the file's order, and the file is read straight through instead of line by line."""
        if self.records_read != len(self._where):
            for key in self._where:
                yield key, self[key]
            return
        for number, offset, line in iter_lines_at(self.path):
            record = parse_line(self.path, self.record_type, self.what, number, line)
            if record is not None and self._where.get(record.run_key) == (offset << _NUMBER_BITS) | number:
                yield record.run_key, record  # a line appended since the index was made is not one of its records

    def _reader(self) -> IO[bytes]:
        """This process's handle on the file (a forked worker opens its own)."""
        pid = os.getpid()
        if self._handle is None or self._handle[0] != pid:
            self._handle = (pid, self.path.open("rb"))
        return self._handle[1]

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_handle"] = None
        return state




class _Values(ValuesView[RecordT]):
    _mapping: StoredLabels[RecordT]

    def __iter__(self) -> Iterator[RecordT]:
        return (record for _, record in self._mapping.in_order())


class _Items(ItemsView[str, RecordT]):
    _mapping: StoredLabels[RecordT]

    def __iter__(self) -> Iterator[tuple[str, RecordT]]:
        return self._mapping.in_order()


class Overlaid(Mapping[str, RecordT], Generic[RecordT]):
    """Two mappings of stored labels as one, as ``dict(below) | dict(top)`` would make them (a record of
    ``top`` wins; keys in the order of that merge), without reading a record before it is asked for."""

    def __init__(self, top: Mapping[str, RecordT], below: Mapping[str, RecordT]) -> None:
        self.top, self.below = top, below

    def __len__(self) -> int:
        return len(self.below) + sum(1 for key in self.top if key not in self.below)

    def __iter__(self) -> Iterator[str]:
        yield from self.below
        yield from (key for key in self.top if key not in self.below)

    def __getitem__(self, key: str) -> RecordT:
        return self.top[key] if key in self.top else self.below[key]


ValueT = TypeVar("ValueT")


class Projected(Mapping[str, ValueT], Generic[RecordT, ValueT]):
    """A mapping of stored labels seen through ``part`` (a record's labels, say), each record read and
    projected when it is asked for."""

    def __init__(self, records: Mapping[str, RecordT], part: Callable[[RecordT], ValueT]) -> None:
        self.records, self.part = records, part

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[str]:
        return iter(self.records)

    def __contains__(self, key: object) -> bool:
        return key in self.records

    def __getitem__(self, key: str) -> ValueT:
        return self.part(self.records[key])
