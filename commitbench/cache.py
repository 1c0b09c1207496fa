"""A content-addressed SQLite cache of model calls.

The key of a call is the sha256 of the canonical JSON (sorted keys, no whitespace,
``ensure_ascii=False``) of::

    {"v": CACHE_KEY_VERSION, "identity": <model identity>, "messages": [...], "tools": [...],
     "options": <per-call options such as tool_choice / response_format>, "sample": <sample index>}

where the model identity holds the model name, the sampling settings and ``extra_body``
(see :meth:`commitbench.llm.ModelSettings.identity`). The endpoint URL and the API key are never
part of the key and never stored, so the same cache serves a local vLLM, a router in front of many
replicas, or a hosted API. Entries never expire. The JSON is written by orjson wherever it gives the
same bytes as the ``json`` module (:func:`commitbench.jsoncodec.canonical`), so the keys are those the
cache has always had; entries are read with orjson too.

Modes (:class:`CacheMode`): ``read_write`` (default), ``off`` (no reads, no writes) and
``replay_only`` (a miss raises :class:`CacheMiss`, so a whole analysis can be rebuilt with zero
model calls).

Storage: one SQLite file in WAL mode with a busy timeout and ``synchronous=NORMAL``; each process
keeps one connection and commits every write at once (a WAL append without fsync, tens of
microseconds), so several processes can write concurrently and nothing recorded is lost when a
process dies. Each :class:`CallCache` is a *session* with its own hit/miss/write counters, stored
in the ``sessions`` table and grouped by ``run_id`` so that ``commitbench cache stats`` can report
the hit rate of the last run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

import orjson
from pydantic import BaseModel, Field

from commitbench import jsoncodec
from commitbench.digests import digest

__all__ = [
    "CACHE_KEY_VERSION",
    "CacheError",
    "CacheMiss",
    "CacheMode",
    "CacheReport",
    "CacheSessionStats",
    "CallBroker",
    "CallCache",
    "RunCacheStats",
    "UnusableEntry",
    "cache_key",
    "canonical_json",
    "describe_cache",
    "open_read_only",
    "read_only_storage",
]

# Bump when the meaning of a key changes (what goes into the payload or how it is normalised).
CACHE_KEY_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    created_at REAL NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    pid INTEGER NOT NULL,
    mode TEXT NOT NULL,
    started_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,
    misses INTEGER NOT NULL DEFAULT 0,
    writes INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sessions_by_run ON sessions (run_id, started_at);
"""

_STATS_FLUSH_INTERVAL_S = 1.0
_SELECT_ENTRY = "SELECT value FROM entries WHERE key=?"


class CacheMode(str, Enum):
    """How a :class:`CallCache` is used."""

    READ_WRITE = "read_write"
    OFF = "off"
    REPLAY_ONLY = "replay_only"


class CacheError(RuntimeError):
    """The cache file cannot be used: it is not a cache database, it is damaged, or it cannot be written.

    ``damaged`` tells the file's own fault (not a database, malformed pages, cut short), which no retry
    mends, from the machine's (locked, disk full, read-only storage).
    """

    def __init__(self, message: str, *, damaged: bool = False) -> None:
        super().__init__(message)
        self.damaged = damaged


def _cache_error(path: Path | None, exc: sqlite3.DatabaseError) -> CacheError:
    """A :class:`CacheError` for one of SQLite's errors that names the file and what to do."""
    if isinstance(exc, sqlite3.OperationalError):  # locked, disk full, read-only, cannot open
        return CacheError(f"cache {path} cannot be used: {exc}")
    return CacheError(  # not a database, malformed pages, a file cut short
        f"cache {path} is damaged or not a commitbench cache ({exc}); move it away (a new cache is "
        "started in its place) or point the run at another cache file",
        damaged=True,
    )


@contextlib.contextmanager
def _sqlite_errors(path: Path | None) -> Iterator[None]:
    """Turn SQLite's errors into a :class:`CacheError` that names the file and what to do."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise _cache_error(path, exc) from exc


class UnusableEntry(dict[str, Any]):
    """What :meth:`CallCache.get` returns for a stored value that is not a JSON object (text that is not JSON, an
    array, a number): an empty entry that says why, so that the caller refuses it as it refuses any entry of the
    wrong shape (:func:`commitbench.llm.parse_cache_entry`) instead of stopping on one bad row."""

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem


_JSON_KINDS = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}


class CacheMiss(LookupError):
    """A replay-only cache has no entry for a call."""

    def __init__(self, key: str, model: str) -> None:
        self.key = key
        self.model = model
        super().__init__(
            f"replay-only cache has no entry for key {key} (model {model!r}); "
            "run once with cache mode 'read_write' to record this call"
        )


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is; NaN and non-JSON types are rejected."""
    return jsoncodec.canonical_text(value)


def cache_key(
    identity: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    options: Mapping[str, Any] | None = None,
    sample_index: int = 0,
) -> str:
    """The sha256 hex digest that addresses one model call.

    ``identity`` is the model identity (model name, sampling settings, extra_body); it must not
    contain the endpoint URL or credentials. ``options`` holds per-call settings that change the
    output (``tool_choice``, ``response_format``). ``sample_index`` tells repeated samples apart.
    """
    payload = {
        "v": CACHE_KEY_VERSION,
        "identity": identity,
        "messages": messages,
        "tools": tools or [],
        "options": options or {},
        "sample": sample_index,
    }
    return digest(json=payload)


class CallBroker(Protocol):
    """Makes several processes that share one cache make each model call once, as one process would.

    Each process looks a call up in its own copy of the cache first; on a miss it asks the broker
    before calling the model. :meth:`claim` returns the entry another process has recorded since
    (no call is made), or None: this process holds the call's lease (no other process makes that
    call meanwhile; they wait for its outcome) and must report the outcome with :meth:`settle`,
    the completion to record or None when no usable completion came back (the lease then passes
    to a waiting process). In replay-only mode a call nobody recorded raises :class:`CacheMiss`.
    """

    async def claim(self, key: str, model: str) -> dict[str, Any] | None: ...

    def settle(self, key: str, model: str, value: dict[str, Any] | None) -> None: ...


class CacheSessionStats(BaseModel):
    """Counters of one cache session (one :class:`CallCache` object)."""

    hits: int = Field(default=0, description="Lookups that found an entry.")
    misses: int = Field(default=0, description="Lookups that found nothing.")
    writes: int = Field(default=0, description="New entries written by this session.")

    @property
    def hit_rate(self) -> float | None:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else None


def _uri(path: Path, **params: str) -> str:
    """An SQLite URI for ``path`` (its characters escaped) with ``params`` (``mode=ro``, ``immutable=1``)."""
    query = "&".join(f"{name}={value}" for name, value in params.items())
    return f"file:{urllib.parse.quote(str(path.resolve()))}" + (f"?{query}" if query else "")


def read_only_storage(path: Path) -> bool:
    """True when nothing can be written beside ``path`` (a read-only mount, an archive, no permission).

    SQLite opens a database in WAL mode, even to read it, by writing its ``-shm`` file beside it; where that
    cannot be done the file is opened ``immutable=1`` (:func:`open_read_only`).
    """
    return not os.access(path.parent if path.parent != Path("") else Path("."), os.W_OK)


def _unmerged_log(path: Path) -> str | None:
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        return (f"cache {path} is on read-only storage and has a write-ahead log ({wal.name}) not yet merged into it, "
                "which a read-only open would not see; copy the cache with its -wal file somewhere writable and "
                "open it there")
    return None


def open_read_only(path: Path, timeout_s: float = 30.0) -> sqlite3.Connection:
    """A connection that only reads ``path``; on read-only storage with SQLite's ``immutable=1`` (nothing written,
    no lock taken), refused when an unmerged write-ahead log lies beside it."""
    if read_only_storage(path):
        problem = _unmerged_log(path)
        if problem is not None:
            raise CacheError(problem)
        return sqlite3.connect(_uri(path, mode="ro", immutable="1"), uri=True, timeout=timeout_s,
                               check_same_thread=False, isolation_level=None)
    return sqlite3.connect(_uri(path, mode="ro"), uri=True, timeout=timeout_s, check_same_thread=False,
                           isolation_level=None)


def _connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    # Opened by URI, so that a read-only cache can be attached by one (CallCache.absorb).
    conn = sqlite3.connect(_uri(path), uri=True, timeout=busy_timeout_ms / 1000.0, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    deadline = time.monotonic() + busy_timeout_ms / 1000.0
    while True:  # switching to WAL needs a moment of exclusive access; other openers may hold it
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                conn.close()
                raise
            time.sleep(0.01)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _entry_value(text: str) -> Any:
    """The JSON value of a stored entry; raises what ``json.loads`` raises.

    orjson reads an entry in a fraction of json's time and to the same value: the two differ only on
    non-finite numbers (which orjson refuses, so json reads them) and on integers beyond 64 bits, which no
    entry holds (token counts are read below 10**18; tool arguments are kept as text).
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _decoded(text: str) -> Any:
    try:
        return _entry_value(text)
    except (ValueError, RecursionError):
        return text


class CallCache:
    """One process's handle on a cache file.

    ``get`` returns the stored JSON object (or None); ``put`` stores one. Both are synchronous and
    take tens of microseconds, cheap enough to call from an event loop. Thread-safe.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        mode: CacheMode | str = CacheMode.READ_WRITE,
        *,
        run_id: str | None = None,
        busy_timeout_ms: int = 30_000,
    ) -> None:
        self.mode = CacheMode(mode)
        self.path = Path(path) if path is not None else None
        self.run_id = run_id or uuid.uuid4().hex
        self.session_id = uuid.uuid4().hex
        # Plain counters (a pydantic model's attribute assignment costs more than the lookup it counts).
        self._hits = self._misses = self._writes = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._read_only = False  # opened immutable (read-only storage): the session's counters are not written
        self._last_flush = 0.0
        self._dirty = False
        if self.mode is CacheMode.OFF:
            return
        if self.path is None:
            raise ValueError(f"cache mode {self.mode.value!r} needs a database path")
        if self.mode is CacheMode.REPLAY_ONLY and not self.path.exists():
            raise FileNotFoundError(f"replay-only cache {self.path} does not exist")
        if self.mode is CacheMode.REPLAY_ONLY and read_only_storage(self.path):
            # Replay writes no entry; on read-only storage it writes no session either (nothing can be).
            with _sqlite_errors(self.path):
                self._conn = open_read_only(self.path, busy_timeout_ms / 1000.0)
                self._conn.execute("SELECT 1 FROM entries LIMIT 1").fetchall()
            self._read_only = True
            return
        if self.path.exists() and read_only_storage(self.path):
            raise CacheError(
                f"cache {self.path} is on read-only storage and cannot be written (mode {self.mode.value}); give a "
                "writable copy, or replay it (cache mode replay_only), which writes nothing"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _sqlite_errors(self.path):
            self._conn = _connect(self.path, busy_timeout_ms)
            try:
                now = time.time()
                self._conn.execute(
                    "INSERT INTO sessions (session_id, run_id, pid, mode, started_at, updated_at) "
                    "VALUES (?,?,?,?,?,?)",
                    (self.session_id, self.run_id, os.getpid(), self.mode.value, now, now),
                )
            except sqlite3.DatabaseError:
                self._conn.close()
                self._conn = None
                raise
        self._last_flush = time.monotonic()

    @property
    def stats(self) -> CacheSessionStats:
        """A copy of this session's counters."""
        return CacheSessionStats(hits=self._hits, misses=self._misses, writes=self._writes)

    def get(self, key: str, model: str) -> dict[str, Any] | None:
        """The entry stored under ``key``, or None; in replay-only mode a miss raises :class:`CacheMiss`.

        The entry is returned as stored, unchecked but for being a JSON object (a value that is none comes back as
        an :class:`UnusableEntry`): whether it is a recorded completion is the caller's to check.
        """
        if self._conn is None:
            return None
        with self._lock:
            try:
                row = self._conn.execute(_SELECT_ENTRY, (key,)).fetchone()
                if row is None:
                    self._misses += 1
                else:
                    self._hits += 1
                self._dirty = True
                if time.monotonic() - self._last_flush >= _STATS_FLUSH_INTERVAL_S:
                    self._flush_locked()
            except sqlite3.DatabaseError as exc:
                raise _cache_error(self.path, exc) from exc
        if row is None:
            if self.mode is CacheMode.REPLAY_ONLY:
                raise CacheMiss(key, model)
            return None
        try:
            value = _entry_value(row[0])
        except (ValueError, RecursionError, TypeError) as exc:
            return UnusableEntry(f"the entry is not JSON ({type(exc).__name__})")
        if not isinstance(value, dict):
            return UnusableEntry(f"the entry is {_JSON_KINDS.get(type(value), 'null')}, not a JSON object")
        return value

    def put(self, key: str, model: str, value: Mapping[str, Any], *, replace: bool = False) -> bool:
        """Store ``value`` under ``key`` unless an entry exists; True when a row was written.

        ``replace`` writes over an existing entry: only for an entry found not to be a recorded completion
        (:func:`commitbench.llm.parse_cache_entry`), whose call was made again.
        """
        if self._conn is None or self.mode is not CacheMode.READ_WRITE:
            return False
        text = jsoncodec.dumps(value).decode("utf-8")
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self._lock, _sqlite_errors(self.path):
            cursor = self._conn.execute(
                f"{verb} INTO entries (key, model, created_at, value) VALUES (?,?,?,?)",
                (key, model, time.time(), text),
            )
            written = cursor.rowcount == 1
            if written:
                self._writes += 1
                self._dirty = True
            self._maybe_flush()
        return written

    def _maybe_flush(self) -> None:
        if self._dirty and time.monotonic() - self._last_flush >= _STATS_FLUSH_INTERVAL_S:
            self._flush_locked()

    def _flush_locked(self) -> None:
        assert self._conn is not None
        if self._read_only:
            return
        s = CacheSessionStats(hits=self._hits, misses=self._misses, writes=self._writes)
        self._conn.execute(
            "UPDATE sessions SET hits=?, misses=?, writes=?, updated_at=? WHERE session_id=?",
            (s.hits, s.misses, s.writes, time.time(), self.session_id),
        )
        self._last_flush = time.monotonic()
        self._dirty = False

    def copy_to(self, path: str | os.PathLike[str]) -> int:
        """Write a consistent copy of the cache to a new file (SQLite's online backup); returns its entries.

        The copy is what the workers of a distributed run read locally; the copy of a cache in mode
        ``off`` is an empty cache.
        """
        target = Path(path)
        target.unlink(missing_ok=True)
        with _sqlite_errors(target):
            dest = sqlite3.connect(target)
            try:
                if self._conn is None:
                    dest.executescript(_SCHEMA)
                else:
                    with self._lock:
                        self._conn.backup(dest)
                return int(dest.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
            finally:
                dest.close()

    def absorb(self, source: str | os.PathLike[str]) -> tuple[int, set[str]]:
        """Add the entries of another cache file that this one lacks; returns (entries added, conflicting keys).

        A key both files hold with different completions is a conflict: this cache keeps its own
        answer, and whatever was played with the other one disagrees with it.
        """
        if self._conn is None or self.mode is not CacheMode.READ_WRITE:
            raise CacheError(f"cache {self.path} is not open for writing (mode {self.mode.value})")
        other = Path(source)
        if not other.is_file():
            raise FileNotFoundError(f"no cache database at {other}")
        if read_only_storage(other):
            problem = _unmerged_log(other)
            if problem is not None:
                raise CacheError(problem)
            attached = _uri(other, mode="ro", immutable="1")
        else:
            attached = _uri(other, mode="ro")
        with self._lock, _sqlite_errors(other):
            self._conn.execute("ATTACH DATABASE ? AS source", (attached,))  # only read
            try:
                before = int(self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
                self._conn.execute("BEGIN")
                self._conn.execute(
                    "INSERT OR IGNORE INTO entries (key, model, created_at, value) "
                    "SELECT key, model, created_at, value FROM source.entries"
                )
                self._conn.execute("COMMIT")
                added = int(self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]) - before
                rows = self._conn.execute(
                    "SELECT s.key, s.value, m.value FROM source.entries s JOIN main.entries m ON m.key = s.key "
                    "WHERE s.value != m.value"
                ).fetchall()
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                self._conn.execute("DETACH DATABASE source")
        conflicts = {key for key, theirs, ours in rows if _decoded(theirs) != _decoded(ours)}
        self._writes += added
        return added, conflicts

    def flush_stats(self) -> None:
        """Write this session's counters to the database now."""
        if self._conn is None:
            return
        with self._lock, _sqlite_errors(self.path):
            self._flush_locked()

    def close(self) -> None:
        """Flush the counters and close the connection (idempotent; the connection is closed even when
        the counters cannot be written)."""
        if self._conn is None:
            return
        with self._lock:
            try:
                with _sqlite_errors(self.path):
                    self._flush_locked()
            finally:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> CallCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        with self._lock, _sqlite_errors(self.path):
            return int(self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


class RunCacheStats(BaseModel):
    """Cache counters of one run (all sessions sharing a run id)."""

    run_id: str = Field(description="Run id the sessions share.")
    sessions: int = Field(description="Number of cache sessions (processes or clients) in the run.")
    started_at: float = Field(description="Unix time the first session started.")
    updated_at: float = Field(description="Unix time the counters were last written.")
    hits: int = Field(description="Lookups that found an entry.")
    misses: int = Field(description="Lookups that found nothing.")
    writes: int = Field(description="Entries written.")
    hit_rate: float | None = Field(description="hits / (hits + misses); null when there were no lookups.")


class CacheReport(BaseModel):
    """What ``commitbench cache stats`` shows."""

    path: str = Field(description="Database file.")
    entries: int = Field(description="Stored calls.")
    size_bytes: int = Field(description="Size on disk, including the WAL and shared-memory files.")
    entries_by_model: dict[str, int] = Field(description="Stored calls per model name.")
    runs: int = Field(description="Distinct run ids recorded.")
    last_run: RunCacheStats | None = Field(description="The most recent run that looked anything up.")


def describe_cache(path: str | os.PathLike[str]) -> CacheReport:
    """Read-only summary of a cache file (opens it without creating a session)."""
    db = Path(path)
    if not db.is_file():
        raise FileNotFoundError(f"no cache database at {db}")
    try:
        conn = open_read_only(db)
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{db} cannot be opened as a commitbench cache database: {exc}") from exc
    try:
        try:
            entries = int(conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{db} is not a commitbench cache database: {exc}") from exc
        by_model = dict(conn.execute("SELECT model, COUNT(*) FROM entries GROUP BY model ORDER BY model").fetchall())
        runs = int(conn.execute("SELECT COUNT(DISTINCT run_id) FROM sessions").fetchone()[0])
        last = conn.execute(
            "SELECT run_id FROM sessions WHERE hits + misses + writes > 0 ORDER BY started_at DESC LIMIT 1"
        ).fetchone()
        last_run = None
        if last is not None:
            row = conn.execute(
                "SELECT COUNT(*), MIN(started_at), MAX(updated_at), SUM(hits), SUM(misses), SUM(writes) "
                "FROM sessions WHERE run_id=?",
                (last[0],),
            ).fetchone()
            hits, misses = int(row[3]), int(row[4])
            last_run = RunCacheStats(
                run_id=last[0],
                sessions=int(row[0]),
                started_at=float(row[1]),
                updated_at=float(row[2]),
                hits=hits,
                misses=misses,
                writes=int(row[5]),
                hit_rate=hits / (hits + misses) if hits + misses else None,
            )
    finally:
        conn.close()
    size = sum(p.stat().st_size for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())
    return CacheReport(
        path=str(db),
        entries=entries,
        size_bytes=size,
        entries_by_model={str(k): int(v) for k, v in by_model.items()},
        runs=runs,
        last_run=last_run,
    )
