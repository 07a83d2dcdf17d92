"""Closing an async store: nothing is left open, and nothing is served afterwards.

``aclose()`` that runs while the store's first call is still connecting used to find no pool
yet and return; the call then opened one for a store already closed, and its connections
stayed open. And an ``AsyncMemoryStore`` over a given ``MemoryStore`` went on answering after
``aclose()``, where every store raises ``StoreError``.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable

import psycopg
import pytest
import redis

from contextwright.errors import StoreError, StoreUsageError
from contextwright.session import (
    AsyncMemoryStore,
    AsyncPostgresStore,
    AsyncRedisStore,
    MemoryStore,
    SessionKey,
)

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
KEY = SessionKey(user_id="closing", session_id="s")




def _backends_named(application: str) -> int:
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                            (application,)).fetchone()
    assert row is not None
    return int(row[0])


def _redis_clients_named(name: str) -> int:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(entry.get("name") == name for entry in client.client_list())
    finally:
        client.close()


async def _first_call_racing_aclose(store: AsyncPostgresStore | AsyncRedisStore,
                                    still_connected: Callable[[], int]) -> int:
    """Race the first call with ``aclose``; the connections left open while the loop runs."""
    outcomes = await asyncio.gather(store.append(KEY, [{"role": "user", "content": "hi"}]),
                                    store.aclose(), return_exceptions=True)
    # The call may land or fail as the store closes under it; it never hangs or leaks.
    assert all(not isinstance(outcome, BaseException) or isinstance(outcome, StoreError)
               for outcome in outcomes), outcomes
    with pytest.raises(StoreError, match="closed"):
        await store.count(KEY)
    await asyncio.sleep(0.2)
    return await asyncio.to_thread(still_connected)


def test_postgres_aclose_during_the_first_connect_closes_the_pool(schema: str) -> None:
    application = f"cw-{uuid.uuid4().hex[:12]}"
    dsn = f"{POSTGRES_DSN}?application_name={application}"
    store = AsyncPostgresStore(dsn, schema=schema)
    assert asyncio.run(_first_call_racing_aclose(
        store, lambda: _backends_named(application))) == 0


def test_redis_aclose_during_the_first_connect_closes_the_client(prefix: str) -> None:
    name = f"cw-{uuid.uuid4().hex[:12]}"
    store = AsyncRedisStore(f"{REDIS_URL}?client_name={name}", prefix=prefix)
    assert asyncio.run(_first_call_racing_aclose(
        store, lambda: _redis_clients_named(name))) == 0


def test_a_closed_memory_wrapper_refuses_calls_and_leaves_the_shared_store_open() -> None:
    shared = MemoryStore()

    async def main() -> None:
        store = AsyncMemoryStore(store=shared)
        await store.append(KEY, [{"role": "user", "content": "hi"}])
        await store.aclose()
        with pytest.raises(StoreError, match="closed"):
            await store.append(KEY, [{"role": "user", "content": "again"}])
        with pytest.raises(StoreError, match="closed"):
            await store.read(KEY)

    asyncio.run(main())
    assert [m.message["content"] for m in shared.read(KEY)] == ["hi"]


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_aclose_on_another_loop_is_a_usage_error(kind: str, schema: str, prefix: str) -> None:
    """The connections belong to the loop they were made on (``asyncio.run(main())`` then
    ``asyncio.run(store.aclose())``): closing them on another was a bare ``RuntimeError``."""
    store: AsyncPostgresStore | AsyncRedisStore = (
        AsyncRedisStore(REDIS_URL, prefix=prefix) if kind == "redis"
        else AsyncPostgresStore(POSTGRES_DSN, schema=schema))
    own_loop = asyncio.new_event_loop()
    try:
        assert own_loop.run_until_complete(store.count(KEY)) == 0
        with pytest.raises(StoreUsageError, match="another event loop"):
            asyncio.run(store.aclose())
        with pytest.raises(StoreError, match="closed"):
            own_loop.run_until_complete(store.count(KEY))
        own_loop.run_until_complete(store.aclose())  # its own loop still closes it
    finally:
        own_loop.close()
