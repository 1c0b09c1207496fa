"""Indexes of large append-only files, kept between processes: what a first read found, reused while the file is
unchanged.

A report of a run of 100,000 traces first passes over ``traces.jsonl`` to find the lines that count and to check
every line against the run's cells, and over the labels file to find each run key's latest record; only then
does it read. Each pass is seconds, and repeats work an earlier command did on the same bytes. An index made by
such a pass is stored here under the file's state (:func:`commitbench.jsonl.file_state`: its path, device,
inode, size and modification and change times; any write changes the change time) and a *context* (what else
the pass depended on, such as the cells the lines were checked against); a later pass over the file in the
same state, with the same context, takes the stored index instead. A file written since, moved or copied has
another state: its index is made again.

Where: one SQLite file, ``read-index.sqlite``, in ``$COMMITBENCH_CACHE_DIR`` (default
``$XDG_CACHE_HOME/commitbench``, else ``~/.cache/commitbench``), never in the run directory (which may be on
read-only storage, and which ``view --out`` promises not to write). ``COMMITBENCH_CACHE_DIR=off`` keeps no index.
At most :data:`KEEP` indexes are kept (the least recently used go). A store that cannot be opened or written
is reported once on stderr, and the passes are then made every time: an index saves time, it never changes
what a reader finds.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from commitbench.digests import digest

__all__ = ["CACHE_DIR_ENV", "INDEX_FILE", "KEEP", "index_dir", "load_index", "save_index", "worth_indexing"]

CACHE_DIR_ENV = "COMMITBENCH_CACHE_DIR"
OFF = "off"
INDEX_FILE = "read-index.sqlite"
KEEP = 64  # indexes kept (one per file state and context)
# Files with fewer bytes are passed over again rather than indexed (the pass is quicker than the store).
INDEXED_BYTES = 4 << 20
_TIMEOUT_S = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS indexes (
    name TEXT PRIMARY KEY,  -- the digest of the kind, the file's state and the context
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    data BLOB NOT NULL,
    used REAL NOT NULL
)
"""

_lock = threading.Lock()
_reported: set[str] = set()  # the stores whose failure was reported (once each)


def index_dir() -> Path | None:
    """Where the store is (None: ``COMMITBENCH_CACHE_DIR=off``)."""
    chosen = os.environ.get(CACHE_DIR_ENV, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "commitbench"


def worth_indexing(state: tuple[object, ...]) -> bool:
    """Whether a file in ``state`` (:func:`commitbench.jsonl.file_state`: its size fourth) is large enough for its
    index to be kept."""
    size = state[3] if len(state) > 3 else None
    return isinstance(size, int) and size >= INDEXED_BYTES


def _name(kind: str, state: tuple[object, ...], context: str) -> str:
    return digest(repr((kind, state, context)))


def _report(where: Path, exc: BaseException) -> None:
    if str(where) not in _reported:
        _reported.add(str(where))
        print(f"commitbench: the read index {where / INDEX_FILE} cannot be used ({exc}); large files are indexed "
              f"again at each read (set {CACHE_DIR_ENV} to a writable directory, or to '{OFF}')", file=sys.stderr)


@contextlib.contextmanager
def _connection(where: Path, create: bool) -> Iterator[sqlite3.Connection | None]:
    path = where / INDEX_FILE
    if not create and not path.exists():
        yield None
        return
    if create:
        where.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=_TIMEOUT_S, isolation_level=None)
    try:
        if create:  # a store is made by its first writer; a reader only reads
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(_SCHEMA)
        yield connection
    finally:
        connection.close()


def load_index(kind: str, state: tuple[object, ...], context: str = "") -> bytes | None:
    """The index of ``kind`` stored for a file in ``state`` with ``context``; None when there is none."""
    where = index_dir()
    if where is None:
        return None
    name = _name(kind, state, context)
    try:
        with _lock, _connection(where, create=False) as connection:
            if connection is None:
                return None
            row = connection.execute("SELECT data FROM indexes WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None
            with contextlib.suppress(sqlite3.Error):  # a store that can be read and not written still serves
                connection.execute("UPDATE indexes SET used = ? WHERE name = ?", (time.time(), name))
            return bytes(row[0])
    except (OSError, sqlite3.Error) as exc:
        _report(where, exc)
        return None


def save_index(kind: str, state: tuple[object, ...], data: bytes, context: str = "") -> None:
    """Store ``data`` as the index of ``kind`` of a file in ``state`` with ``context`` (the least recently used
    indexes beyond :data:`KEEP` are let go)."""
    where = index_dir()
    if where is None:
        return
    path = str(state[0]) if state else ""
    try:
        with _lock, _connection(where, create=True) as connection:
            assert connection is not None
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT OR REPLACE INTO indexes (name, kind, path, data, used) VALUES (?, ?, ?, ?, ?)",
                                (_name(kind, state, context), kind, path, data, time.time()))
            # An index of an earlier state of the same file and kind is of no use any more.
            connection.execute("DELETE FROM indexes WHERE kind = ? AND path = ? AND name != ?",
                               (kind, path, _name(kind, state, context)))
            connection.execute("DELETE FROM indexes WHERE name NOT IN "
                               "(SELECT name FROM indexes ORDER BY used DESC LIMIT ?)", (KEEP,))
            connection.execute("COMMIT")
    except (OSError, sqlite3.Error) as exc:
        _report(where, exc)
