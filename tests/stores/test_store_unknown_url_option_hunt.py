"""A Redis URL or PostgreSQL DSN with an option its driver does not know is an input error.

``RedisStore("redis://…?prefix=p")`` (the prefix belongs to ``open_store``'s URL or to the
``prefix=`` argument) was a bare ``TypeError`` from deep in redis-py, and
``PostgresStore("postgresql://…?schema=s")`` a ``StoreError`` saying only that the store
failed.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from contextwright.errors import InvalidInputError
from contextwright.session import (
    AsyncPostgresStore,
    AsyncRedisStore,
    PostgresStore,
    RedisStore,
    SessionKey,
)

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
KEY = SessionKey(user_id="u", session_id="s")


def test_sync_stores_name_the_misplaced_option() -> None:
    with pytest.raises(InvalidInputError, match="prefix="):
        RedisStore(f"{REDIS_URL}?prefix=p")
    with pytest.raises(InvalidInputError, match="schema="):
        PostgresStore(f"{POSTGRES_DSN}?schema=s")


@pytest.mark.parametrize("make", [
    lambda: AsyncRedisStore(f"{REDIS_URL}?prefix=p"),
    lambda: AsyncPostgresStore(f"{POSTGRES_DSN}?schema=s"),
])
def test_async_stores_name_it_on_their_first_call(make: object) -> None:
    async def first_call() -> None:
        store = make()  # type: ignore[operator]
        try:
            await store.count(KEY)
        finally:
            await store.aclose()

    with pytest.raises(InvalidInputError, match=r"(prefix|schema)="):
        asyncio.run(first_call())
