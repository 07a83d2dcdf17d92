"""``SqliteStore``: the embedded default store, one SQLite file in WAL mode.

Safe for many threads (each call borrows a pooled connection, so a thread that ends leaves none
open) and many OS processes on one file: every write is a ``BEGIN IMMEDIATE`` transaction, so
the seq counter row and the message rows change together under SQLite's single writer lock, and
a process killed mid-write leaves nothing half-written.
Messages are encoded row by row *inside* that transaction, so even a failure while encoding the
third of five messages rolls back the first two.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from contextwright.checks import whole_number
from contextwright.errors import InvalidInputError, StoreError, StoreUnavailable
from contextwright.session.pool import DEFAULT_MAX_IDLE, ConnectionPool
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
    validate_index_part,
    validate_messages,
    validate_read_args,
    validate_spans,
    validate_stored_id,
    validate_ttl,
)

T = TypeVar("T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS sessions (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL, last_seq INTEGER NOT NULL,
        PRIMARY KEY (user_id, session_id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS messages (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, seq INTEGER NOT NULL,
        created_at REAL NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (user_id, session_id, seq)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS states (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, version INTEGER NOT NULL,
        data TEXT NOT NULL, updated_at REAL NOT NULL,
        PRIMARY KEY (user_id, session_id)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS sessions_by_age ON sessions (updated_at)",
    """CREATE TABLE IF NOT EXISTS write_keys (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, write_key TEXT NOT NULL,
        first_seq INTEGER NOT NULL, count INTEGER NOT NULL,
        PRIMARY KEY (user_id, session_id, write_key)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS recall_index (
        user_id TEXT NOT NULL, session_id TEXT NOT NULL, epoch TEXT NOT NULL,
        part INTEGER NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (user_id, session_id, part)) WITHOUT ROWID""",
)
_TABLES = ("messages", "states", "write_keys", "recall_index", "sessions")
"""Every table holding a session's data; ``sessions`` last, so its row is deleted after them."""
SYNCHRONOUS_MODES = frozenset(("OFF", "NORMAL", "FULL", "EXTRA"))
"""The values ``synchronous`` may take (SQLite's PRAGMA synchronous)."""
_PK = "user_id = ? AND session_id = ?"


class SqliteStore:
    """A ``Store`` in one SQLite file (WAL, busy timeout, a pooled connection per call)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl_seconds: float | None = None,
        clock: Clock = time.time,
        busy_timeout_ms: int = 30_000,
        synchronous: str = "NORMAL",
        max_idle_connections: int = DEFAULT_MAX_IDLE,
    ) -> None:
        """Open (and create if missing) the database at ``path``.

        ``synchronous="NORMAL"`` (the default, SQLite's advice for WAL) keeps every acknowledged
        append through a crashed or killed process (the kill -9 test proves it) without an
        fsync per write; ``"FULL"`` also survives power loss, at one fsync (~4 ms here) per
        write. Each call borrows a connection and gives it back; up to ``max_idle_connections``
        stay open between calls (more are opened while more calls run at once).
        """
        if synchronous not in SYNCHRONOUS_MODES:
            raise InvalidInputError("synchronous must be OFF, NORMAL, FULL or EXTRA")
        self._path = database_path(path)
        self._ttl = validate_ttl(ttl_seconds)
        self._clock = clock
        busy_timeout_ms = whole_number(busy_timeout_ms, "busy_timeout_ms")
        self._pragmas = (f"PRAGMA busy_timeout = {busy_timeout_ms}",
                         f"PRAGMA synchronous = {synchronous}")
        self._pool: ConnectionPool[sqlite3.Connection] = ConnectionPool(
            self._connect, usable=_reusable, close=sqlite3.Connection.close,
            max_idle=max_idle_connections)
        try:
            self._write(_create_schema)
        except BaseException:
            self._pool.close()
            raise

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
        validate_messages(key, messages)
        validate_conditions(last_seq, epoch, idempotency_key)
        state_text = None
        if state is not None:
            validate_expected_version(state.expected_version)
            state_text = encode_document(state.data, "state")
        return self._write(lambda db: self._append_if(
            db, key, messages, WriteConditions(last_seq=last_seq, epoch=epoch,
                                           idempotency_key=idempotency_key, state=state),
            state_text))

    def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        row = self._session_row(key)
        return None if row is None else str(row[3] or "")

    def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        rows = self._query(
            "SELECT w.first_seq, w.count FROM write_keys w JOIN sessions s"
            " ON s.user_id = w.user_id AND s.session_id = w.session_id"
            " WHERE w.user_id = ? AND w.session_id = ? AND w.write_key = ? AND s.updated_at > ?",
            (key.user_id, key.session_id, idempotency_key,
             expiry_cutoff(self._clock(), self._ttl)))
        return list(range(rows[0][0], rows[0][0] + rows[0][1])) if rows else None

    def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        cutoff = expiry_cutoff(self._clock(), self._ttl)
        rows = self._query(
            "SELECT m.seq, m.created_at, m.body FROM messages m JOIN sessions s"
            " ON s.user_id = m.user_id AND s.session_id = m.session_id"
            " WHERE m.user_id = ? AND m.session_id = ? AND m.seq > ? AND s.updated_at > ?"
            " ORDER BY m.seq DESC LIMIT ?",
            (key.user_id, key.session_id, after, cutoff, -1 if last is None else last),
        )
        return [
            StoredMessage(seq=seq, message=decode_document(body, f"message {seq}"), created_at=at)
            for seq, at, body in reversed(rows)
        ]

    def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        row = self._session_row(key)
        return 0 if row is None else int(row[2])

    def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        cutoff = expiry_cutoff(self._clock(), self._ttl)
        rows = self._query(
            "SELECT t.version, t.data, t.updated_at FROM states t JOIN sessions s"
            " ON s.user_id = t.user_id AND s.session_id = t.session_id"
            " WHERE t.user_id = ? AND t.session_id = ? AND s.updated_at > ?",
            (key.user_id, key.session_id, cutoff),
        )
        if not rows:
            return None
        version, data, updated_at = rows[0]
        return StateRecord(
            version=version, data=decode_document(data, "state"), updated_at=updated_at
        )

    def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """Replace the state if it is at ``expected_version``; return the new version."""
        write = StateWrite(data=data, expected_version=expected_version)
        version = self.append_if(key, [], epoch=epoch, state=write).state_version
        assert version is not None  # a StateWrite that passed its checks is always written
        return version

    def append_index(self, key: SessionKey, part: str, *, epoch: str,
                     replace: bool = False) -> bool:
        """Append a part of the recall index if ``epoch`` is live; False if not.

        In one write transaction with the epoch check, so an erase (which deletes the parts
        with the session) either happens before it (nothing written) or after it.
        """
        validate_index_part(key, part, epoch)
        return self._write(lambda db: self._append_index(db, key, part, epoch, replace))

    def read_index(self, key: SessionKey) -> StoredIndex | None:
        """The live session's epoch and recall index parts (one read transaction)."""
        cutoff = expiry_cutoff(self._clock(), self._ttl)
        rows = self._query(
            "SELECT s.epoch, i.data FROM sessions s LEFT JOIN recall_index i"
            " ON i.user_id = s.user_id AND i.session_id = s.session_id AND i.epoch = s.epoch"
            " WHERE s.user_id = ? AND s.session_id = ? AND s.updated_at > ? ORDER BY i.part",
            (key.user_id, key.session_id, cutoff))
        if not rows:
            return None
        return StoredIndex(epoch=str(rows[0][0] or ""),
                           parts=[data for _, data in rows if data is not None])

    def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *, epoch: str
                   ) -> list[StoredMessage] | None:
        """The live session's messages in ``spans`` (seqs, inclusive); None if not ``epoch``.

        One statement: the session row (its epoch) joined with the messages named, so the
        check and the read see the same snapshot. Each span is one range of the primary key
        (``CROSS JOIN`` keeps the spans the outer loop), so a read costs the messages it finds,
        however wide its spans.
        """
        pairs = json.dumps(validate_spans(spans, epoch))
        rows = self._query(
            "SELECT s.epoch, m.seq, m.created_at, m.body FROM sessions s LEFT JOIN"
            " (SELECT m.seq, m.created_at, m.body FROM json_each(?) r CROSS JOIN messages m"
            " WHERE m.user_id = ? AND m.session_id = ? AND m.seq"
            " BETWEEN json_extract(r.value, '$[0]') AND json_extract(r.value, '$[1]')) m ON 1"
            " WHERE s.user_id = ? AND s.session_id = ? AND s.updated_at > ? ORDER BY m.seq",
            (pairs, key.user_id, key.session_id, key.user_id, key.session_id,
             expiry_cutoff(self._clock(), self._ttl)))
        if not rows or str(rows[0][0] or "") != epoch:
            return None
        return [StoredMessage(seq=seq, message=decode_document(body, f"message {seq}"),
                              created_at=at) for _, seq, at, body in rows if seq is not None]

    def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """Live sessions, of one user or all, sorted by ``(user_id, session_id)``."""
        sql = ("SELECT user_id, session_id, last_seq, created_at, updated_at FROM sessions"
               " WHERE updated_at > ?")
        params: tuple[Any, ...] = (expiry_cutoff(self._clock(), self._ttl),)
        if user_id is not None:
            sql += " AND user_id = ?"
            params += (validate_stored_id(user_id, "user_id"),)
        return sorted_infos([
            SessionInfo(key=SessionKey(user_id=u, session_id=s), message_count=n,
                        created_at=c, updated_at=up)
            for u, s, n, c, up in self._query(sql, params)
        ])

    def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        return self._write(lambda db: self._erase(db, _PK, (key.user_id, key.session_id)) > 0)

    def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_stored_id(user_id, "user_id")
        return self._write(lambda db: self._erase(db, "user_id = ?", (user_id,)))

    def purge_expired(self) -> int:
        """Remove expired sessions; return how many."""
        if self._ttl is None:  # nothing expires; a closed store still says it is closed
            self._pool.check_open()
            return 0
        cutoff = expiry_cutoff(self._clock(), self._ttl)
        return self._write(lambda db: self._purge(db, cutoff))

    def close(self) -> None:
        """Close the idle connections, and the ones in use as their calls end."""
        self._pool.close()

    # -- transactions -------------------------------------------------------------------------

    def _append_if(
        self, db: sqlite3.Connection, key: SessionKey, messages: Sequence[Mapping[str, Any]],
        when: WriteConditions, state_text: str | None,
    ) -> Appended:
        now = self._clock()
        live, version = self._live_session(db, key, now)
        if when.idempotency_key is not None:
            done = db.execute(f"SELECT first_seq, count FROM write_keys WHERE {_PK}"
                              " AND write_key = ?", (key.user_id, key.session_id,
                                                     when.idempotency_key)).fetchone()
            if done is not None:
                return Appended(seqs=list(range(done[0], done[0] + done[1])),
                                epoch=live[0] if live is not None else "", replayed=True)
        refuse_write(when, live_epoch=None if live is None else live[0],
                     last=0 if live is None else live[1], version=version)
        seqs, epoch = self._append(db, key, messages, now)
        if state_text is not None:
            version = self._put_state(db, key, state_text, version, now)
        if when.idempotency_key is not None and seqs:
            db.execute("INSERT INTO write_keys (user_id, session_id, write_key, first_seq, count)"
                       " VALUES (?, ?, ?, ?, ?)", (key.user_id, key.session_id,
                                                   when.idempotency_key, seqs[0], len(seqs)))
        return Appended(seqs=seqs, epoch=epoch,
                        state_version=version if state_text is not None else None)

    def _append_index(self, db: sqlite3.Connection, key: SessionKey, part: str, epoch: str,
                      replace: bool) -> bool:
        row = db.execute(f"SELECT epoch, updated_at FROM sessions WHERE {_PK}",
                         (key.user_id, key.session_id)).fetchone()
        if row is None or str(row[0] or "") != epoch or is_expired(
                float(row[1]), self._clock(), self._ttl):
            return False
        if replace:
            db.execute(f"DELETE FROM recall_index WHERE {_PK}", (key.user_id, key.session_id))
        else:  # parts of an older incarnation (a database written before erases cleared them)
            db.execute(f"DELETE FROM recall_index WHERE {_PK} AND epoch != ?",
                       (key.user_id, key.session_id, epoch))
        db.execute(
            "INSERT INTO recall_index (user_id, session_id, epoch, part, data) VALUES"
            " (?, ?, ?, (SELECT coalesce(max(part), 0) + 1 FROM recall_index"
            f" WHERE {_PK}), ?)", (key.user_id, key.session_id, epoch, key.user_id,
                                   key.session_id, part))
        return True

    def _live_session(self, db: sqlite3.Connection, key: SessionKey, now: float
                      ) -> tuple[tuple[str, int] | None, int | None]:
        """(epoch, last seq) of the live session (None when there is none), its state's version.

        An expired session is erased first: a new write starts it afresh at seq 1. Sessions
        stored before epochs existed read as epoch "" until they are erased. One read for
        all of it: a write transaction asks on every ``prepare``.
        """
        row = db.execute(
            "SELECT s.updated_at, s.epoch, s.last_seq, t.version FROM sessions s LEFT JOIN"
            " states t ON t.user_id = s.user_id AND t.session_id = s.session_id"
            " WHERE s.user_id = ? AND s.session_id = ?", (key.user_id, key.session_id)).fetchone()
        if row is None:  # no session row: a state can still be there (a database of old)
            return None, self._state_version(db, key)
        if is_expired(float(row[0]), now, self._ttl):
            self._erase(db, _PK, (key.user_id, key.session_id))
            return None, None
        return (str(row[1] or ""), int(row[2])), None if row[3] is None else int(row[3])

    def _state_version(self, db: sqlite3.Connection, key: SessionKey) -> int | None:
        row = db.execute(f"SELECT version FROM states WHERE {_PK}",
                         (key.user_id, key.session_id)).fetchone()
        return None if row is None else int(row[0])

    def _append(self, db: sqlite3.Connection, key: SessionKey,
                messages: Sequence[Mapping[str, Any]], now: float) -> tuple[list[int], str]:
        """Append ``messages`` to a session ``_live_session`` has checked; (seqs, its epoch)."""
        first, epoch = self._touch(db, key, now, len(messages))
        seqs = list(range(first, first + len(messages)))
        if not seqs:  # a state write refreshes the session and stores no message
            return seqs, epoch
        # A generator, so each message is encoded after the rows before it were inserted: an
        # encoding failure mid-batch happens inside the transaction and rolls everything back.
        rows = (
            (key.user_id, key.session_id, seq, now, encode_document(m, f"message {i}"))
            for i, (seq, m) in enumerate(zip(seqs, messages, strict=True))
        )
        db.executemany(
            "INSERT INTO messages (user_id, session_id, seq, created_at, body)"
            " VALUES (?, ?, ?, ?, ?)", rows)
        return seqs, epoch

    def _put_state(self, db: sqlite3.Connection, key: SessionKey, text: str,
                   current: int | None, now: float) -> int:
        version = (current or 0) + 1
        db.execute(
            "INSERT INTO states (user_id, session_id, version, data, updated_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, session_id) DO UPDATE SET"
            " version = excluded.version, data = excluded.data, updated_at = excluded.updated_at",
            (key.user_id, key.session_id, version, text, now))
        return version

    def _touch(self, db: sqlite3.Connection, key: SessionKey, now: float,
               added: int) -> tuple[int, str]:
        """Create or refresh the session row, reserve ``added`` seqs: (the first one, epoch).

        Expiry is ``_live_session``'s, checked earlier in the same transaction.
        """
        row = db.execute(
            "INSERT INTO sessions (user_id, session_id, created_at, updated_at, last_seq, epoch)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, session_id) DO UPDATE SET"
            " updated_at = excluded.updated_at, last_seq = sessions.last_seq + excluded.last_seq"
            " RETURNING last_seq, epoch",
            (key.user_id, key.session_id, now, now, added, new_epoch())).fetchone()
        return int(row[0]) - added + 1, str(row[1] or "")

    def _erase(self, db: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
        """Delete the matching sessions with their messages and states; count the live ones."""
        cutoff = expiry_cutoff(self._clock(), self._ttl)
        live = db.execute(f"SELECT count(*) FROM sessions WHERE {where} AND updated_at > ?",
                          (*params, cutoff)).fetchone()[0]
        for table in _TABLES:
            db.execute(f"DELETE FROM {table} WHERE {where}", params)
        return int(live)

    def _purge(self, db: sqlite3.Connection, cutoff: float) -> int:
        expired = "(user_id, session_id) IN (SELECT user_id, session_id FROM sessions" \
                  " WHERE updated_at <= ?)"
        for table in _TABLES[:-1]:
            db.execute(f"DELETE FROM {table} WHERE {expired}", (cutoff,))
        return db.execute("DELETE FROM sessions WHERE updated_at <= ?", (cutoff,)).rowcount

    def _session_row(self, key: SessionKey) -> tuple[Any, ...] | None:
        rows = self._query(
            "SELECT created_at, updated_at, last_seq, epoch FROM sessions"
            f" WHERE {_PK} AND updated_at > ?",
            (key.user_id, key.session_id, expiry_cutoff(self._clock(), self._ttl)))
        return rows[0] if rows else None

    # -- connections --------------------------------------------------------------------------

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any error."""
        with self._errors(), self._pool.lease() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.rollback()
                raise
            db.commit()
            return result

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._errors(), self._pool.lease() as db:
            return db.execute(sql, params).fetchall()

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so the write lock is taken
        # before the seq counter is read, never upgraded mid-transaction. check_same_thread=False:
        # a connection serves one call at a time, but not always on the thread that opened it.
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            for pragma in self._pragmas:
                db.execute(pragma)
            db.execute("PRAGMA journal_mode = WAL")
        except BaseException:
            db.close()
            raise
        return db

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Map driver errors onto the store's error tree, without the driver's text."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"sqlite store unavailable ({type(exc).__name__})") from exc
        except sqlite3.ProgrammingError as exc:
            raise StoreError(f"sqlite store misused ({type(exc).__name__})") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"sqlite store failed ({type(exc).__name__})") from exc


def database_path(path: object) -> str:
    """The file a store opens, checked: a ``str`` or path-like naming a file."""
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError("path must be a str or os.PathLike")
    name = os.fspath(path)
    if name in ("", ":memory:"):
        # SQLite gives each connection its own private database for these, and calls on other
        # threads borrow other connections: they would find no tables, or not the messages
        # stored through another connection.
        raise InvalidInputError(
            "an in-memory SQLite database is private to one connection and this store lends "
            "several: use MemoryStore() (memory://) or a file path")
    return str(name)


def _reusable(db: sqlite3.Connection) -> bool:
    """Outside any transaction: the next call may start afresh on it."""
    return not db.in_transaction


def _create_schema(db: sqlite3.Connection) -> None:
    for sql in _SCHEMA:
        db.execute(sql)
    columns = {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
    if "epoch" not in columns:  # a database from before epochs: its sessions read as epoch ""
        db.execute("ALTER TABLE sessions ADD COLUMN epoch TEXT")
