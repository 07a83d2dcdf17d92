"""``PostgresSink``: snapshots in PostgreSQL, in one schema (the ``postgres`` extra).

One table, ``<schema>.snapshots``, with the JSON body in a TEXT column (as the session store
keeps messages: ASCII JSON, because ``jsonb`` refuses the NUL escape) and indexed time, plan,
mode and status columns; the session's user and session ids are indexed inside the body. The
writer thread and readers share one autocommit connection behind a lock; driver errors map onto
``StoreUnavailable`` / ``StoreError`` without the driver's text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from contextwright.errors import InvalidInputError, StoreError, StoreUnavailable
from contextwright.observe.sinks import SnapshotQuery, not_found, read_rows, select_sql
from contextwright.observe.snapshot import Snapshot

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CREATE = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.snapshots (
        id TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, plan TEXT NOT NULL,
        mode TEXT, status TEXT NOT NULL, body TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS snapshots_by_time ON {s}.snapshots (created_at)",
    "CREATE INDEX IF NOT EXISTS snapshots_by_plan ON {s}.snapshots (plan, created_at)",
)
_SESSION_ID = "((body::json -> 'session') ->> '{name}')"
"""A snapshot's session ``user_id`` or ``session_id``, as its index reads it."""
_SESSION_INDEXES = tuple(
    f"CREATE INDEX IF NOT EXISTS snapshots_by_{name} ON {{s}}.snapshots "
    f"({_SESSION_ID.format(name=name)}, created_at)" for name in ("user_id", "session_id"))
"""Indexes on the session's ids inside the body: no column to fill, so a writer of an older
version keeps them up to date too, and rows stored before are indexed when they are made."""


class PostgresSink:
    """A ``SnapshotSink`` in PostgreSQL (psycopg 3)."""

    def __init__(self, dsn: str, *, schema: str = "contextwright") -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError("schema must be a lower-case SQL identifier")
        self._schema = schema
        self._lock = threading.Lock()
        try:
            import psycopg
        except ImportError as exc:
            raise StoreUnavailable("PostgresSink needs psycopg: "
                                   "pip install 'contextwright[postgres]'") from exc
        try:
            self._db: Any = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"postgres sink unavailable ({type(exc).__name__})") from exc
        with self._errors() as db, db.transaction():
            for statement in (*_CREATE, *_SESSION_INDEXES):
                db.execute(self._sql(statement))

    def _sql(self, template: str) -> str:
        return template.format(s=f'"{self._schema}"')

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Insert the batch in one transaction."""
        rows = [(s.id, s.created_at, s.plan, s.mode, s.status, s.to_json()) for s in snapshots]
        with self._errors() as db, db.transaction(), db.cursor() as cursor:
            cursor.executemany(self._sql(
                "INSERT INTO {s}.snapshots VALUES (%s,%s,%s,%s,%s,%s) "
                "ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body"), rows)

    def read(self, query: SnapshotQuery | None = None) -> list[Snapshot]:
        """Read through the time, plan, user and session indexes."""
        query = query or SnapshotQuery()
        sql, params = select_sql(query, "{s}.snapshots", "%s", _SESSION_ID)
        with self._errors() as db:
            rows = db.execute(self._sql(sql), params).fetchall()
        return read_rows([body for (body,) in reversed(rows)], query)

    def get(self, snapshot_id: str) -> Snapshot:
        """One snapshot by id."""
        with self._errors() as db:
            row = db.execute(self._sql("SELECT body FROM {s}.snapshots WHERE id = %s"),
                             (snapshot_id,)).fetchone()
        if row is None:
            raise not_found(snapshot_id)
        return Snapshot.from_json(row[0])

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        """Delete by age, then all but the newest ``keep_last``, in one transaction."""
        removed = 0
        with self._errors() as db, db.transaction():
            if older_than is not None:
                removed += db.execute(self._sql(
                    "DELETE FROM {s}.snapshots WHERE created_at < %s"), (older_than,)).rowcount
            if keep_last is not None:
                removed += db.execute(self._sql(
                    "DELETE FROM {s}.snapshots WHERE id NOT IN (SELECT id FROM {s}.snapshots "
                    "ORDER BY created_at DESC, id DESC LIMIT %s)"), (keep_last,)).rowcount
        return removed

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _errors(self) -> Iterator[Any]:
        import psycopg

        with self._lock:
            try:
                yield self._db
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(
                    f"postgres sink unavailable ({type(exc).__name__})") from exc
            except psycopg.Error as exc:
                raise StoreError(f"postgres sink failed ({type(exc).__name__})") from exc
