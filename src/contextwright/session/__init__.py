"""Sessions: where conversations and their state are kept between calls.

The ``Store`` protocol and its backends (memory, SQLite, Redis, PostgreSQL); ``open_store`` picks
one from a URL.
"""

from contextwright.session.memory import MemoryStore
from contextwright.session.postgres import PostgresStore
from contextwright.session.redis import RedisStore
from contextwright.session.sqlite import SqliteStore
from contextwright.session.store import (
    Appended,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    Store,
    StoredMessage,
    open_store,
)

__all__ = [
    "Appended",
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
    "open_store",
]
