"""``SqliteStore(":memory:")`` is refused: SQLite makes one such database per connection.

The store lends a connection per call, and calls on other threads (a manager's summary
updates, a thread per request) borrow other connections, each with a private, empty database:
they failed with ``StoreUnavailable`` ("no such table") or read none of the messages stored.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from contextwright.errors import InvalidInputError
from contextwright.session import AsyncSqliteStore, SqliteStore, open_async_store, open_store


@pytest.mark.parametrize("path", [":memory:", ""])
def test_an_in_memory_sqlite_database_is_refused(path: str) -> None:
    with pytest.raises(InvalidInputError, match="MemoryStore"):
        SqliteStore(path)


def test_the_url_and_the_async_store_refuse_it_too() -> None:
    with pytest.raises(InvalidInputError, match="MemoryStore"):
        open_store("sqlite:///:memory:")
    with pytest.raises(InvalidInputError, match="MemoryStore"):
        AsyncSqliteStore(":memory:")
    with pytest.raises(InvalidInputError, match="MemoryStore"):
        open_async_store("sqlite:///:memory:")


def test_a_file_is_still_taken(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "memory.db").close()
    asyncio.run(AsyncSqliteStore(str(tmp_path / ":memory:")).aclose())
