"""The PostgreSQL stores can run without server-side prepared statements (PgBouncer).

psycopg prepares a statement on the server once a connection has run it five times. Behind
PgBouncer in transaction mode (before 1.21, or without ``max_prepared_statements``) the next
transaction may run on another server connection, which does not have it: the store failed
once warm. ``prepare_threshold=None`` (a constructor argument, or ``?prepare_threshold=none``
in ``open_store``'s URL) prepares none. Checked on the server: ``pg_prepared_statements``
lists a connection's prepared statements.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from contextwright.errors import InvalidInputError
from contextwright.session import (
    AsyncPostgresStore,
    AsyncStore,
    PostgresStore,
    SessionKey,
    Store,
    open_async_store,
    open_store,
)

POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
KEY = SessionKey(user_id="bouncer", session_id="s")
ROUNDS = 8
"""More than psycopg's threshold (5) of runs of each statement on one connection."""
PREPARED = "SELECT count(*) FROM pg_prepared_statements"


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"cwtest_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _work(store: Store) -> None:
    """Every kind of statement the store runs, each more often than the threshold."""
    for round_ in range(ROUNDS):
        store.append(KEY, [{"role": "user", "content": f"m{round_}"},
                           {"role": "assistant", "content": "ok"}])
        store.put_state(KEY, {"round": round_}, expected_version=round_ or None)
        store.read(KEY, last=2)
        store.count(KEY)
        store.get_state(KEY)
        store.list_sessions()


def _prepared(store: PostgresStore) -> int:
    """Statements prepared on the connection the store uses (it keeps one idle)."""
    with store._pool.lease() as db:
        row = db.execute(PREPARED).fetchone()
    assert row is not None
    return int(row[0])


async def _awork(store: AsyncStore) -> None:
    for round_ in range(ROUNDS):
        await store.append(KEY, [{"role": "user", "content": f"m{round_}"}])
        await store.put_state(KEY, {"round": round_}, expected_version=round_ or None)
        await store.read(KEY, last=2)
        await store.count(KEY)
        await store.list_sessions()


async def _aprepared(store: AsyncPostgresStore) -> int:
    """Statements prepared on the store's one pooled connection."""
    assert store._pool is not None
    async with store._pool.connection() as db:
        row = await (await db.execute(PREPARED)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(("options", "none_prepared"), [
    ({}, False), ({"prepare_threshold": None}, True)], ids=["default", "none"])
def test_the_sync_store_prepares_statements_only_unless_told_not_to(
        schema: str, options: dict[str, Any], none_prepared: bool) -> None:
    store = PostgresStore(POSTGRES_DSN, schema=schema, max_idle_connections=1, **options)
    try:
        _work(store)
        assert (_prepared(store) == 0) is none_prepared
        assert store.count(KEY) == 2 * ROUNDS
    finally:
        store.close()


@pytest.mark.parametrize(("options", "none_prepared"), [
    ({}, False), ({"prepare_threshold": None}, True)], ids=["default", "none"])
def test_the_async_store_prepares_statements_only_unless_told_not_to(
        schema: str, options: dict[str, Any], none_prepared: bool) -> None:
    async def run() -> int:
        async with AsyncPostgresStore(POSTGRES_DSN, schema=schema, min_connections=1,
                                      max_connections=1, **options) as store:
            await _awork(store)
            return await _aprepared(store)

    assert (asyncio.run(run()) == 0) is none_prepared


def test_open_store_reads_the_option_from_the_url(schema: str) -> None:
    url = f"{POSTGRES_DSN}?schema={schema}&prepare_threshold=none"
    store = open_store(url)
    try:
        assert isinstance(store, PostgresStore)
        _work(store)
        assert _prepared(store) == 0
        assert store.erase_session(KEY)  # the async store below starts the session afresh
    finally:
        store.close()

    async def run() -> int:
        store = open_async_store(url)
        assert isinstance(store, AsyncPostgresStore)
        async with store:
            await _awork(store)
            return await _aprepared(store)

    assert asyncio.run(run()) == 0


def test_a_url_threshold_is_a_whole_number_or_none(schema: str) -> None:
    store = open_store(f"{POSTGRES_DSN}?schema={schema}&prepare_threshold=0")
    try:  # 0: every statement is prepared at its first run
        assert isinstance(store, PostgresStore)
        store.count(KEY)
        assert _prepared(store) >= 1
    finally:
        store.close()
    for value in ("", "-1", "five", "1.5", "None&prepare_threshold=none"):
        with pytest.raises(InvalidInputError, match="prepare_threshold"):
            open_store(f"{POSTGRES_DSN}?schema={schema}&prepare_threshold={value}")


@pytest.mark.parametrize("value", [-1, 1.5, "5", True])
def test_the_constructors_refuse_a_threshold_that_is_not_none_or_a_count(
        schema: str, value: Any) -> None:
    with pytest.raises(InvalidInputError, match="prepare_threshold"):
        PostgresStore(POSTGRES_DSN, schema=schema, prepare_threshold=value)
    with pytest.raises(InvalidInputError, match="prepare_threshold"):
        AsyncPostgresStore(POSTGRES_DSN, schema=schema, prepare_threshold=value)


def test_a_dsn_given_the_option_directly_is_told_where_it_goes(schema: str) -> None:
    with pytest.raises(InvalidInputError, match="prepare_threshold="):
        PostgresStore(f"{POSTGRES_DSN}?prepare_threshold=none", schema=schema)
