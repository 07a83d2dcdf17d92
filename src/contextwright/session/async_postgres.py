"""``AsyncPostgresStore``: ``PostgresStore`` for an event loop, on psycopg's async connections.

It runs the same SQL flows as ``PostgresStore`` (``postgres_common``) on the same schema, so a sync
and an async worker serve one session alike. Connections come from a ``psycopg_pool``
``AsyncConnectionPool`` (autocommit; each write opens its own transaction), opened — and the schema
created — on the first call, on the loop that makes it; the store then serves that loop only
(``LoopGuard``). Long reads are decoded on a worker thread. ``psycopg`` and ``psycopg_pool`` are
imported only when the store first connects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from contextwright.checks import seconds, whole_number
from contextwright.errors import (
    InvalidInputError,
    OutcomeUnknown,
    StoreError,
    StoreUnavailable,
)
from contextwright.session.flow import LoopGuard
from contextwright.session.postgres_common import (
    DEFAULT_PREPARE_THRESHOLD,
    PostgresLayout,
    SqlFlow,
    arun_sql,
    connect_timeout_option,
    connecting,
    postgres_errors,
    psycopg_module,
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
    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")

DECODE_INLINE = 64
"""Messages a read decodes on the loop itself; more are decoded on a worker thread."""


class AsyncPostgresStore:
    """An ``AsyncStore`` in PostgreSQL; pooled connections, every write one transaction."""

    def __init__(
        self,
        dsn: str,
        *,
        ttl_seconds: float | None = None,
        schema: str = "contextwright",
        clock: Clock = time.time,
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout: float = 10.0,
        prepare_threshold: int | None = DEFAULT_PREPARE_THRESHOLD,
    ) -> None:
        """Check the arguments; connect (and create ``schema`` if missing) on first use.

        At most ``max_connections`` calls run at once; others wait for a connection, up to
        ``connect_timeout`` seconds (then ``StoreUnavailable``). ``prepare_threshold`` is
        ``PostgresStore``'s (None for PgBouncer in transaction mode).
        """
        whole_number(min_connections, "min_connections", minimum=1)
        whole_number(max_connections, "max_connections", minimum=1)
        if min_connections > max_connections:
            raise InvalidInputError("need 1 <= min_connections <= max_connections")
        timeout = seconds(connect_timeout, "connect_timeout")
        self._layout = PostgresLayout(schema, ttl_seconds, clock)
        self._dsn = validate_address(dsn, "dsn")
        self._prepare_threshold = validate_prepare_threshold(prepare_threshold)
        self._sizes = (min_connections, max_connections)
        self._timeout = timeout
        self._guard = LoopGuard("AsyncPostgresStore")
        self._pool: AsyncConnectionPool[Any] | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def __aenter__(self) -> AsyncPostgresStore:
        """Connect now and create the schema (``StoreUnavailable`` if PostgreSQL is down)."""
        await self._ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the pool."""
        await self.aclose()

    # -- the protocol -------------------------------------------------------------------------

    async def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append all ``messages`` in one transaction; return their seqs."""
        return (await self.append_if(key, messages)).seqs

    async def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """Append ``messages`` (and put ``state``) in one transaction if the conditions hold."""
        when, state_text = write_conditions(key, messages, last_seq, epoch, idempotency_key, state)
        return await self._write(lambda: self._layout.append_if(key, messages, when, state_text))

    async def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        return await self._query(self._layout.epoch(key))

    async def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        return await self._query(self._layout.find_write(key, idempotency_key))

    async def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        rows = await self._query(self._layout.read(key, after, last))
        if len(rows) <= DECODE_INLINE:
            return stored_messages(rows)
        return await asyncio.to_thread(stored_messages, rows)

    async def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        return await self._query(self._layout.count(key))

    async def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        return await self._query(self._layout.get_state(key))

    async def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """Replace the state if it is at ``expected_version``; return the new version."""
        write = StateWrite(data=data, expected_version=expected_version)
        version = (await self.append_if(key, [], epoch=epoch, state=write)).state_version
        assert version is not None  # a StateWrite that passed its checks is always written
        return version

    async def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """Live sessions, of one user or all, sorted by ``(user_id, session_id)``."""
        if user_id is not None:
            validate_stored_id(user_id, "user_id")
        return await self._query(self._layout.list_sessions(user_id))

    async def append_index(self, key: SessionKey, part: str, *, epoch: str,
                           replace: bool = False) -> bool:
        """Append a part of the recall index if ``epoch`` is live (one transaction)."""
        validate_index_part(key, part, epoch)
        return await self._write(lambda: self._layout.append_index(key, part, epoch, replace))

    async def read_index(self, key: SessionKey) -> StoredIndex | None:
        """The live session's epoch and recall index parts."""
        return await self._query(self._layout.read_index(key))

    async def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *,
                         epoch: str) -> list[StoredMessage] | None:
        """The live session's messages in ``spans`` (seqs, inclusive); None if not ``epoch``."""
        merged = validate_spans(spans, epoch)
        return await self._query(self._layout.read_spans(key, merged, epoch))

    async def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        return await self._write(lambda: self._layout.erase_session(key))

    async def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_stored_id(user_id, "user_id")
        return await self._write(lambda: self._layout.erase_user(user_id))

    async def purge_expired(self) -> int:
        """Remove expired sessions; return how many."""
        if self._layout.ttl is None:  # nothing expires; a closed store still says it is closed
            if self._closed:
                raise StoreError("the store is closed")
            return 0
        return await self._write(self._layout.purge)

    async def aclose(self) -> None:
        """Close the pool; later calls raise ``StoreError``."""
        self._closed = True
        if self._pool is not None:
            # Its connections belong to the loop they were made on, which must close them: from
            # another one (often already ended) that fails in the driver's internals.
            self._guard.check()
        # A first call may be opening the pool right now: wait for it, so that pool is closed
        # too rather than left open (with its connections) by a store already closed.
        async with self._opening:
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- connections --------------------------------------------------------------------------

    async def _write(self, flow: Callable[[], SqlFlow[T]]) -> T:
        """Run the flow in one transaction (see ``PostgresStore._write``)."""
        committing = False
        try:
            async with self._connection() as db, db.transaction():
                result = await arun_sql(flow(), db)
                committing = True
        except StoreUnavailable as exc:
            if committing:
                raise OutcomeUnknown(
                    "postgres store: the connection was lost while committing; the write may "
                    "have been applied (retry with the same idempotency_key)") from exc
            raise
        return result

    async def _query(self, flow: SqlFlow[T]) -> T:
        async with self._connection() as db:
            return await arun_sql(flow, db)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection; driver errors mapped, without the driver's text."""
        pool = await self._ready()
        from psycopg_pool import PoolTimeout

        with postgres_errors():
            try:
                db = await self._live_connection(pool)
            except PoolTimeout as exc:
                raise StoreUnavailable("postgres store unavailable (no connection in time)"
                                       ) from exc
            try:
                yield db
            finally:
                await pool.putconn(db)

    async def _live_connection(self, pool: AsyncConnectionPool[Any]
                               ) -> psycopg.AsyncConnection[Any]:
        """A pooled connection the server has not dropped while it was idle.

        One it dropped (a restart, a failover) is closed, so the pool replaces it, and the next
        is taken: the calls after a drop do not fail one per dead connection. (psycopg_pool's
        own ``check`` waits a growing back-off after each dead one: seconds for a few.)
        """
        for _ in range(self._sizes[1] + 1):
            db: psycopg.AsyncConnection[Any] = await pool.getconn(timeout=self._timeout)
            if not server_spoke(db):
                return db
            await db.close()
            await pool.putconn(db)
        raise StoreUnavailable("postgres store unavailable (every pooled connection was dropped)")

    async def _ready(self) -> AsyncConnectionPool[Any]:
        """The pool, opened with the schema created on the first call (on this loop only)."""
        if self._closed:
            raise StoreError("the store is closed")
        self._guard.check()
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                try:
                    pool = await self._open_pool()
                except BaseException:
                    self._guard.release()
                    raise
                try:
                    async with pool.connection(timeout=self._timeout) as db, db.transaction():
                        with postgres_errors():
                            await arun_sql(self._layout.create_schema(), db)
                except BaseException:
                    self._guard.release()
                    await pool.close()
                    raise
                self._pool = pool
        return self._pool

    async def _open_pool(self) -> AsyncConnectionPool[Any]:
        driver = psycopg_module()
        # One direct connection first: a refused or misconfigured server fails at once with
        # StoreUnavailable, where the pool would keep retrying until its timeout.
        with postgres_errors(), connecting():
            probe = await driver.AsyncConnection.connect(
                self._dsn, autocommit=True,
                **connect_timeout_option(self._dsn, max(2, round(self._timeout))))
            await probe.close()
        try:
            from psycopg_pool import AsyncConnectionPool, PoolTimeout
        except ImportError as exc:
            raise StoreUnavailable("AsyncPostgresStore needs psycopg_pool: "
                                   "pip install 'contextwright[postgres]'") from exc
        minimum, maximum = self._sizes
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self._dsn, min_size=minimum, max_size=maximum, open=False, timeout=self._timeout,
            kwargs={"autocommit": True, "prepare_threshold": self._prepare_threshold,
                    **connect_timeout_option(self._dsn, max(1, round(self._timeout)))})
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise StoreUnavailable("postgres store unavailable (cannot connect)") from exc
        return pool

