"""``PostgresSink``: snapshots in PostgreSQL, in one schema (the ``postgres`` extra).

One table, ``<schema>.snapshots``, with the JSON body in a TEXT column (as the session store
keeps messages: ASCII JSON, because ``jsonb`` refuses the NUL escape) and indexed time, plan,
mode and status columns; the session's user and session ids are indexed inside the body. The
writer thread and readers share one autocommit connection behind a lock. A connection the
server dropped (a restart, a failover, an idle timeout) is replaced on the next call, which is
tried once more on the new one; driver errors map onto ``StoreUnavailable`` / ``StoreError``
without the driver's text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from contextwright.errors import InvalidInputError, StoreError, StoreUnavailable
from contextwright.observe.sinks import (
    SnapshotQuery,
    UnreadableRows,
    not_found,
    read_sql,
    stored_snapshot,
)
from contextwright.observe.snapshot import Snapshot

T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CREATE = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.snapshots (
        id TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, plan TEXT NOT NULL,
        mode TEXT, status TEXT NOT NULL, body TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS snapshots_by_time ON {s}.snapshots (created_at)",
    "CREATE INDEX IF NOT EXISTS snapshots_by_plan ON {s}.snapshots (plan, created_at)",
)
_PARSABLE_BODY = (r"regexp_replace(body, '\\u(0000|[dD][89a-fA-F][0-9a-fA-F][0-9a-fA-F])', "
                  r"'\\u0001', 'g')")
"""The body as PostgreSQL's ``json`` parser accepts it: a NUL escape (text a caller may send)
and a surrogate escape (half of an emoji's pair, or a lone one) make ``json`` refuse the whole
body, so they become ``\\u0001``, which stays valid JSON whatever precedes it; the session's
ids, which hold neither, are read unchanged."""
_SESSION_ID = f"(({_PARSABLE_BODY}::json -> 'session') ->> '{{name}}')"
"""A snapshot's session ``user_id`` or ``session_id``, as its index reads it."""
_SESSION_INDEXES = tuple(
    f"CREATE INDEX IF NOT EXISTS snapshots_by_{name}_v2 ON {{s}}.snapshots "
    f"({_SESSION_ID.format(name=name)}, created_at)" for name in ("user_id", "session_id"))
"""Indexes on the session's ids inside the body: no column to fill, so a writer of an older
version keeps them up to date too, and rows stored before are indexed when they are made."""
_OLD_SESSION_INDEXES = tuple(f"DROP INDEX IF EXISTS {{s}}.snapshots_by_{name}"
                             for name in ("user_id", "session_id"))
"""The indexes of earlier versions, which parsed the body as it is and so refused every
snapshot holding a NUL or a surrogate escape."""


class PostgresSink:
    """A ``SnapshotSink`` in PostgreSQL (psycopg 3).

    A row that is not a snapshot this version reads (damaged, or of a newer layout) is skipped
    by reads with a warning and listed by ``unreadable_rows``; ``get`` of it raises
    ``CorruptRecordError`` naming it.
    """

    def __init__(self, dsn: str, *, schema: str = "contextwright") -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError("schema must be a lower-case SQL identifier")
        self._schema = schema
        self._dsn = dsn
        self._lock = threading.Lock()
        self._closed = False
        self._unreadable = UnreadableRows()
        try:
            import psycopg  # noqa: F401  (only to say what is missing)
        except ImportError as exc:
            raise StoreUnavailable("PostgresSink needs psycopg: "
                                   "pip install 'contextwright[postgres]'") from exc
        self._db: Any = self._connect()
        self._run(self._create)

    def _connect(self) -> Any:
        import psycopg

        try:
            return psycopg.connect(self._dsn, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"postgres sink unavailable ({type(exc).__name__})") from exc

    def _create(self, db: Any) -> None:
        with db.transaction():
            for statement in (*_CREATE, *_OLD_SESSION_INDEXES, *_SESSION_INDEXES):
                db.execute(self._sql(statement))

    def _sql(self, template: str) -> str:
        return template.format(s=f'"{self._schema}"')

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Insert the batch in one transaction."""
        rows = [(s.id, s.created_at, s.plan, s.mode, s.status, s.to_json()) for s in snapshots]
        sql = self._sql("INSERT INTO {s}.snapshots VALUES (%s,%s,%s,%s,%s,%s) "
                        "ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body")

        def insert(db: Any) -> None:
            with db.transaction(), db.cursor() as cursor:
                cursor.executemany(sql, rows)

        self._run(insert)  # tried again on a new connection: the upsert makes that safe

    def read(self, query: SnapshotQuery | None = None) -> list[Snapshot]:
        """Read through the time, plan, user and session indexes."""
        return read_sql(query or SnapshotQuery(), self._fetch, table="{s}.snapshots",
                        placeholder="%s", session_id=_SESSION_ID, unreadable=self._unreadable)

    def _fetch(self, sql: str, params: list[object]) -> list[Any]:
        return self._run(lambda db: db.execute(self._sql(sql), params).fetchall())

    def unreadable_rows(self) -> list[tuple[str, str]]:
        """The rows reads skipped because they are not snapshots: id, why."""
        return self._unreadable.listed()

    def get(self, snapshot_id: str) -> Snapshot:
        """One snapshot by id; ``CorruptRecordError`` naming it when it cannot be read."""
        sql = self._sql("SELECT body FROM {s}.snapshots WHERE id = %s")
        row = self._run(lambda db: db.execute(sql, (snapshot_id,)).fetchone())
        if row is None:
            raise not_found(snapshot_id)
        return stored_snapshot(snapshot_id, row[0])

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        """Delete by age, then all but the newest ``keep_last``, in one transaction."""
        def delete(db: Any) -> int:
            removed = 0
            with db.transaction():
                if older_than is not None:
                    removed += db.execute(self._sql(
                        "DELETE FROM {s}.snapshots WHERE created_at < %s"),
                        (older_than,)).rowcount
                if keep_last is not None:
                    removed += db.execute(self._sql(
                        "DELETE FROM {s}.snapshots WHERE id NOT IN (SELECT id FROM "
                        "{s}.snapshots ORDER BY created_at DESC, id DESC LIMIT %s)"),
                        (keep_last,)).rowcount
            return removed

        removed = self._run(delete)
        self._unreadable.purged()
        return removed

    def close(self) -> None:
        """Close the connection; later calls raise ``StoreUnavailable``."""
        with self._lock:
            self._closed = True
            self._db.close()

    def _run(self, work: Callable[[Any], T]) -> T:
        """``work`` on the connection, under the lock, with driver errors mapped.

        A connection found dropped is replaced first; one that drops during ``work`` is
        replaced and ``work`` tried once more (each call is one transaction, so a retry
        repeats it whole), so a server restart costs no snapshot once the server is back.
        """
        import psycopg

        with self._lock:
            if self._closed:
                raise StoreUnavailable("postgres sink is closed")
            try:
                try:
                    return work(self._usable_connection())
                except psycopg.OperationalError:
                    if not _lost(self._db):
                        raise
                    return work(self._usable_connection())
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(
                    f"postgres sink unavailable ({type(exc).__name__})") from exc
            except psycopg.Error as exc:
                raise StoreError(f"postgres sink failed ({type(exc).__name__})") from exc

    def _usable_connection(self) -> Any:
        """The connection, opened again when the server dropped it (the lock is held)."""
        if _lost(self._db):
            try:
                self._db.close()
            except Exception:  # closing a dead connection may fail; it is gone either way
                pass
            self._db = self._connect()
        return self._db


def _lost(db: Any) -> bool:
    """Whether ``db`` can no longer be used: closed, or broken by a dropped link."""
    try:
        return bool(db.closed or db.broken)
    except Exception:  # a connection that cannot say its state is not used again
        return True
