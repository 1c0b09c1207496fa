"""The viewer's static site as files: one page, its script and style, and the run data as script files.

:func:`site_files` yields every file of the site (a path inside the site and its bytes) while it
streams the runs, so a full grid never sits in memory; writing them is left to the caller
(``commitbench view``). Layout of the site::

    index.html             the page (overview, run list, transcript, side by side: one page, routed by '#')
    assets/app.js, .css    hand-written script and style (package data; no framework, no network)
    assets/pages.js        makes a transcript page of what a run's entry holds (a follow-up run's trace and records)
    data/meta.js           the run, its columns, metrics and signals, the overview tables with their links
    data/index.js          the run list: one entry per run, column by column (values coded once)
    data/runs/NNNNN.js     transcript pages (or what the browser makes one of), RUN_SHARD runs per file, loaded
                           when a page needs one
    data/parts.js          what many pages show alike (a setup's tools, a system prompt), each written once and
                           named by its key on the pages that show it, loaded with the first page that does
    data/text/NNNNN.js     words for free-text search, TEXT_SHARD runs per file, loaded at the first search
                           (each run's own words, its episode's script, and who speaks: name, title, part)
    img/                   the report's figures (copied by the caller; the overview names them there)
    report.json            the report document (what ``commitbench report --json`` prints)

Browsers refuse fetch and XHR between ``file://`` pages, so every data file is a script that hands
its data to a global registry (``commitbench.meta(...)``, ``commitbench.runs(shard, [...])``...);
the page adds a ``<script>`` element to load one. Nothing is fetched from the network.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Container, Generator, Iterator, Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray
from pydantic import BaseModel, Field

from commitbench.analysis.rowstore import one_text_each
from commitbench.analysis.view.model import (
    Column,
    ColumnKind,
    Overview,
    Part,
    RunRecord,
    RunSource,
    SiteBatch,
    SiteRun,
    TranscriptPage,
    run_row,
)
from commitbench.analysis.view.transcript import MESSAGE
from commitbench.digests import digest, digest_bytes
from commitbench.memory import release_freed_memory

RUN_SHARD = 100
MEMBER_BATCH = 10_000  # finished runs whose metric membership is found at once (a frame of their rows each time)
MEMBER_KEYS_KEPT = 65_536  # combinations of a suite's member columns whose metric bits are kept (then forgotten)
TEXT_SHARD = 2_000
ASSETS = ("index.html", "pages.js", "app.js", "style.css")
REGISTRY = "commitbench"
FLAG_CODES = {False: 0, True: 1, None: 2}


class SiteCounts(BaseModel):
    """What a site holds."""

    runs: int = Field(description="Runs listed.")
    finished: int = Field(description="Runs without an infrastructure error.")
    run_shards: int = Field(description="Transcript files.")
    text_shards: int = Field(description="Search-text files.")


# Page fields that many runs show alike (a setup's tools, a system prompt, an episode's people and expectation):
# each distinct value is written once, in data/parts.js, and a page names it by key (TranscriptPage.parts).
SHARED_FIELDS = ("system_prompt", "people", "expected", "tools", "persists")
SHARED_MIN_BYTES = 64  # a smaller value stays on its page (a key and its mention would take about as much)
PART_KEY_CHARS = 16  # a part's key: the first 16 hex digits of the digest of its JSON
PARTS_KEPT = 4_096  # parts whose key a process keeps, and at most PARTS_SEEN_BYTES of them (then it starts again)
PARTS_SEEN_BYTES = 8 * 2**20
# The most data/parts.js holds: a page whose parts would take it past this keeps them (a run whose pages each show
# a prompt of their own would otherwise hold every one of them in memory until the end).
PARTS_BYTES_KEPT = 32 * 2**20
_PARTS_SEEN: dict[bytes, tuple[str, bytes]] = {}
_parts_seen_bytes = 0

# A path inside the site, and the file's bytes (or its bytes in pieces, for a file too large to hold at once).
SiteFile = tuple[str, bytes | Iterator[bytes]]
NO_OFF: tuple[int, ...] = ()  # the runs with no signal off the expectation share one empty entry
KEYS_PER_PIECE = 10_000  # run keys (and off lists) written to the index a piece at a time
INTS_PER_PIECE = 100_000  # codes likewise


def file_bytes(data: bytes | Iterator[bytes]) -> bytes:
    """A site file's bytes, whether it came whole or in pieces."""
    return data if isinstance(data, bytes) else b"".join(data)


def off_expected(signals: list[Part]) -> list[str]:
    """The signals (a page's :class:`Signal` parts) whose yes/no value differs from what the cell expects (the
    transcript marks them with ≠)."""
    out = []
    for signal in signals:
        value, expected = signal.get("value"), signal.get("expected")
        if expected is not None and isinstance(value, bool) and value != expected:
            out.append(signal["name"])
    return out


def verdict(signals: list[Part]) -> str:
    """What a run's samples are compared on: its yes/no and text signals (counts such as tool calls aside)."""
    return orjson.dumps([(s["name"], value) for s in signals
                         if isinstance(value := s.get("value"), (bool, str))]).decode("utf-8")


def speakers(items: list[Part]) -> str:
    """Who speaks in a run (a page's :class:`ChatItem` parts), for search: each person's name, job title and part
    in the episode, once."""
    seen: dict[str, str] = {}
    for item in items:
        sender = item.get("sender", "")
        if item["kind"] == MESSAGE and sender and sender not in seen:
            seen[sender] = " · ".join(p for p in (sender, item.get("title", ""), item.get("party", "")) if p)
    return "\n".join(seen.values())


def page_json(page: Part) -> bytes:
    """A page as the site writes it: compact JSON, the text as it is (UTF-8), what ``TranscriptPage.model_validate(
    page).model_dump_json(exclude_defaults=True)`` writes. orjson writes it; a page orjson refuses (an integer past
    64 bits) is written by :mod:`json` with the same separators."""
    try:
        return orjson.dumps(page)
    except orjson.JSONEncodeError:
        return json.dumps(page, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def group_digest(group: str) -> bytes:
    """A sample group as the site keeps it: the first 16 bytes of its digest (:func:`commitbench.digests.digest`;
    b"" for none). The group is a key compared for equality only, and its text (the run less its sample: episode,
    player, arm, factors) runs to hundreds of characters: a run index of 100,000 runs, each its own group, would
    hold tens of megabytes of it."""
    return digest_bytes(group, 16) if group else b""


def _part(data: bytes) -> tuple[str, bytes]:
    """A part's key (the start of its digest) and the one bytes object of this process that holds it."""
    global _parts_seen_bytes
    found = _PARTS_SEEN.get(data)
    if found is None:
        if len(_PARTS_SEEN) >= PARTS_KEPT or _parts_seen_bytes + len(data) > PARTS_SEEN_BYTES:
            _PARTS_SEEN.clear()
            _parts_seen_bytes = 0
        found = _PARTS_SEEN[data] = (digest(data, length=PART_KEY_CHARS), data)
        _parts_seen_bytes += len(data)
    return found


def _shared(fields: Mapping[str, Any]) -> tuple[dict[str, bytes], dict[str, str], tuple[tuple[str, bytes], ...]]:
    """``fields`` as JSON: those under :data:`SHARED_MIN_BYTES` (name -> JSON), the others' keys (name -> key),
    and the others as parts (key, JSON)."""
    small: dict[str, bytes] = {}
    taken: dict[str, str] = {}
    parts: list[tuple[str, bytes]] = []
    for name, value in fields.items():
        data = page_json(value)
        if len(data) < SHARED_MIN_BYTES:
            small[name] = data
            continue
        key, data = _part(data)
        taken[name] = key
        parts.append((key, data))
    return small, taken, tuple(parts)


def shared_parts(page: Part) -> tuple[Part, tuple[tuple[str, bytes], ...]]:
    """``page`` with its :data:`SHARED_FIELDS` of at least :data:`SHARED_MIN_BYTES` as JSON taken out and named in
    its ``parts`` field instead (a new dict; ``page`` is left as it is), and those parts as (key, JSON)."""
    _, taken, parts = _shared({name: page[name] for name in SHARED_FIELDS if page.get(name) is not None})
    if not taken:
        return page, ()
    out = {name: value for name, value in page.items() if name not in taken}
    out["parts"] = taken  # the model's last field: the page is still its model's JSON
    return out, parts


def shared_fields(fields: Mapping[str, Any]) -> tuple[dict[str, bytes], tuple[tuple[str, bytes], ...]]:
    """``fields`` (a page's :data:`SHARED_FIELDS`) as JSON, those of at least :data:`SHARED_MIN_BYTES` taken out as
    parts and named in a ``parts`` member instead (name -> JSON, in the order given, ``parts`` last), and those
    parts as (key, JSON): what :func:`shared_parts` makes of a page, for an entry written field by field."""
    out, taken, parts = _shared(fields)
    if taken:
        out["parts"] = orjson.dumps(taken)
    return out, parts


def with_parts(page: Part, parts: Mapping[str, Any], only: Container[str] | None = None) -> Part:
    """A page as the site shows it: the fields its ``parts`` names put back from ``parts`` (key -> the part as
    plain data, what data/parts.js holds), in the order its model declares them (KeyError: a part not there).
    With ``only``, just the parts whose keys it holds are put back; the others stay named."""
    named = page.get("parts")
    if not named:
        return page
    back = {name: key for name, key in named.items() if only is None or key in only}
    if not back:
        return page
    values = {**page, **{name: parts[key] for name, key in back.items()}}
    left = {name: key for name, key in named.items() if name not in back}
    if left:
        values["parts"] = left
    else:
        del values["parts"]
    known = TranscriptPage.model_fields  # a page entry's own fields (what a page is made of) keep their place
    return {name: values[name] for name in (*known, *(n for n in values if n not in known)) if name in values}


def site_run(record: RunRecord | SiteRun) -> SiteRun:
    """The run as the site stores it: its page written (with its shared parts apart: :func:`shared_parts`), who
    speaks in it, its signals off the expectation and its verdict taken out (a :class:`SiteRun` is returned as it
    is)."""
    if isinstance(record, SiteRun):
        return record
    page = record.page
    signals = page.get("signals", [])
    written, parts = shared_parts(page)
    return SiteRun(
        key=record.key, episode=record.episode, row=record.row, ok=record.ok, text=record.text,
        shared_text=record.shared_text, page=page_json(written), speakers=speakers(page.get("items", [])),
        off=tuple(off_expected(signals)), verdict=verdict(signals), sample_group=group_digest(record.sample_group),
        parts=parts,
    )


def pack_runs(
    records: Sequence[RunRecord | SiteRun], columns: Sequence[Column], member_columns: Sequence[str] = ()
) -> SiteBatch:
    """Consecutive runs as a :class:`SiteBatch` (each made by :func:`site_run` first), for a source of these run-list
    ``columns`` and ``member_columns`` (:class:`RunSource`): made where the runs were read (a pool's worker, a chunk
    at a time), so that only the batch crosses between processes."""
    runs = [site_run(record) for record in records]
    rows = [run_row(run) for run in runs]
    member_names = tuple(member_columns)
    shared: dict[str, str] = {}
    for run in runs:
        if run.episode not in shared:
            shared[run.episode] = run.shared_text
    seen: dict[str, str] = {}  # equal texts made one object: pickled once, read back once
    return SiteBatch(
        keys=[run.key for run in runs], episodes=one_text_each([run.episode for run in runs], seen),
        ok=[run.ok for run in runs],
        columns=[one_text_each([row.get(column.name) for row in rows], seen) for column in columns],
        members=[tuple(map(row.get, member_names)) if member_names else row
                 for run, row in zip(runs, rows, strict=True) if run.ok],
        texts=[run.text for run in runs], shared=shared, pages=[run.page for run in runs],
        speakers=one_text_each([run.speakers for run in runs], seen), off=[run.off for run in runs],
        verdicts=one_text_each([run.verdict for run in runs], seen),
        sample_groups=[run.sample_group for run in runs], parts=[run.parts for run in runs],
        column_names=tuple(column.name for column in columns), member_names=member_names,
    )


def _script(call: str, *args: Any) -> str:
    body = ",".join(json.dumps(a, separators=(",", ":"), ensure_ascii=True) for a in args)
    return f"{REGISTRY}.{call}({body});\n"


class _Column:
    """One run-list column, coded as it is filled."""

    def __init__(self, name: str, kind: ColumnKind) -> None:
        self.name, self.kind = name, kind
        self.values: list[str] = []
        # A byte a run for a flag, four for a code or a count (eight once a count needs them); a list would take 36.
        self.codes = array("b" if kind is ColumnKind.FLAG else "i")
        self._lookup: dict[str, int] = {}
        self._facet = kind is not ColumnKind.FLAG and kind is not ColumnKind.COUNT  # coded by its text

    def add(self, value: Any) -> None:
        if self._facet:
            self.codes.append(self._code("" if value is None else value if type(value) is str else str(value)))
        elif self.kind is ColumnKind.FLAG:
            self.codes.append(FLAG_CODES[None if value is None else bool(value)])
        else:
            count = -1 if value is None or value != value else int(value)
            try:
                self.codes.append(count)
            except OverflowError:
                self.codes = array("q", self.codes)
                self.codes.append(count)  # past 64 bits too: an OverflowError, as a list of counts would give in JSON

    def _code(self, text: str) -> int:
        code = self._lookup.get(text)
        if code is None:
            code = self._lookup[text] = len(self.values)
            self.values.append(text)
        return code

    def extend(self, values: list[Any]) -> None:
        """:meth:`add` of each value, in order: texts of a facet, flags and counts of a column of one type coded in
        C (a facet's new texts one at a time), anything else (None, a number past the codes' width) value by value."""
        before = len(self.codes)
        codes: list[Any]
        if self._facet and all(type(v) is str for v in values):
            codes = list(map(self._lookup.get, values))
            if None in codes:
                for i, code in enumerate(codes):
                    if code is None:
                        codes[i] = self._code(values[i])
        elif self.kind is ColumnKind.FLAG and all(type(v) is bool for v in values):
            codes = [FLAG_CODES[v] for v in values]
        elif self.kind is ColumnKind.COUNT and all(type(v) is int for v in values):
            codes = values
        else:
            codes = []
        if len(codes) == len(values):
            try:
                self.codes.extend(codes)
                return
            except OverflowError:  # wider codes needed: taken back, then added one at a time as add widens them
                del self.codes[before:]
        for value in values:
            self.add(value)

    def json_pieces(self) -> Iterator[str]:
        """The column's entry of the index as JSON text, in pieces: ``{"values":[...],"codes":[...]}``."""
        if self.kind is ColumnKind.FACET:
            yield '{"values":' + _json(self.values) + ',"codes":'
        else:
            yield '{"codes":'
        yield from _int_list(self.codes)
        yield "}"


class _Shards:
    """Gathers records into shard files and collects the run index.

    Of each run it keeps only its index entry (its key and a code per column); the rows of finished
    runs wait for their metric membership, :data:`MEMBER_BATCH` at a time (:meth:`mark_members`). A suite that
    names its member columns (:attr:`RunSource.member_columns`) has only their values kept, and is asked once per
    combination of them.
    """

    def __init__(self, source: RunSource) -> None:
        self.source = source
        self.metric_names = [m.name for m in source.metrics]
        self.columns = [_Column(c.name, c.kind) for c in source.columns]
        self.keys: list[str] = []
        self.episode_codes = array("i")
        self.episodes: dict[str, int] = {}
        self.masks = array("Q")  # per run, bit k: metric k reads it
        self.off_names: dict[str, int] = {}
        self.off: list[tuple[int, ...]] = []  # per run, the signals that differ from the cell's expectation
        self.groups: dict[bytes, int] = {}  # sample group (its digest) -> its number
        self.group_codes = array("i")  # per run, its sample group
        self.verdicts: dict[str, int] = {}  # each verdict seen -> its number
        self.group_verdict = array("i")  # per sample group, the verdict of its first finished run (-1: none yet)
        self.mixed: set[int] = set()  # the sample groups whose finished runs disagree
        self.finished = 0
        self.ok_rows: list[dict[str, Any]] = []  # finished runs whose membership is not marked yet
        self.member_columns = tuple(source.member_columns)
        self.ok_keys: list[_MemberKey] = []  # with member columns: the finished runs' values of them, not marked yet
        self.member_bits: dict[_MemberKey, int] = {}  # a combination of those values -> its metric bits
        self.ok_positions: list[int] = []
        self.pages: list[bytes] = []
        self.texts: list[str] = []
        self.speakers: list[str] = []
        self.shared: dict[int, str] = {}
        self.parts: dict[str, bytes] = {}  # every part a page names: key -> its JSON
        self.parts_bytes = 0
        self.run_shards = 0
        self.text_shards = 0

    def add(self, record: RunRecord | SiteRun | SiteBatch) -> list[SiteFile]:
        """Take one run, or a batch of them; returns the shard files they completed."""
        batch = record if isinstance(record, SiteBatch) else pack_runs([record], self.source.columns,
                                                                        self.member_columns)
        done: list[SiteFile] = []
        start, n = 0, len(batch)
        members = iter(batch.members)
        while start < n:  # in pieces that end where a shard or a batch of membership ends, as they would run by run
            stop = min(n, start + RUN_SHARD - len(self.pages), start + TEXT_SHARD - len(self.texts),
                       start + MEMBER_BATCH - len(self.ok_positions))
            self._take(batch, start, stop, members)
            start = stop
            if len(self.ok_positions) >= MEMBER_BATCH:
                self.mark_members()
            if len(self.pages) == RUN_SHARD:
                done.extend(self.flush_pages())
            if len(self.texts) == TEXT_SHARD:
                done.extend(self.flush_texts())
        return done

    def _take(self, batch: SiteBatch, start: int, stop: int, members: Iterator[Any]) -> None:
        """Runs ``start`` to ``stop`` of ``batch`` into the index and the pending shards (``members``: the batch's
        member values or rows, the next one for each finished run)."""
        position = len(self.keys)
        self.keys.extend(batch.keys[start:stop])
        self.masks.frombytes(bytes(self.masks.itemsize * (stop - start)))
        for column, values in zip(self.columns, batch.columns, strict=True):
            column.extend(values[start:stop])
        self.texts.extend(batch.texts[start:stop])
        self.speakers.extend(batch.speakers[start:stop])
        episodes, groups, verdicts, off_names = self.episodes, self.groups, self.verdicts, self.off_names
        group_verdict = self.group_verdict
        for i in range(start, stop):
            episode_id = batch.episodes[i]
            episode = episodes.get(episode_id)
            if episode is None:
                episode = episodes[episode_id] = len(episodes)
                self.shared[episode] = batch.shared.get(episode_id, "")
            self.episode_codes.append(episode)
            parts = batch.parts[i]
            self.pages.append(self._page_of(batch.pages[i], parts) if parts else batch.pages[i])
            off = batch.off[i]
            self.off.append(tuple(off_names.setdefault(name, len(off_names)) for name in off) if off else NO_OFF)
            group = groups.setdefault(batch.sample_groups[i] or batch.keys[i].encode("utf-8"), len(groups))
            if group == len(group_verdict):
                group_verdict.append(-1)
            self.group_codes.append(group)
            if batch.ok[i]:
                self.finished += 1
                member = next(members)
                if self.member_columns:
                    self.ok_keys.append(_member_key(member))
                else:
                    self.ok_rows.append(member)
                self.ok_positions.append(position + i - start)
                said = verdicts.setdefault(batch.verdicts[i], len(verdicts))
                first = group_verdict[group]
                if first == -1:
                    group_verdict[group] = said
                elif first != said:
                    self.mixed.add(group)

    def _page_of(self, page: bytes, parts: tuple[tuple[str, bytes], ...]) -> bytes:
        """A run's page as written: its parts kept for data/parts.js, or, those the file cannot take any more
        (:data:`PARTS_BYTES_KEPT`), put back on the page."""
        fresh = {key: data for key, data in parts if key not in self.parts}
        if not fresh:
            return page
        size = sum(map(len, fresh.values()))
        if self.parts_bytes + size <= PARTS_BYTES_KEPT:
            self.parts.update(fresh)
            self.parts_bytes += size
            return page
        inline = {key: json.loads(data) for key, data in fresh.items()}  # json: any integer a page may hold
        return page_json(with_parts(json.loads(page), inline, only=inline))

    def differs(self) -> list[int]:
        """Per run, 1 when the finished samples of its group disagree (on :func:`verdict`), else 0."""
        mixed = self.mixed
        return [int(group in mixed) for group in self.group_codes]

    def _bits(self, rows: list[dict[str, Any]]) -> NDArray[np.uint64]:
        """Each row's metric bits, as ``members`` answers for them."""
        members = self.source.members(rows)
        bits = np.zeros(len(rows), dtype=np.uint64)
        for bit, name in enumerate(self.metric_names):
            inside = np.asarray(members.get(name, ()), dtype=bool)[: len(rows)]  # a short list marks its runs
            bits[: len(inside)] |= inside.astype(np.uint64) << np.uint64(bit)
        return bits

    def mark_members(self) -> None:
        """Set the metric bits of the finished runs waiting for them, and forget their rows (or member values)."""
        if not self.ok_positions:
            return
        if self.member_columns:
            known = self.member_bits
            distinct = dict.fromkeys(self.ok_keys)
            fresh = [key for key in distinct if key not in known]
            if len(known) + len(fresh) > MEMBER_KEYS_KEPT:  # forget the others (this batch's are all kept a while)
                known.clear()
                fresh = list(distinct)
            if fresh:
                rows = [dict(zip(self.member_columns, key.values if isinstance(key, _Alone) else key[0], strict=True))
                        for key in fresh]
                known.update(zip(fresh, map(int, self._bits(rows)), strict=True))
            bits = np.fromiter(map(known.__getitem__, self.ok_keys), dtype=np.uint64, count=len(self.ok_keys))
        else:
            bits = self._bits(self.ok_rows)
        positions = np.asarray(self.ok_positions, dtype=np.int64)
        masks = np.frombuffer(self.masks, dtype=np.uint64)  # a view: let go before the next run is appended
        masks[positions] |= bits
        del masks
        self.ok_rows, self.ok_keys, self.ok_positions = [], [], []

    def flush_pages(self) -> list[SiteFile]:
        if not self.pages:
            return []
        body = f"{REGISTRY}.runs({self.run_shards},[".encode() + b",".join(self.pages) + b"]);\n"
        done = (f"data/runs/{self.run_shards:05d}.js", body)
        self.run_shards += 1
        self.pages = []
        return [done]

    def flush_texts(self) -> list[SiteFile]:
        if not self.texts:
            return []
        shared = {str(code): text for code, text in self.shared.items()}
        body = _script("text", self.text_shards, {"runs": self.texts, "episodes": shared, "speakers": self.speakers})
        done = (f"data/text/{self.text_shards:05d}.js", body.encode("utf-8"))
        self.text_shards += 1
        self.texts = []
        self.speakers = []
        self.shared = {}
        return [done]


class _Alone:
    """Member values that cannot be a dict key (one is unhashable): a key of their own, found by identity."""

    __slots__ = ("values",)

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values


# A run's member values as the key its metric bits are kept under: with their types, or on their own.
_MemberKey = tuple[tuple[Any, ...], tuple[type, ...]] | _Alone


def _member_key(values: tuple[Any, ...]) -> _MemberKey:
    """A run's member values as the key its metric bits are kept under: the values and their types (True, 1 and
    1.0 are one dict key, but not one value to every metric)."""
    key: _MemberKey = (values, tuple(map(type, values)))
    try:
        hash(key)
    except TypeError:
        return _Alone(values)
    return key


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def _int_list(numbers: array[int] | list[int]) -> Iterator[str]:
    """A list of integers as JSON text, in pieces of :data:`INTS_PER_PIECE` numbers (written by orjson, several
    times as fast as :func:`str` of each; json writes the same text)."""
    yield "["
    for start in range(0, len(numbers), INTS_PER_PIECE):
        piece = numbers[start:start + INTS_PER_PIECE]
        text = orjson.dumps(piece.tolist() if isinstance(piece, array) else piece)
        yield ("," if start else "") + text[1:-1].decode()
    yield "]"


def _index_script(shards: _Shards) -> Iterator[bytes]:
    """``commitbench.index({...});``: the run index as :func:`_script` writes it, made and written in pieces (a
    whole one, as text and as bytes, would be the largest thing a big site holds)."""

    def pieces() -> Iterator[str]:
        yield f"{REGISTRY}.index(" + '{"n":' + str(len(shards.keys)) + ',"keys":['
        for start in range(0, len(shards.keys), KEYS_PER_PIECE):
            yield ("," if start else "") + _json(shards.keys[start:start + KEYS_PER_PIECE])[1:-1]
        yield '],"episodes":'
        yield from _int_list(shards.episode_codes)
        yield ',"columns":{'
        for number, column in enumerate(shards.columns):
            yield ("," if number else "") + _json(column.name) + ":"
            yield from column.json_pieces()
        yield '},"metrics":'
        yield from _int_list(shards.masks)
        yield ',"off":['
        for start in range(0, len(shards.off), KEYS_PER_PIECE):
            yield ("," if start else "") + _json(shards.off[start:start + KEYS_PER_PIECE])[1:-1]
        yield '],"offNames":' + _json(list(shards.off_names)) + ',"differs":'
        yield from _int_list(shards.differs())
        yield ',"episodeIds":' + _json(list(shards.episodes)) + "});\n"

    return (piece.encode("utf-8") for piece in pieces())


def _parts_script(parts: dict[str, bytes]) -> Iterator[bytes]:
    """``commitbench.parts({key: part, ...});``: every part a page names, each as its JSON, in pieces."""
    yield f"{REGISTRY}.parts(".encode() + b"{"
    for number, (key, data) in enumerate(parts.items()):
        yield (b"," if number else b"") + _json(key).encode("ascii") + b":" + data
    yield b"});\n"


def assets() -> list[tuple[str, bytes]]:
    """The page, script and style, from the package."""
    root = resources.files("commitbench.analysis.view").joinpath("assets")
    return [(name if name.endswith(".html") else f"assets/{name}", root.joinpath(name).read_bytes()) for name in ASSETS]


def site_files(
    source: RunSource, overview: Overview, report: dict[str, Any], facts: dict[str, Any] | None = None,
    on_run: Callable[[int, int], None] | None = None,
) -> Generator[SiteFile, None, SiteCounts]:
    """Every file of the site, streamed (figures aside); returns what the site holds.

    ``report`` is the report document; ``facts`` extra plain data the page may show about the run;
    ``on_run`` is called after each run, or batch of runs, is taken, with how many runs it held and how many of
    them had an infrastructure error (a progress display advances).
    """
    return site_files_then(source, lambda: (overview, report), facts, on_run)


def site_files_then(
    source: RunSource, ending: Callable[[], tuple[Overview, dict[str, Any]]], facts: dict[str, Any] | None = None,
    on_run: Callable[[int, int], None] | None = None,
) -> Generator[SiteFile, None, SiteCounts]:
    """:func:`site_files` with the overview and the report document asked of ``ending`` once every run is
    taken (a report built while the runs are read: :mod:`commitbench.jointread`)."""
    yield from assets()
    shards = _Shards(source)
    for record in source.records:
        yield from shards.add(record)
        if on_run is not None:
            if isinstance(record, SiteBatch):
                on_run(len(record), record.ok.count(False))
            else:
                on_run(1, 0 if record.ok else 1)
    shards.mark_members()
    yield from shards.flush_pages()
    yield from shards.flush_texts()
    yield "data/parts.js", _parts_script(shards.parts)
    yield "data/index.js", _index_script(shards)
    counts = SiteCounts(runs=len(shards.keys), finished=shards.finished, run_shards=shards.run_shards,
                        text_shards=shards.text_shards)
    del shards  # the run index is written: what it held is let go before the report's tables are asked for
    release_freed_memory()
    overview, report = ending()
    yield "report.json", json.dumps(report, indent=2, sort_keys=True).encode("utf-8")
    meta = {
        "suite": source.suite, "judge": source.judge, "judges": list(source.judges),
        "columns": [c.model_dump(mode="json") for c in source.columns],
        "metrics": [m.model_dump(mode="json") for m in source.metrics], "signals": dict(source.signals),
        "overview": overview.model_dump(mode="json"), "facts": facts or {},
        "runShard": RUN_SHARD, "textShard": TEXT_SHARD, "runShards": counts.run_shards,
        "textShards": counts.text_shards, "runs": counts.runs, "finished": counts.finished,
    }
    yield "data/meta.js", _script("meta", meta).encode("utf-8")  # last: a site without it is unfinished
    return counts
