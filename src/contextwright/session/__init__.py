"""Sessions: where conversations and their state are kept between calls.

The ``Store`` protocol and its backends (memory, SQLite, Redis, PostgreSQL); ``open_store`` picks
one from a URL. ``AsyncStore`` and its backends (``AsyncMemoryStore``, ``AsyncSqliteStore``,
``AsyncRedisStore``, ``AsyncPostgresStore``; ``open_async_store``) are the same for an event loop.
"""

from contextwright.session.async_local import AsyncMemoryStore, AsyncSqliteStore
from contextwright.session.async_postgres import AsyncPostgresStore
from contextwright.session.async_redis import AsyncRedisStore
from contextwright.session.memory import MemoryStore
from contextwright.session.postgres import PostgresStore
from contextwright.session.redis import RedisStore
from contextwright.session.sqlite import SqliteStore
from contextwright.session.store import (
    Appended,
    AsyncStore,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    Store,
    StoredMessage,
    open_async_store,
    open_store,
)

__all__ = [
    "Appended",
    "AsyncMemoryStore",
    "AsyncPostgresStore",
    "AsyncRedisStore",
    "AsyncSqliteStore",
    "AsyncStore",
    "MemoryStore",
    "PostgresStore",
    "RedisStore",
    "SessionInfo",
    "SessionKey",
    "SqliteStore",
    "StateRecord",
    "StateWrite",
    "Store",
    "StoredMessage",
    "open_async_store",
    "open_store",
]
