"""SQLite storage of the ledger: one file, WAL journal, versioned schema migrations.

Every write happens inside ``BEGIN IMMEDIATE`` so that read-check-write sequences from several
processes are serialised by SQLite's write lock; a busy timeout makes the others wait instead of
failing. Rows are the current state; the ``events`` table is the append-only audit trail.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from commitbench.ledger.errors import (
    ClockWentBack,
    LedgerError,
    LedgerUnavailable,
    NotALedger,
    SchemaTooNew,
    UnreadableCommitment,
)
from commitbench.ledger.models import (
    OPEN_STATUSES,
    AuditEvent,
    AuditEventKind,
    Commitment,
    CommitmentKind,
    CommitmentStatus,
    DueGroup,
    DueItem,
    Listing,
    UnreadableRow,
)
from commitbench.ledger.transitions import EventDraft


def to_db_time(value: datetime | None) -> str | None:
    """Fixed-width UTC text (a four-digit year, microseconds, +00:00), so that string order is time order."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def from_db_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


# ---------------------------------------------------------------- migrations


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[sqlite3.Connection], None]


def _create_tables(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE commitments (
            id          INTEGER PRIMARY KEY,
            kind        TEXT NOT NULL,
            status      TEXT NOT NULL,
            is_open     INTEGER NOT NULL,
            due_key     TEXT,
            debtor      TEXT NOT NULL,
            creditor    TEXT NOT NULL,
            delegates   TEXT NOT NULL,
            action      TEXT NOT NULL,
            condition   TEXT,
            due_at      TEXT,
            rrule       TEXT,
            starts_at   TEXT,
            timezone    TEXT,
            bookmark    TEXT,
            last_closed TEXT,
            scope       TEXT NOT NULL,
            created_at  TEXT NOT NULL,
            updated_at  TEXT NOT NULL,
            version     INTEGER NOT NULL
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE events (
            seq           INTEGER PRIMARY KEY AUTOINCREMENT,
            commitment_id INTEGER NOT NULL REFERENCES commitments(id),
            at            TEXT NOT NULL,
            actor         TEXT NOT NULL,
            kind          TEXT NOT NULL,
            reason        TEXT NOT NULL,
            from_status   TEXT,
            to_status     TEXT NOT NULL,
            changes       TEXT NOT NULL,
            details       TEXT NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX events_by_commitment ON events(commitment_id, seq)")


def _create_due_indexes(conn: sqlite3.Connection) -> None:
    # The due list reads open commitments in due order; a partial index keeps settled ones out of it.
    conn.execute("CREATE INDEX commitments_open_due ON commitments(due_key, id) WHERE is_open = 1")
    conn.execute("CREATE INDEX commitments_by_debtor ON commitments(debtor, id)")
    conn.execute("CREATE INDEX commitments_by_creditor ON commitments(creditor, id)")


_TIME_COLUMNS = {
    "commitments": ("due_key", "due_at", "starts_at", "bookmark", "last_closed", "created_at", "updated_at"),
    "events": ("at",),
}


def _pad_short_years(conn: sqlite3.Connection) -> None:
    # Versions before this one wrote a year below 1000 with fewer than four digits ("999-06-01..."), which
    # neither parses back nor sorts by time. Pad those years; every other value is left as it is.
    for table, columns in _TIME_COLUMNS.items():
        for column in columns:
            year = f"substr({column}, 1, instr({column}, '-') - 1)"
            conn.execute(
                f"UPDATE {table} SET {column} = printf('%04d', CAST({year} AS INTEGER)) "
                f"|| substr({column}, instr({column}, '-')) "
                f"WHERE instr({column}, '-') BETWEEN 2 AND 4 AND {year} NOT GLOB '*[^0-9]*'"
            )


def _create_add_keys(conn: sqlite3.Connection) -> None:
    # A caller that may send the same promise twice (a client retrying a request) names it with a key; the
    # second add with that key returns the first commitment instead of adding another.
    conn.execute(
        "CREATE TABLE IF NOT EXISTS add_keys "
        "(key TEXT PRIMARY KEY, commitment_id INTEGER NOT NULL REFERENCES commitments(id))"
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "commitments and audit events", _create_tables),
    Migration(2, "indexes for the due list and party look-ups", _create_due_indexes),
    Migration(3, "four-digit years in stored times", _pad_short_years),
    Migration(4, "idempotency keys of added commitments", _create_add_keys),
)
# Written into the SQLite header (PRAGMA application_id) of every ledger file: "CBLG".
LEDGER_APPLICATION_ID = 0x43424C47
_FIRST_MIGRATION = MIGRATIONS[0].description


def schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if row is None:
        return 0
    value = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    return int(value or 0)


def migrate(
    conn: sqlite3.Connection, now: Callable[[], datetime], migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Bring the schema up to the newest migration, in order, under the write lock. Returns the version.

    ``now`` stamps each applied migration (the ledger passes its injected clock).
    """
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(migrations) + 1)):
        raise ValueError(f"migrations must be numbered 1..n in order, got {versions}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        current = schema_version(conn)
        if current > len(migrations):
            raise SchemaTooNew(
                f"ledger database has schema version {current}, this code knows up to {len(migrations)}"
            )
        for migration in migrations[current:]:
            migration.apply(conn)
            conn.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.description, to_db_time(now())),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return max(current, len(migrations))


# ---------------------------------------------------------------- store

# SQLite's integers are 64-bit: an id or a count beyond that is no row of any table.
_MAX_ROWID = 2**63 - 1


def _storable(commitment_id: int) -> bool:
    return isinstance(commitment_id, int) and 1 <= commitment_id <= _MAX_ROWID


def _sql_limit(limit: int | None) -> int:
    return -1 if limit is None or limit > _MAX_ROWID else limit


_EVENT_COLUMNS = "seq, commitment_id, at, actor, kind, reason, from_status, to_status, changes, details"
_OPEN_VALUES = tuple(s.value for s in OPEN_STATUSES)


class ConcurrentUpdate(LedgerError):
    """A row changed between read and write despite the write lock (should never happen)."""


# SQLite builds each row's JSON; pydantic-core parses a whole batch in one call, which is several
# times faster than building models field by field in Python and still validates what it reads. A
# malformed delegates list goes in as a string (json() would fail the whole query) and fails that row alone.
_COMMITMENT_JSON = (
    "json_object('id', id, 'kind', kind, 'status', status, 'debtor', debtor, 'creditor', creditor, "
    "'delegates', CASE WHEN json_valid(delegates) THEN json(delegates) ELSE delegates END, "
    "'action', action, 'condition', condition, 'due_at', due_at, "
    "'rrule', rrule, 'starts_at', starts_at, 'timezone', timezone, 'bookmark', bookmark, "
    "'last_closed', last_closed, 'scope', scope, 'created_at', created_at, 'updated_at', updated_at, "
    "'version', version)"
)
RowT = TypeVar("RowT", Commitment, DueItem)
_COMMITMENTS = TypeAdapter(list[Commitment])
_DUE_ITEMS = TypeAdapter(list[DueItem])


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"] if part not in (0, "commitment"))
        return f"{where or 'row'}: {first['msg']} (stored value {str(first.get('input'))[:80]!r})"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _parse_batch(adapter: TypeAdapter[list[RowT]], rows: Sequence[Sequence[Any]]) -> Listing[RowT]:
    """Rows of ``(json, id)``, parsed in one call; when that fails, one by one, so that a bad row is
    reported by its id and the others are still read."""
    try:
        return Listing(adapter.validate_json("[" + ",".join(row[0] for row in rows) + "]"))
    except (ValidationError, ValueError):
        pass
    parsed: list[RowT] = []
    unreadable: list[UnreadableRow] = []
    for text, commitment_id in rows:
        try:
            parsed.extend(adapter.validate_json(f"[{text}]"))
        except (ValidationError, ValueError) as exc:
            unreadable.append(UnreadableRow(commitment_id=commitment_id, problem=_problem(exc)))
    return Listing(parsed, tuple(unreadable))


def _row_to_event(row: Sequence[Any]) -> AuditEvent:
    try:
        return AuditEvent(
            seq=row[0],
            commitment_id=row[1],
            at=from_db_time(row[2]),
            actor=row[3],
            kind=AuditEventKind(row[4]),
            reason=row[5],
            from_status=CommitmentStatus(row[6]) if row[6] is not None else None,
            to_status=CommitmentStatus(row[7]),
            changes=json.loads(row[8]),
            details=json.loads(row[9]),
        )
    except (ValidationError, ValueError, TypeError) as exc:
        raise UnreadableCommitment(row[1], f"event {row[0]}: {_problem(exc)}") from None


def _row_values(c: Commitment) -> dict[str, Any]:
    due = c.next_due if c.is_open else None
    return {
        "id": c.id,
        "kind": c.kind.value,
        "status": c.status.value,
        "is_open": int(c.is_open),
        "due_key": to_db_time(due),
        "debtor": c.debtor,
        "creditor": c.creditor,
        "delegates": json.dumps(list(c.delegates), ensure_ascii=False),
        "action": c.action,
        "condition": c.condition,
        "due_at": to_db_time(c.due_at),
        "rrule": c.rrule,
        "starts_at": to_db_time(c.starts_at),
        "timezone": c.timezone,
        "bookmark": to_db_time(c.bookmark),
        "last_closed": to_db_time(c.last_closed),
        "scope": c.scope,
        "created_at": to_db_time(c.created_at),
        "updated_at": to_db_time(c.updated_at),
        "version": c.version,
    }


def _is_ledger_before_the_marker(conn: sqlite3.Connection, names: set[str]) -> bool:
    """A ledger written before files were marked: its tables and its first migration's record."""
    if not {"schema_version", "commitments", "events"} <= names:
        return False
    row = conn.execute("SELECT description FROM schema_version WHERE version = 1").fetchone()
    return row is not None and row[0] == _FIRST_MIGRATION


class LedgerStore:
    """The SQLite file behind a ledger. One instance per thread (sqlite3 connections are not shared).

    A missing or empty file becomes a new ledger, unless ``create`` is off: then a missing file (or
    folder) is refused and nothing is created, as a command that only reads needs. An existing database
    is opened only if it is one (the ledger's mark in the SQLite header, or the tables of a ledger
    written before the mark existed); another application's database is refused, and left untouched,
    unless ``init_existing`` asks to add the ledger's tables to it. A write the database refuses (a
    read-only file, a full disk) raises :class:`LedgerUnavailable`; nothing of it is kept.
    """

    def __init__(
        self,
        path: str | Path,
        now: Callable[[], datetime],
        busy_timeout_ms: int = 10_000,
        init_existing: bool = False,
        create: bool = True,
    ) -> None:
        self.path = str(path)
        if not create and self.path != ":memory:" and not Path(self.path).is_file():
            raise LedgerUnavailable(f"no ledger at {self.path}: the file does not exist (only 'add' creates one)")
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=busy_timeout_ms / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerUnavailable(f"cannot open {self.path}: {exc}") from None
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            marked = self._check_is_ledger(init_existing, create)
            if self.path != ":memory:":
                self.conn.execute("PRAGMA journal_mode = WAL")
            # FULL: a committed transition survives a power cut, not only a process crash.
            self.conn.execute("PRAGMA synchronous = FULL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.version = migrate(self.conn, now)
            if not marked:
                self.conn.execute(f"PRAGMA application_id = {LEDGER_APPLICATION_ID}")
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise NotALedger(f"{self.path} is not a SQLite database ({exc})") from None
            raise LedgerUnavailable(f"cannot use {self.path}: {exc}") from None
        except BaseException:
            self.conn.close()
            raise

    def _check_is_ledger(self, init_existing: bool, create: bool = True) -> bool:
        """Whether the file already carries the ledger's mark; raises NotALedger for a foreign database, and
        LedgerUnavailable for an empty one (a 0-byte file, say) when the ledger may not be created."""
        application_id = int(self.conn.execute("PRAGMA application_id").fetchone()[0])
        if application_id == LEDGER_APPLICATION_ID:
            return True
        names = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master")}
        if application_id != 0:
            raise NotALedger(
                f"{self.path} belongs to another application (SQLite application_id {application_id}); "
                "a ledger needs a file of its own"
            )
        if not names and not create and self.path != ":memory:":
            raise LedgerUnavailable(
                f"no ledger in {self.path}: the file holds no database tables yet (only 'add' creates a ledger); "
                "nothing was written"
            )
        if not names or _is_ledger_before_the_marker(self.conn, names) or init_existing:
            return False
        shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
        raise NotALedger(
            f"{self.path} is a SQLite database but not a ledger (it holds {shown}); nothing was written. "
            "Give another file, or pass --init (init_existing=True) to add the ledger's tables to this one"
        )

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the database write lock up front; a write the database refuses
        (read-only, full, an I/O error) is rolled back and raised as :class:`LedgerUnavailable`."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise LedgerUnavailable(f"cannot write to {self.path}: {exc}") from None
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            self._rollback()
            raise LedgerUnavailable(f"cannot write to {self.path}: {exc}") from None
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            with suppress(sqlite3.Error):  # the failed write is what gets reported
                self.conn.execute("ROLLBACK")

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several queries see one consistent state."""
        self.conn.execute("BEGIN")
        try:
            yield self.conn
        finally:
            self.conn.execute("COMMIT")

    # -- writes (call inside write())

    def next_id(self) -> int:
        return int(self.conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM commitments").fetchone()[0])

    def insert(self, commitment: Commitment) -> None:
        values = _row_values(commitment)
        names = ", ".join(values)
        marks = ", ".join(f":{name}" for name in values)
        self.conn.execute(f"INSERT INTO commitments ({names}) VALUES ({marks})", values)

    def keyed(self, key: str) -> int | None:
        """The id of the commitment added under ``key``, or None."""
        row = self.conn.execute("SELECT commitment_id FROM add_keys WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row is not None else None

    def remember_key(self, key: str, commitment_id: int) -> None:
        self.conn.execute("INSERT INTO add_keys (key, commitment_id) VALUES (?, ?)", (key, commitment_id))

    def update(self, commitment: Commitment, expected_version: int) -> None:
        """Write the new state only if the row still has ``expected_version`` (compare-and-set)."""
        values = _row_values(commitment)
        assignments = ", ".join(f"{name} = :{name}" for name in values if name != "id")
        cursor = self.conn.execute(
            f"UPDATE commitments SET {assignments} WHERE id = :id AND version = :expected_version",
            {**values, "expected_version": expected_version},
        )
        if cursor.rowcount != 1:
            raise ConcurrentUpdate(f"commitment {commitment.id} changed underneath this write")

    def latest_event_time(self, commitment_id: int) -> datetime | None:
        """The time of the commitment's latest recorded event (None when it has none)."""
        row = self.conn.execute(
            "SELECT at FROM events WHERE commitment_id = ? ORDER BY seq DESC LIMIT 1", (commitment_id,)
        ).fetchone()
        return from_db_time(row[0]) if row is not None else None

    def append(self, commitment_id: int, drafts: Sequence[EventDraft]) -> list[AuditEvent]:
        """Record events of a commitment, refusing (ClockWentBack) any dated before its latest recorded event."""
        latest = self.latest_event_time(commitment_id) if drafts else None
        for draft in drafts:
            if latest is not None and draft.at < latest:
                raise ClockWentBack(commitment_id, draft.at, latest)
            latest = draft.at
        stored = []
        for draft in drafts:
            cursor = self.conn.execute(
                "INSERT INTO events (commitment_id, at, actor, kind, reason, from_status, to_status, changes, "
                "details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    commitment_id,
                    to_db_time(draft.at),
                    draft.actor,
                    draft.kind.value,
                    draft.reason,
                    draft.from_status.value if draft.from_status is not None else None,
                    draft.to_status.value,
                    json.dumps(draft.changes, ensure_ascii=False, sort_keys=True),
                    json.dumps(draft.details, ensure_ascii=False, sort_keys=True),
                ),
            )
            stored.append(
                AuditEvent(
                    seq=int(cursor.lastrowid or 0),
                    commitment_id=commitment_id,
                    at=draft.at,
                    actor=draft.actor,
                    kind=draft.kind,
                    reason=draft.reason,
                    from_status=draft.from_status,
                    to_status=draft.to_status,
                    changes=draft.changes,
                    details=draft.details,
                )
            )
        return stored

    # -- reads

    def get(self, commitment_id: int) -> Commitment | None:
        """The commitment, None when there is none; UnreadableCommitment when its row does not read back."""
        if not _storable(commitment_id):
            return None
        row = self.conn.execute(
            f"SELECT {_COMMITMENT_JSON}, id FROM commitments WHERE id = ?", (commitment_id,)
        ).fetchone()
        if row is None:
            return None
        parsed = _parse_batch(_COMMITMENTS, [row])
        if parsed.unreadable:
            raise UnreadableCommitment(commitment_id, parsed.unreadable[0].problem)
        return parsed[0]

    def history(self, commitment_id: int) -> list[AuditEvent]:
        if not _storable(commitment_id):
            return []
        rows = self.conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE commitment_id = ? ORDER BY seq", (commitment_id,)
        ).fetchall()
        return [_row_to_event(row) for row in rows]

    def event_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def select(
        self,
        *,
        statuses: Sequence[CommitmentStatus] | None = None,
        kind: CommitmentKind | None = None,
        debtor: str | None = None,
        creditor: str | None = None,
        scope: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> Listing[Commitment]:
        clauses, params = self._filters(debtor=debtor, creditor=creditor, scope=scope)
        if statuses:
            clauses.append(f"status IN ({', '.join('?' for _ in statuses)})")
            params.extend(s.value for s in statuses)
        if kind is not None:
            clauses.append("kind = ?")
            params.append(kind.value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        params.extend([_sql_limit(limit), min(offset, _MAX_ROWID)])
        rows = self.conn.execute(
            f"SELECT {_COMMITMENT_JSON}, id FROM commitments {where} ORDER BY id LIMIT ? OFFSET ?", params
        ).fetchall()
        return _parse_batch(_COMMITMENTS, rows)

    def due_items(
        self,
        group: DueGroup,
        lower: datetime | None,
        upper: datetime | None,
        unscheduled: bool,
        limit: int | None,
        *,
        debtor: str | None = None,
        creditor: str | None = None,
        scope: str | None = None,
    ) -> Listing[DueItem]:
        """Open commitments with ``lower <= due < upper`` (or no due time), in (due, id) order, as ``group``."""
        clauses, params = self._filters(debtor=debtor, creditor=creditor, scope=scope)
        clauses.insert(0, "is_open = 1")
        params.insert(0, group.value)
        if unscheduled:
            clauses.append("due_key IS NULL")
        else:
            clauses.append("due_key IS NOT NULL")
            if lower is not None:
                clauses.append("due_key >= ?")
                params.append(to_db_time(lower))
            if upper is not None:
                clauses.append("due_key < ?")
                params.append(to_db_time(upper))
        params.append(_sql_limit(limit))
        # Without a party filter the partial due index is always the right plan; say so rather than
        # rely on statistics the file may not have. With one, let the planner pick the party index.
        hint = "INDEXED BY commitments_open_due" if debtor is None and creditor is None else ""
        rows = self.conn.execute(
            f"SELECT json_object('group', ?, 'due_at', due_key, 'commitment', {_COMMITMENT_JSON}), id "
            f"FROM commitments {hint} WHERE {' AND '.join(clauses)} ORDER BY due_key, id LIMIT ?",
            params,
        ).fetchall()
        return _parse_batch(_DUE_ITEMS, rows)

    @staticmethod
    def _filters(
        *, debtor: str | None, creditor: str | None, scope: str | None
    ) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("debtor", debtor), ("creditor", creditor), ("scope", scope)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        return clauses, params
