"""What ``PostgresStore`` and ``AsyncPostgresStore`` share: the schema, the SQL and its logic.

Each store operation is written once, as an *SQL flow*: a generator that yields ``Sql``
statements and is sent each one's rows. ``run_sql`` executes a flow on a psycopg ``Connection``,
``arun_sql`` on an ``AsyncConnection``; the stores only pick the connection and the transaction.
So both drivers lock, count and condition their writes alike, on the same tables, and a sync and
an async worker can serve one session. Each session has a counter row; an append locks it
(``SELECT … FOR UPDATE`` / upsert), bumps ``last_seq`` and inserts the messages in the same
transaction, so concurrent writers get gap-free seqs and a failure anywhere rolls everything back.
Messages and states are ASCII JSON in TEXT columns (``jsonb`` refuses the NUL escape). Tables live
in one schema (created if missing, unless a store is opened without
create). This module imports ``psycopg`` only to map its errors.
"""

from __future__ import annotations

import os
import re
import select
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from contextwright.checks import whole_number
from contextwright.errors import InvalidInputError, StoreError, StoreUnavailable
from contextwright.session.store import (
    Appended,
    Clock,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredIndex,
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
    validate_messages,
    validate_ttl,
)

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
Row = tuple[Any, ...]

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
    """CREATE TABLE IF NOT EXISTS {s}.recall_index (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, epoch TEXT NOT NULL,
        part BIGINT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (user_id, session_id, part))""",
)
STORE_TABLES = ("sessions", "messages", "states")
"""Tables every PostgreSQL session store has had: a schema without them holds none."""
_CREATES_NOTHING = ("check the schema name: opened to look after existing sessions, the store "
                    "creates no schema and no table")
_DATA_TABLES = ("messages", "states", "write_keys", "recall_index")
"""The tables holding a session's data besides its ``sessions`` row."""


@dataclass(frozen=True, slots=True)
class _Locked:
    """A session row as a write transaction locked it."""

    last_seq: int
    epoch: str
    """The row's epoch (this call's new one when it created the row)."""
    live_epoch: str | None
    """The epoch of the session that was live before this call (None: there was none)."""
    state_version: int | None


@dataclass(frozen=True, slots=True)
class Sql:
    """One statement of an SQL flow."""

    text: str
    """The statement, schema already filled in."""
    params: Any
    """Its parameters (for ``many``: an iterable of parameter tuples, consumed lazily)."""
    fetch: Literal["one", "all", "none", "many"]
    """What the flow is sent back: the first row, all rows, nothing; ``many``: executemany."""


SqlFlow = Generator[Sql, Any, T]


def run_sql(flow: SqlFlow[T], db: psycopg.Connection[Any]) -> T:
    """Execute ``flow``'s statements on ``db`` in turn; return what the flow returns."""
    result: Any = None
    try:
        while True:
            try:
                statement = flow.send(result)
            except StopIteration as stop:
                return cast(T, stop.value)
            if statement.fetch == "many":
                with db.cursor() as cursor:
                    cursor.executemany(statement.text, statement.params)
                result = None
                continue
            cursor = db.execute(statement.text, statement.params)
            result = (cursor.fetchone() if statement.fetch == "one"
                      else cursor.fetchall() if statement.fetch == "all" else None)
    finally:
        flow.close()


async def arun_sql(flow: SqlFlow[T], db: psycopg.AsyncConnection[Any]) -> T:
    """``run_sql`` on an async connection."""
    result: Any = None
    try:
        while True:
            try:
                statement = flow.send(result)
            except StopIteration as stop:
                return cast(T, stop.value)
            if statement.fetch == "many":
                async with db.cursor() as cursor:
                    await cursor.executemany(statement.text, statement.params)
                result = None
                continue
            cursor = await db.execute(statement.text, statement.params)
            result = (await cursor.fetchone() if statement.fetch == "one"
                      else await cursor.fetchall() if statement.fetch == "all" else None)
    finally:
        flow.close()


class PostgresLayout:
    """One store's schema, retention and clock, and every operation as an SQL flow."""

    def __init__(self, schema: str, ttl_seconds: float | None, clock: Clock) -> None:
        """Check ``schema`` (a lower-case SQL identifier) and ``ttl_seconds``."""
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError("schema must be a lower-case SQL identifier")
        self.schema = schema
        self.ttl = validate_ttl(ttl_seconds)
        self._clock = clock

    # -- reads (single statements, autocommit) ------------------------------------------------

    def epoch(self, key: SessionKey) -> SqlFlow[str | None]:
        """The live session's incarnation."""
        row = yield self._one(f"SELECT epoch FROM {{s}}.sessions WHERE {_PK} AND updated_at > %s",
                              (key.user_id, key.session_id, self.cutoff()))
        return None if row is None else str(row[0] or "")

    def find_write(self, key: SessionKey, idempotency_key: str) -> SqlFlow[list[int] | None]:
        """The seqs stored by the write with ``idempotency_key``."""
        row = yield self._one(
            "SELECT w.first_seq, w.count FROM {s}.write_keys w JOIN {s}.sessions x"
            " ON x.user_id = w.user_id AND x.session_id = w.session_id"
            " WHERE w.user_id = %s AND w.session_id = %s AND w.write_key = %s"
            " AND x.updated_at > %s",
            (key.user_id, key.session_id, idempotency_key, self.cutoff()))
        return None if row is None else list(range(int(row[0]), int(row[0]) + int(row[1])))

    def read(self, key: SessionKey, after: int, last: int | None) -> SqlFlow[list[Row]]:
        """Rows (seq, created_at, body) newest first; decode them with ``stored_messages``."""
        rows: list[Row] = yield self._all(
            "SELECT m.seq, m.created_at, m.body FROM {s}.messages m JOIN {s}.sessions x"
            " ON x.user_id = m.user_id AND x.session_id = m.session_id"
            " WHERE m.user_id = %s AND m.session_id = %s AND m.seq > %s AND x.updated_at > %s"
            " ORDER BY m.seq DESC LIMIT %s",
            (key.user_id, key.session_id, after, self.cutoff(), last))
        return rows

    def count(self, key: SessionKey) -> SqlFlow[int]:
        """Messages in the session."""
        row = yield self._one(
            f"SELECT last_seq FROM {{s}}.sessions WHERE {_PK} AND updated_at > %s",
            (key.user_id, key.session_id, self.cutoff()))
        return 0 if row is None else int(row[0])

    def get_state(self, key: SessionKey) -> SqlFlow[StateRecord | None]:
        """The session's state document."""
        row = yield self._one(
            "SELECT t.version, t.data, t.updated_at FROM {s}.states t JOIN {s}.sessions x"
            " ON x.user_id = t.user_id AND x.session_id = t.session_id"
            " WHERE t.user_id = %s AND t.session_id = %s AND x.updated_at > %s",
            (key.user_id, key.session_id, self.cutoff()))
        if row is None:
            return None
        version, data, updated_at = row
        return StateRecord(version=int(version), data=decode_document(data, "state"),
                           updated_at=float(updated_at))

    def list_sessions(self, user_id: str | None) -> SqlFlow[list[SessionInfo]]:
        """Live sessions (``user_id`` already checked), sorted."""
        sql = ("SELECT user_id, session_id, last_seq, created_at, updated_at FROM {s}.sessions"
               " WHERE updated_at > %s")
        params: tuple[Any, ...] = (self.cutoff(),)
        if user_id is not None:
            sql += " AND user_id = %s"
            params += (user_id,)
        rows: list[Row] = yield self._all(sql, params)
        return sorted_infos([
            SessionInfo(key=SessionKey(user_id=u, session_id=s), message_count=int(n),
                        created_at=float(c), updated_at=float(up))
            for u, s, n, c, up in rows
        ])

    # -- writes (each flow runs in one transaction) -------------------------------------------

    def create_schema(self) -> SqlFlow[None]:
        """Create the schema and its tables if missing (nothing, when they are all there)."""
        # ALTER TABLE takes an exclusive lock even when the column exists: a store opened while
        # other workers append would deadlock with them. So a complete schema is left alone.
        complete = yield self._one(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = %s AND"
            " ((table_name = 'sessions' AND column_name = 'epoch') OR"
            " (table_name = 'write_keys' AND column_name = 'write_key'))", (self.schema,))
        if complete is not None and int(complete[0]) == 2:
            return
        # Concurrent CREATE … IF NOT EXISTS can still collide in the catalogue; serialise them.
        yield self._none("SELECT pg_advisory_xact_lock(hashtext(%s))",
                         (f"contextwright:{self.schema}",))
        for statement in _CREATE:
            yield self._none(statement, ())

    def open_existing(self) -> SqlFlow[None]:
        """Fail unless the schema holds a store; bring the tables of an older one up to date.

        For a store opened to look after sessions that exist: a mistyped schema must not be
        created and shown as an empty store. ``StoreError`` names the schema and what it lacks.
        A store made by an older version (without the tables added since) is still a store:
        it gets them as any opening gives them (nothing, when they are all there).
        """
        found = yield self._one("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
        if found is None:
            raise StoreError(f"postgres store: schema {self.schema!r} does not exist "
                             f"({_CREATES_NOTHING})")
        rows: list[Row] = yield self._all(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.schema,))
        missing = sorted(set(STORE_TABLES) - {str(row[0]) for row in rows})
        if missing:
            raise StoreError(f"postgres store: schema {self.schema!r} holds no session store "
                             f"(no table {', '.join(missing)}; {_CREATES_NOTHING})")
        yield from self.create_schema()

    def append_if(self, key: SessionKey, messages: Sequence[Mapping[str, Any]],
                  when: WriteConditions, state_text: str | None) -> SqlFlow[Appended]:
        """Check ``when`` on the locked session row, then append and put the state."""
        now = self._clock()
        locked = yield from self._lock_session(key, now)
        live_epoch, version = locked.live_epoch, locked.state_version
        if when.idempotency_key is not None:
            done = yield self._one(
                f"SELECT first_seq, count FROM {{s}}.write_keys WHERE {_PK} AND write_key = %s",
                (key.user_id, key.session_id, when.idempotency_key))
            if done is not None:
                first, count = int(done[0]), int(done[1])
                return Appended(seqs=list(range(first, first + count)),
                                epoch=live_epoch or "", replayed=True)
        refuse_write(when, live_epoch=live_epoch, last=locked.last_seq, version=version)
        seqs = yield from self._append(key, messages, now)
        if state_text is not None:
            version = yield from self._put_state(key, state_text, version, now)
        if when.idempotency_key is not None and seqs:
            yield self._none(
                "INSERT INTO {s}.write_keys (user_id, session_id, write_key, first_seq, count)"
                " VALUES (%s, %s, %s, %s, %s)",
                (key.user_id, key.session_id, when.idempotency_key, seqs[0], len(seqs)))
        return Appended(seqs=seqs, epoch=locked.epoch,
                        state_version=version if state_text is not None else None)

    def read_index(self, key: SessionKey) -> SqlFlow[StoredIndex | None]:
        """The live session's epoch and recall index parts (one statement)."""
        rows: list[Row] = yield self._all(
            "SELECT x.epoch, i.data FROM {s}.sessions x LEFT JOIN {s}.recall_index i"
            " ON i.user_id = x.user_id AND i.session_id = x.session_id AND i.epoch = x.epoch"
            " WHERE x.user_id = %s AND x.session_id = %s AND x.updated_at > %s ORDER BY i.part",
            (key.user_id, key.session_id, self.cutoff()))
        if not rows:
            return None
        return StoredIndex(epoch=str(rows[0][0] or ""),
                           parts=[str(data) for _, data in rows if data is not None])

    def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], epoch: str
                   ) -> SqlFlow[list[StoredMessage] | None]:
        """The live session's messages in the (merged) ``spans`` if ``epoch`` is live.

        One statement; each span is one range scan of the primary key, so a read costs the
        messages it finds, however wide its spans.
        """
        # The messages are a LATERAL subquery of each span (OFFSET 0 keeps the planner from
        # merging it into the join), so each span is its own range scan of the primary key:
        # as a plain join, the planner (its statistics say a session is a few rows) may read
        # the whole session once and test every message against every span.
        rows: list[Row] = yield self._all(
            "SELECT x.epoch, m.seq, m.created_at, m.body FROM {s}.sessions x"
            " LEFT JOIN LATERAL (SELECT m.seq, m.created_at, m.body"
            " FROM unnest(%s::bigint[], %s::bigint[]) AS r(lo, hi) CROSS JOIN LATERAL"
            " (SELECT m.seq, m.created_at, m.body FROM {s}.messages m"
            " WHERE m.user_id = x.user_id AND m.session_id = x.session_id"
            " AND m.seq BETWEEN r.lo AND r.hi OFFSET 0) m) m ON true"
            " WHERE x.user_id = %s AND x.session_id = %s AND x.updated_at > %s ORDER BY m.seq",
            ([first for first, _ in spans], [last for _, last in spans],
             key.user_id, key.session_id, self.cutoff()))
        if not rows or str(rows[0][0] or "") != epoch:
            return None
        return [StoredMessage(seq=int(seq), message=decode_document(body, f"message {seq}"),
                              created_at=float(at))
                for _, seq, at, body in rows if seq is not None]

    def append_index(self, key: SessionKey, part: str, epoch: str, replace: bool
                     ) -> SqlFlow[bool]:
        """Append a part if ``epoch`` is live, checked on the locked session row.

        An erase deletes that row first, so it waits for this write or this write finds none.
        """
        row = yield self._one(
            f"SELECT epoch, updated_at FROM {{s}}.sessions WHERE {_PK} FOR UPDATE",
            (key.user_id, key.session_id))
        if row is None or str(row[0] or "") != epoch or is_expired(
                float(row[1]), self._clock(), self.ttl):
            return False
        if replace:
            yield self._none(f"DELETE FROM {{s}}.recall_index WHERE {_PK}",
                             (key.user_id, key.session_id))
        else:  # parts of another incarnation
            yield self._none(f"DELETE FROM {{s}}.recall_index WHERE {_PK} AND epoch <> %s",
                             (key.user_id, key.session_id, epoch))
        yield self._none(
            "INSERT INTO {s}.recall_index (user_id, session_id, epoch, part, data) VALUES"
            " (%s, %s, %s, (SELECT coalesce(max(part), 0) + 1 FROM {s}.recall_index"
            f" WHERE {_PK}), %s)",
            (key.user_id, key.session_id, epoch, key.user_id, key.session_id, part))
        return True

    def erase_session(self, key: SessionKey) -> SqlFlow[bool]:
        """Remove the session; whether it was live."""
        return (yield from self._erase(_PK, (key.user_id, key.session_id))) > 0

    def erase_user(self, user_id: str) -> SqlFlow[int]:
        """Remove every session of ``user_id``; how many were live."""
        return (yield from self._erase("user_id = %s", (user_id,)))

    def purge(self) -> SqlFlow[int]:
        """Remove expired sessions; how many."""
        gone: list[Row] = yield self._all(
            "DELETE FROM {s}.sessions WHERE updated_at <= %s RETURNING user_id, session_id",
            (self.cutoff(),))
        users, sessions = [u for u, _ in gone], [s for _, s in gone]
        for table in _DATA_TABLES:
            yield self._none(
                f"DELETE FROM {{s}}.{table} t USING unnest(%s::text[], %s::text[]) AS d(u, s)"
                " WHERE t.user_id = d.u AND t.session_id = d.s", (users, sessions))
        return len(gone)

    # -- steps of the writes ------------------------------------------------------------------

    def _lock_session(self, key: SessionKey, now: float) -> SqlFlow[_Locked]:
        """Lock the session row (creating it if absent): its last seq, epochs, state version.

        The row is created rather than only selected so that two writers of a new session
        serialise on it too; the live epoch is ``None`` when this call created it (the session
        was absent), and a failed condition rolls the new row back with everything else. The
        state's version is read in the same statement, under the lock every state write takes
        (read again when another writer created the row meanwhile).
        """
        found = yield self._one(
            f"SELECT updated_at FROM {{s}}.sessions WHERE {_PK} FOR UPDATE",
            (key.user_id, key.session_id))
        if found is not None and is_expired(float(found[0]), now, self.ttl):
            # An expired session is absent: this write starts it afresh at seq 1.
            yield from self._erase(_PK, (key.user_id, key.session_id))
        fresh = new_epoch()
        row = yield self._one(
            "INSERT INTO {s}.sessions (user_id, session_id, created_at, updated_at, last_seq,"
            " epoch) VALUES (%s, %s, %s, %s, 0, %s) ON CONFLICT (user_id, session_id)"
            " DO UPDATE SET updated_at = {s}.sessions.updated_at RETURNING last_seq, epoch,"
            " (SELECT version FROM {s}.states t WHERE t.user_id = %s AND t.session_id = %s)",
            (key.user_id, key.session_id, now, now, fresh, key.user_id, key.session_id))
        assert row is not None  # an upsert with RETURNING always yields its row
        epoch = str(row[1] or "")
        version = None if row[2] is None else int(row[2])
        if found is None and epoch != fresh:
            # Another writer created the row after the SELECT looked, and the upsert waited for
            # its commit; but the version came from the upsert's snapshot, from before that
            # writer's state. The lock is held now, so a new statement reads the version it left.
            version = yield from self._state_version(key)
        return _Locked(last_seq=int(row[0]), epoch=epoch,
                       live_epoch=None if epoch == fresh else epoch, state_version=version)

    def _state_version(self, key: SessionKey) -> SqlFlow[int | None]:
        row = yield self._one(f"SELECT version FROM {{s}}.states WHERE {_PK}",
                              (key.user_id, key.session_id))
        return None if row is None else int(row[0])

    def _append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]],
                now: float) -> SqlFlow[list[int]]:
        first = yield from self._touch(key, now, len(messages))
        seqs = list(range(first, first + len(messages)))
        # Encoded lazily, row by row, inside the transaction: a failure on the third message
        # rolls back the counter and the rows before it.
        rows: Iterable[Row] = (
            (key.user_id, key.session_id, seq, now, encode_document(m, f"message {i}"))
            for i, (seq, m) in enumerate(zip(seqs, messages, strict=True))
        )
        yield Sql(self.sql("INSERT INTO {s}.messages (user_id, session_id, seq, created_at, body)"
                           " VALUES (%s, %s, %s, %s, %s)"), rows, "many")
        return seqs

    def _put_state(self, key: SessionKey, text: str, current: int | None,
                   now: float) -> SqlFlow[int]:
        version = (current or 0) + 1
        yield self._none(
            "INSERT INTO {s}.states (user_id, session_id, version, data, updated_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (user_id, session_id) DO UPDATE SET"
            " version = excluded.version, data = excluded.data,"
            " updated_at = excluded.updated_at",
            (key.user_id, key.session_id, version, text, now))
        return version

    def _touch(self, key: SessionKey, now: float, added: int) -> SqlFlow[int]:
        """Refresh the (locked) session row, reserve ``added`` seqs; return the first one."""
        row = yield self._one(
            f"UPDATE {{s}}.sessions SET updated_at = %s, last_seq = last_seq + %s WHERE {_PK}"
            " RETURNING last_seq", (now, added, key.user_id, key.session_id))
        assert row is not None  # _lock_session created the row in this transaction
        return int(row[0]) - added + 1

    def _erase(self, where: str, params: tuple[Any, ...]) -> SqlFlow[int]:
        """Delete matching sessions (rows first, so a racing write is waited for), then data.

        Each data ``DELETE`` takes a snapshot of its own, so it may see a session of the same
        user created since the rows were deleted. That session committed its row with its data,
        so both are seen or neither: data is deleted only where no session row is left (this
        erase's sessions, and data left without a row), and a session the erase did not see
        stays whole.
        """
        deleted: list[Row] = yield self._all(
            f"DELETE FROM {{s}}.sessions WHERE {where} RETURNING updated_at", params)
        for table in _DATA_TABLES:
            yield self._none(
                f"DELETE FROM {{s}}.{table} t WHERE {where} AND NOT EXISTS (SELECT 1 FROM"
                " {s}.sessions x WHERE x.user_id = t.user_id AND x.session_id = t.session_id)",
                params)
        cutoff = self.cutoff()
        return sum(float(updated_at) > cutoff for (updated_at,) in deleted)

    # -- helpers ------------------------------------------------------------------------------

    def cutoff(self) -> float:
        """Sessions last written at or before this are expired."""
        return expiry_cutoff(self._clock(), self.ttl)

    def sql(self, template: str) -> str:
        """``template`` with ``{s}`` replaced by the quoted schema."""
        # The schema name is checked against _SCHEMA_NAME, so quoting it is enough.
        return template.replace("{s}", f'"{self.schema}"')

    def _one(self, template: str, params: tuple[Any, ...]) -> Sql:
        return Sql(self.sql(template), params, "one")

    def _all(self, template: str, params: tuple[Any, ...]) -> Sql:
        return Sql(self.sql(template), params, "all")

    def _none(self, template: str, params: tuple[Any, ...]) -> Sql:
        return Sql(self.sql(template), params, "none")


def stored_messages(rows: list[Row]) -> list[StoredMessage]:
    """Rows of ``PostgresLayout.read`` (newest first) as messages, oldest first."""
    return [
        StoredMessage(seq=seq, message=decode_document(body, f"message {seq}"), created_at=at)
        for seq, at, body in reversed(rows)
    ]


def write_conditions(key: SessionKey, messages: Sequence[Mapping[str, Any]],
                     last_seq: int | None, epoch: str | None, idempotency_key: str | None,
                     state: StateWrite | None) -> tuple[WriteConditions, str | None]:
    """Check ``append_if``'s arguments; its conditions and the encoded state (if any)."""
    validate_messages(key, messages)
    validate_conditions(last_seq, epoch, idempotency_key)
    state_text = None
    if state is not None:
        validate_expected_version(state.expected_version)
        state_text = encode_document(state.data, "state")
    return WriteConditions(last_seq=last_seq, epoch=epoch, idempotency_key=idempotency_key,
                           state=state), state_text


def psycopg_module() -> Any:
    """The ``psycopg`` package, or ``StoreUnavailable`` saying which extra installs it."""
    try:
        import psycopg
    except ImportError as exc:
        raise StoreUnavailable("the PostgreSQL stores need psycopg: "
                               "pip install 'contextwright[postgres]'") from exc
    return psycopg


DEFAULT_PREPARE_THRESHOLD = 5
"""psycopg's own default: a statement run this often on one connection is prepared."""


def validate_prepare_threshold(value: object) -> int | None:
    """``prepare_threshold`` as psycopg takes it: None (prepare nothing) or a count from 0.

    A prepared statement lives in one server connection. Behind PgBouncer in transaction mode
    (before 1.21, or without ``max_prepared_statements``) the next transaction may run on
    another one, which does not have it; None keeps every statement unprepared.
    """
    if value is None:
        return None
    return whole_number(value, "prepare_threshold (or None)")


def connect_timeout_option(dsn: str, seconds: int) -> dict[str, Any]:
    """``connect_timeout=seconds`` for psycopg, unless the DSN or ``PGCONNECT_TIMEOUT`` sets it.

    psycopg's keyword arguments override the DSN's own settings, so passing the store's
    default every time would silently replace a ``?connect_timeout=2`` the user wrote.
    """
    psycopg = psycopg_module()
    try:
        given = "connect_timeout" in psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        given = False  # a malformed DSN: connecting reports it
    if given or os.environ.get("PGCONNECT_TIMEOUT"):
        return {}
    return {"connect_timeout": seconds}


@contextmanager
def connecting() -> Iterator[None]:
    """Around opening a connection: a DSN libpq cannot read is the caller's input error.

    psycopg raises ``ProgrammingError`` for it (a typo, an unknown option such as
    ``?schema=`` given to the store directly); ``postgres_errors`` would report it as a store
    failure, without the driver's text (which may hold the password).
    """
    psycopg = psycopg_module()
    try:
        yield
    except psycopg.ProgrammingError:
        raise InvalidInputError(
            "the PostgreSQL DSN is malformed or has an option libpq does not know (the schema "
            "is the store's schema= argument, or ?schema= in open_store's URL; likewise "
            "prepare_threshold=)") from None


@contextmanager
def postgres_errors() -> Iterator[None]:
    """Map driver errors onto the store's error tree, without the driver's text.

    Works around ``await`` as well. Without the driver, ``StoreUnavailable`` names the extra.
    """
    psycopg = psycopg_module()
    try:
        yield
    except psycopg.errors.ProgramLimitExceeded as exc:
        # SQLSTATE class 54: this input is over a server limit; retrying cannot help.
        raise InvalidInputError(f"postgres refused the write as too large "
                                f"({type(exc).__name__})") from exc
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"postgres store unavailable ({type(exc).__name__})") from exc
    except psycopg.Error as exc:
        raise StoreError(f"postgres store failed ({type(exc).__name__})") from exc


def server_spoke(db: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server sent anything to ``db`` while it sat idle in a pool, checked without I/O.

    An idle connection gets nothing unless the server is done with it: a backend ended by a
    restart, a failover or ``pg_terminate_backend`` sends its farewell and closes the socket,
    which makes it readable. A dead connection is thus found before a call is made on it, for
    the price of one ``poll``; a round trip (psycopg_pool's ``check_connection``) would cost
    every call a wait on the server.
    """
    if db.closed:
        return True
    socket = db.pgconn.socket
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(socket, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([socket], [], [], 0)  # Windows: no poll
    return bool(readable)
