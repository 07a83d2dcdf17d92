"""A closed store raises ``StoreError`` on every call, ``purge_expired`` included.

Without a TTL nothing can expire, and the SQLite and PostgreSQL stores answered
``purge_expired()`` with 0 without looking, closed or not.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from contextwright.errors import StoreError
from contextwright.session import AsyncPostgresStore, PostgresStore, SqliteStore

POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")



def test_closed_sync_stores_refuse_purge_expired(tmp_path: Path, schema: str) -> None:
    for store in (SqliteStore(tmp_path / "s.db"), PostgresStore(POSTGRES_DSN, schema=schema)):
        assert store.purge_expired() == 0
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.purge_expired()


def test_a_closed_async_postgres_store_refuses_purge_expired(schema: str) -> None:
    async def main() -> None:
        store = AsyncPostgresStore(POSTGRES_DSN, schema=schema)
        assert await store.purge_expired() == 0
        await store.aclose()
        with pytest.raises(StoreError, match="closed"):
            await store.purge_expired()

    asyncio.run(main())
