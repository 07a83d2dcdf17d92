"""``PostgresStore``: sessions in PostgreSQL (psycopg 3), for many processes and machines.

Each session has a counter row; an append locks it (``SELECT … FOR UPDATE`` / upsert), bumps
``last_seq`` and inserts the messages in the same transaction, so concurrent writers get gap-free
seqs and a failure anywhere rolls everything back. Messages and states are ASCII JSON in TEXT
columns (``jsonb`` refuses the NUL escape). Tables live in one schema (created if missing), which is
how tests and tenants isolate themselves. ``psycopg`` is imported only when a store is created.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from contextwright.errors import (
    InvalidInputError,
    OutcomeUnknown,
    StoreError,
    StoreUnavailable,
)
from contextwright.session.store import (
    Appended,
    Clock,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredMessage,
    WriteConditions,
    decode_document,
    encode_document,
    expiry_cutoff,
    is_expired,
    new_epoch,
    refuse_write,
    sorted_infos,
    validate_conditions,
    validate_expected_version,
    validate_id,
    validate_messages,
    validate_read_args,
    validate_ttl,
)

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_PK = "user_id = %s AND session_id = %s"
_CREATE = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.sessions (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
        last_seq BIGINT NOT NULL, PRIMARY KEY (user_id, session_id))""",
    """CREATE TABLE IF NOT EXISTS {s}.messages (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, seq BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (user_id, session_id, seq))""",
    """CREATE TABLE IF NOT EXISTS {s}.states (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, version BIGINT NOT NULL,
        data TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (user_id, session_id))""",
    "CREATE INDEX IF NOT EXISTS sessions_by_age ON {s}.sessions (updated_at)",
    # Sessions stored before epochs existed read as epoch "" until they are erased.
    "ALTER TABLE {s}.sessions ADD COLUMN IF NOT EXISTS epoch TEXT",
    """CREATE TABLE IF NOT EXISTS {s}.write_keys (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, write_key TEXT NOT NULL,
        first_seq BIGINT NOT NULL, count BIGINT NOT NULL,
        PRIMARY KEY (user_id, session_id, write_key))""",
)
_DATA_TABLES = ("messages", "states", "write_keys")
"""The tables holding a session's data besides its ``sessions`` row."""


class PostgresStore:
    """A ``Store`` in PostgreSQL; one connection per thread, every write one transaction."""

    def __init__(
        self,
        dsn: str,
        *,
        ttl_seconds: float | None = None,
        schema: str = "contextwright",
        clock: Clock = time.time,
    ) -> None:
        """Connect to ``dsn`` and create ``schema`` and its tables if they are missing."""
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError("schema must be a lower-case SQL identifier")
        self._dsn = dsn
        self._schema = schema
        self._ttl = validate_ttl(ttl_seconds)
        self._clock = clock
        self._local = threading.local()
        self._all: list[psycopg.Connection[Any]] = []
        self._all_lock = threading.Lock()
        self._closed = False
        self._write(self._create_schema)

    # -- the protocol -------------------------------------------------------------------------

    def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append all ``messages`` in one transaction; return their seqs."""
        return self.append_if(key, messages).seqs

    def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """Append ``messages`` (and put ``state``) in one transaction if the conditions hold."""
        validate_messages(messages)
        validate_conditions(last_seq, epoch, idempotency_key)
        state_text = None
        if state is not None:
            validate_expected_version(state.expected_version)
            state_text = encode_document(state.data, "state")
        when = WriteConditions(last_seq=last_seq, epoch=epoch, idempotency_key=idempotency_key,
                           state=state)
        return self._write(lambda db: self._append_if(db, key, messages, when, state_text))

    def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        rows = self._query(f"SELECT epoch FROM {{s}}.sessions WHERE {_PK} AND updated_at > %s",
                           (key.user_id, key.session_id, self._cutoff()))
        return str(rows[0][0] or "") if rows else None

    def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        rows = self._query(
            "SELECT w.first_seq, w.count FROM {s}.write_keys w JOIN {s}.sessions x"
            " ON x.user_id = w.user_id AND x.session_id = w.session_id"
            " WHERE w.user_id = %s AND w.session_id = %s AND w.write_key = %s"
            " AND x.updated_at > %s",
            (key.user_id, key.session_id, idempotency_key, self._cutoff()))
        return list(range(int(rows[0][0]), int(rows[0][0]) + int(rows[0][1]))) if rows else None

    def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        rows = self._query(
            "SELECT m.seq, m.created_at, m.body FROM {s}.messages m JOIN {s}.sessions x"
            " ON x.user_id = m.user_id AND x.session_id = m.session_id"
            " WHERE m.user_id = %s AND m.session_id = %s AND m.seq > %s AND x.updated_at > %s"
            " ORDER BY m.seq DESC LIMIT %s",
            (key.user_id, key.session_id, after, self._cutoff(), last))
        return [
            StoredMessage(seq=seq, message=decode_document(body, f"message {seq}"), created_at=at)
            for seq, at, body in reversed(rows)
        ]

    def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        rows = self._query(f"SELECT last_seq FROM {{s}}.sessions WHERE {_PK} AND updated_at > %s",
                           (key.user_id, key.session_id, self._cutoff()))
        return int(rows[0][0]) if rows else 0

    def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        rows = self._query(
            "SELECT t.version, t.data, t.updated_at FROM {s}.states t JOIN {s}.sessions x"
            " ON x.user_id = t.user_id AND x.session_id = t.session_id"
            " WHERE t.user_id = %s AND t.session_id = %s AND x.updated_at > %s",
            (key.user_id, key.session_id, self._cutoff()))
        if not rows:
            return None
        version, data, updated_at = rows[0]
        return StateRecord(version=int(version), data=decode_document(data, "state"),
                           updated_at=float(updated_at))

    def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """Replace the state if it is at ``expected_version``; return the new version."""
        write = StateWrite(data=data, expected_version=expected_version)
        version = self.append_if(key, [], epoch=epoch, state=write).state_version
        assert version is not None  # a StateWrite that passed its checks is always written
        return version

    def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """Live sessions, of one user or all, sorted by ``(user_id, session_id)``."""
        sql = ("SELECT user_id, session_id, last_seq, created_at, updated_at FROM {s}.sessions"
               " WHERE updated_at > %s")
        params: tuple[Any, ...] = (self._cutoff(),)
        if user_id is not None:
            sql += " AND user_id = %s"
            params += (validate_id(user_id, "user_id"),)
        return sorted_infos([
            SessionInfo(key=SessionKey(user_id=u, session_id=s), message_count=int(n),
                        created_at=float(c), updated_at=float(up))
            for u, s, n, c, up in self._query(sql, params)
        ])

    def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        return self._write(lambda db: self._erase(db, _PK, (key.user_id, key.session_id)) > 0)

    def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_id(user_id, "user_id")
        return self._write(lambda db: self._erase(db, "user_id = %s", (user_id,)))

    def purge_expired(self) -> int:
        """Remove expired sessions; return how many."""
        if self._ttl is None:
            return 0
        cutoff = self._cutoff()
        return self._write(lambda db: self._purge(db, cutoff))

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._all_lock:
            self._closed = True
            for db in self._all:
                db.close()
            self._all.clear()

    # -- transactions -------------------------------------------------------------------------

    def _create_schema(self, db: psycopg.Connection[Any]) -> None:
        # Concurrent CREATE … IF NOT EXISTS can still collide in the catalogue; serialise them.
        db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"contextwright:{self._schema}",))
        for statement in _CREATE:
            db.execute(self._sql(statement))

    def _append_if(
        self, db: psycopg.Connection[Any], key: SessionKey,
        messages: Sequence[Mapping[str, Any]], when: WriteConditions, state_text: str | None,
    ) -> Appended:
        now = self._clock()
        last, live_epoch = self._lock_session(db, key, now)
        if when.idempotency_key is not None:
            done = db.execute(self._sql(
                f"SELECT first_seq, count FROM {{s}}.write_keys WHERE {_PK} AND write_key = %s"),
                (key.user_id, key.session_id, when.idempotency_key)).fetchone()
            if done is not None:
                first, count = int(done[0]), int(done[1])
                return Appended(seqs=list(range(first, first + count)),
                                epoch=live_epoch or "", replayed=True)
        row = db.execute(self._sql(f"SELECT version FROM {{s}}.states WHERE {_PK}"),
                         (key.user_id, key.session_id)).fetchone()
        version = None if row is None else int(row[0])
        refuse_write(when, live_epoch=live_epoch, last=last, version=version)
        seqs = self._append(db, key, messages, now)
        if state_text is not None:
            version = self._put_state(db, key, state_text, version, now)
        if when.idempotency_key is not None and seqs:
            db.execute(self._sql(
                "INSERT INTO {s}.write_keys (user_id, session_id, write_key, first_seq, count)"
                " VALUES (%s, %s, %s, %s, %s)"),
                (key.user_id, key.session_id, when.idempotency_key, seqs[0], len(seqs)))
        epoch = db.execute(self._sql(f"SELECT epoch FROM {{s}}.sessions WHERE {_PK}"),
                           (key.user_id, key.session_id)).fetchone()
        return Appended(seqs=seqs, epoch=str(epoch[0] or "") if epoch else "",
                        state_version=version if state_text is not None else None)

    def _lock_session(self, db: psycopg.Connection[Any], key: SessionKey,
                      now: float) -> tuple[int, str | None]:
        """Lock the session row (creating it if absent); return its last seq and live epoch.

        The row is created rather than only selected so that two writers of a new session
        serialise on it too; the live epoch is ``None`` when this call created it (the session
        was absent), and a failed condition rolls the new row back with everything else.
        """
        row = db.execute(self._sql(f"SELECT updated_at FROM {{s}}.sessions WHERE {_PK} FOR UPDATE"),
                         (key.user_id, key.session_id)).fetchone()
        if row is not None and is_expired(float(row[0]), now, self._ttl):
            # An expired session is absent: this write starts it afresh at seq 1.
            self._erase(db, _PK, (key.user_id, key.session_id))
        fresh = new_epoch()
        row = db.execute(self._sql(
            "INSERT INTO {s}.sessions (user_id, session_id, created_at, updated_at, last_seq,"
            " epoch) VALUES (%s, %s, %s, %s, 0, %s) ON CONFLICT (user_id, session_id)"
            " DO UPDATE SET updated_at = {s}.sessions.updated_at RETURNING last_seq, epoch"),
            (key.user_id, key.session_id, now, now, fresh)).fetchone()
        assert row is not None  # an upsert with RETURNING always yields its row
        epoch = str(row[1] or "")
        return int(row[0]), None if epoch == fresh else epoch

    def _append(self, db: psycopg.Connection[Any], key: SessionKey,
                messages: Sequence[Mapping[str, Any]], now: float) -> list[int]:
        first = self._touch(db, key, now, len(messages))
        seqs = list(range(first, first + len(messages)))
        # Encoded lazily, row by row, inside the transaction: a failure on the third message
        # rolls back the counter and the rows before it.
        rows = (
            (key.user_id, key.session_id, seq, now, encode_document(m, f"message {i}"))
            for i, (seq, m) in enumerate(zip(seqs, messages, strict=True))
        )
        with db.cursor() as cursor:
            cursor.executemany(self._sql(
                "INSERT INTO {s}.messages (user_id, session_id, seq, created_at, body)"
                " VALUES (%s, %s, %s, %s, %s)"), rows)
        return seqs

    def _put_state(self, db: psycopg.Connection[Any], key: SessionKey, text: str,
                   current: int | None, now: float) -> int:
        version = (current or 0) + 1
        db.execute(self._sql(
            "INSERT INTO {s}.states (user_id, session_id, version, data, updated_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (user_id, session_id) DO UPDATE SET"
            " version = excluded.version, data = excluded.data,"
            " updated_at = excluded.updated_at"),
            (key.user_id, key.session_id, version, text, now))
        return version

    def _touch(self, db: psycopg.Connection[Any], key: SessionKey, now: float, added: int) -> int:
        """Refresh the (locked) session row, reserve ``added`` seqs; return the first one."""
        row = db.execute(self._sql(
            f"UPDATE {{s}}.sessions SET updated_at = %s, last_seq = last_seq + %s WHERE {_PK}"
            " RETURNING last_seq"), (now, added, key.user_id, key.session_id)).fetchone()
        assert row is not None  # _lock_session created the row in this transaction
        return int(row[0]) - added + 1

    def _erase(self, db: psycopg.Connection[Any], where: str, params: tuple[Any, ...]) -> int:
        """Delete matching sessions (rows first, so a racing append is waited for), then data."""
        deleted = db.execute(self._sql(
            f"DELETE FROM {{s}}.sessions WHERE {where} RETURNING updated_at"), params).fetchall()
        for table in _DATA_TABLES:
            db.execute(self._sql(f"DELETE FROM {{s}}.{table} WHERE {where}"), params)
        cutoff = self._cutoff()
        return sum(float(updated_at) > cutoff for (updated_at,) in deleted)

    def _purge(self, db: psycopg.Connection[Any], cutoff: float) -> int:
        gone = db.execute(self._sql(
            "DELETE FROM {s}.sessions WHERE updated_at <= %s RETURNING user_id, session_id"),
            (cutoff,)).fetchall()
        users, sessions = [u for u, _ in gone], [s for _, s in gone]
        for table in _DATA_TABLES:
            db.execute(self._sql(
                f"DELETE FROM {{s}}.{table} t USING unnest(%s::text[], %s::text[]) AS d(u, s)"
                " WHERE t.user_id = d.u AND t.session_id = d.s"), (users, sessions))
        return len(gone)

    # -- connections --------------------------------------------------------------------------

    def _cutoff(self) -> float:
        return expiry_cutoff(self._clock(), self._ttl)

    def _sql(self, template: str) -> str:
        # The schema name is checked against _SCHEMA_NAME, so quoting it is enough.
        return template.replace("{s}", f'"{self._schema}"')

    def _write(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` in one transaction; it commits on success and rolls back on any error.

        A connection lost while committing leaves the outcome unknown (the server may have
        committed): that is ``OutcomeUnknown``, not a plain ``StoreUnavailable``.
        """
        committing = False
        try:
            with self._errors() as db, db.transaction():
                result = work(db)
                committing = True
        except StoreUnavailable as exc:
            if committing:
                raise OutcomeUnknown(
                    "postgres store: the connection was lost while committing; the write may "
                    "have been applied (retry with the same idempotency_key)") from exc
            raise
        return result

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._errors() as db:
            return db.execute(self._sql(sql), params).fetchall()

    def _connection(self) -> psycopg.Connection[Any]:
        db: psycopg.Connection[Any] | None = getattr(self._local, "db", None)
        if db is None or db.closed or db.broken:
            db = self._connect()
            self._local.db = db
        return db

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            import psycopg
        except ImportError as exc:
            raise StoreUnavailable("PostgresStore needs psycopg: "
                                   "pip install 'contextwright[postgres]'") from exc
        with self._all_lock:
            if self._closed:
                raise StoreError("the store is closed")
            # autocommit: reads are single statements; writes open db.transaction() themselves.
            db = psycopg.connect(self._dsn, autocommit=True, connect_timeout=10)
            self._all.append(db)
        return db

    @contextmanager
    def _errors(self) -> Iterator[psycopg.Connection[Any]]:
        """Yield this thread's connection; map driver errors, without the driver's text."""
        import psycopg

        try:
            yield self._connection()
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"postgres store unavailable ({type(exc).__name__})") from exc
        except psycopg.Error as exc:
            raise StoreError(f"postgres store failed ({type(exc).__name__})") from exc
