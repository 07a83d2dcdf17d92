"""``PostgresStore``: sessions in PostgreSQL (psycopg 3), for many processes and machines.

Connections are lent per operation from a ``ConnectionPool`` (so a thread that ends leaves no
connection behind); every write is one transaction. What each operation executes — the
schema, the row locks, the conditions, the lazy encoding inside the transaction — is written once
in ``postgres_common`` as an SQL flow, shared with ``AsyncPostgresStore``; this class picks the
connection and the transaction and runs the flows on it. ``psycopg`` is imported only when a store
is created.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from contextwright.errors import InvalidInputError, OutcomeUnknown, StoreUnavailable
from contextwright.session.pool import DEFAULT_MAX_IDLE, ConnectionPool
from contextwright.session.postgres_common import (
    DEFAULT_PREPARE_THRESHOLD,
    PostgresLayout,
    SqlFlow,
    connect_timeout_option,
    connecting,
    postgres_errors,
    psycopg_module,
    run_sql,
    server_spoke,
    stored_messages,
    validate_prepare_threshold,
    write_conditions,
)
from contextwright.session.store import (
    Appended,
    Clock,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredIndex,
    StoredMessage,
    validate_address,
    validate_conditions,
    validate_index_part,
    validate_read_args,
    validate_spans,
    validate_stored_id,
)

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")


class PostgresStore:
    """A ``Store`` in PostgreSQL; a pooled connection per operation, every write one transaction."""

    def __init__(
        self,
        dsn: str,
        *,
        ttl_seconds: float | None = None,
        schema: str = "contextwright",
        clock: Clock = time.time,
        max_idle_connections: int = DEFAULT_MAX_IDLE,
        prepare_threshold: int | None = DEFAULT_PREPARE_THRESHOLD,
        create: bool = True,
    ) -> None:
        """Connect to ``dsn`` and create ``schema`` and its tables if they are missing.

        ``create=False`` creates neither: a schema that does not exist, or holds no session
        store, is ``StoreError`` (for tools that look after existing sessions, where a mistyped
        schema would otherwise be created and shown as an empty store). A store made by an
        older version still gets the tables added since, as with ``create=True``.

        Each call borrows a connection and gives it back; up to ``max_idle_connections`` are
        kept open between calls (more are opened while more calls run at once).
        ``prepare_threshold`` is psycopg's: a statement run that many times on one connection
        is prepared on the server; None prepares none, as PgBouncer in transaction mode needs
        (``?prepare_threshold=none`` in ``open_store``'s URL).
        """
        if not isinstance(create, bool):
            raise InvalidInputError("create must be True or False")
        self._layout = PostgresLayout(schema, ttl_seconds, clock)
        self._dsn = validate_address(dsn, "dsn")
        self._prepare_threshold = validate_prepare_threshold(prepare_threshold)
        self._connect_options = connect_timeout_option(dsn, 10)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self._connect, usable=_reusable, close=_close, max_idle=max_idle_connections,
            alive=_still_connected)
        try:
            self._write(self._layout.create_schema if create else self._layout.open_existing)
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
        when, state_text = write_conditions(key, messages, last_seq, epoch, idempotency_key, state)
        return self._write(lambda: self._layout.append_if(key, messages, when, state_text))

    def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        return self._query(self._layout.epoch(key))

    def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        return self._query(self._layout.find_write(key, idempotency_key))

    def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        return stored_messages(self._query(self._layout.read(key, after, last)))

    def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        return self._query(self._layout.count(key))

    def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        return self._query(self._layout.get_state(key))

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
        if user_id is not None:
            validate_stored_id(user_id, "user_id")
        return self._query(self._layout.list_sessions(user_id))

    def append_index(self, key: SessionKey, part: str, *, epoch: str,
                     replace: bool = False) -> bool:
        """Append a part of the recall index if ``epoch`` is live (one transaction)."""
        validate_index_part(key, part, epoch)
        return self._write(lambda: self._layout.append_index(key, part, epoch, replace))

    def read_index(self, key: SessionKey) -> StoredIndex | None:
        """The live session's epoch and recall index parts."""
        return self._query(self._layout.read_index(key))

    def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *,
                   epoch: str) -> list[StoredMessage] | None:
        """The live session's messages in ``spans`` (seqs, inclusive); None if not ``epoch``."""
        merged = validate_spans(spans, epoch)
        return self._query(self._layout.read_spans(key, merged, epoch))

    def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        return self._write(lambda: self._layout.erase_session(key))

    def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_stored_id(user_id, "user_id")
        return self._write(lambda: self._layout.erase_user(user_id))

    def purge_expired(self) -> int:
        """Remove expired sessions; return how many."""
        if self._layout.ttl is None:  # nothing expires; a closed store still says it is closed
            self._pool.check_open()
            return 0
        return self._write(self._layout.purge)

    def close(self) -> None:
        """Close the idle connections, and the ones in use as their calls end."""
        self._pool.close()

    # -- connections --------------------------------------------------------------------------

    def _write(self, flow: Callable[[], SqlFlow[T]]) -> T:
        """Run the flow in one transaction; it commits on success and rolls back on any error.

        A connection lost while committing leaves the outcome unknown (the server may have
        committed): that is ``OutcomeUnknown``, not a plain ``StoreUnavailable``.
        """
        committing = False
        try:
            with self._errors() as db, db.transaction():
                result = run_sql(flow(), db)
                committing = True
        except StoreUnavailable as exc:
            if committing:
                raise OutcomeUnknown(
                    "postgres store: the connection was lost while committing; the write may "
                    "have been applied (retry with the same idempotency_key)") from exc
            raise
        return result

    def _query(self, flow: SqlFlow[T]) -> T:
        with self._errors() as db:
            return run_sql(flow, db)

    def _connect(self) -> psycopg.Connection[Any]:
        driver = psycopg_module()
        # autocommit: reads are single statements; writes open db.transaction() themselves.
        with connecting():
            db: psycopg.Connection[Any] = driver.connect(
                self._dsn, autocommit=True, prepare_threshold=self._prepare_threshold,
                **self._connect_options)
        return db

    @contextmanager
    def _errors(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend a connection for the block; map driver errors, without the driver's text."""
        with postgres_errors(), self._pool.lease() as db:
            yield db


def _reusable(db: psycopg.Connection[Any]) -> bool:
    """Open, not broken, and outside any transaction: the next call may start afresh on it."""
    from psycopg.pq import TransactionStatus

    # libpq says UNKNOWN, not IDLE, for a closed or lost connection.
    return not db.broken and db.pgconn.transaction_status == TransactionStatus.IDLE


def _still_connected(db: psycopg.Connection[Any]) -> bool:
    """Lent again only if the server has not dropped it while it was idle."""
    return _reusable(db) and not server_spoke(db)


def _close(db: psycopg.Connection[Any]) -> None:
    db.close()

