"""PostgreSQL ``read_spans`` is one primary-key range scan per span, on any statistics.

Until a table is analysed, PostgreSQL guesses a session holds a couple of rows; with the spans
joined to the messages, it then read the whole session once and tested every message against
every span: 1,000 spans over a 40,000-message session took seconds (40 million comparisons)
for 1,000 messages. The same read now takes milliseconds.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from contextwright.session import AsyncPostgresStore, PostgresStore, SessionKey

POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
KEY = SessionKey(user_id="spans", session_id="long")
MESSAGES, SPANS = 40_000, 1_000


@pytest.fixture
def long_session() -> Iterator[tuple[str, str, list[tuple[int, int]]]]:
    schema = f"cwtest_{uuid.uuid4().hex}"
    store = PostgresStore(POSTGRES_DSN, schema=schema)
    store.append(KEY, [{"role": "user", "content": f"m{seq}"} for seq in range(1, MESSAGES + 1)])
    epoch = store.epoch(KEY)
    assert epoch is not None
    store.close()
    step = MESSAGES // SPANS
    yield schema, epoch, [(seq, seq) for seq in range(1, MESSAGES + 1, step)]
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_many_spans_cost_what_they_read(
        long_session: tuple[str, str, list[tuple[int, int]]]) -> None:
    schema, epoch, spans = long_session
    store = PostgresStore(POSTGRES_DSN, schema=schema)
    try:
        store.read_spans(KEY, spans[:1], epoch=epoch)  # connected
        started = time.perf_counter()
        read = store.read_spans(KEY, spans, epoch=epoch)
        took = time.perf_counter() - started
    finally:
        store.close()
    assert read is not None and [m.seq for m in read] == [first for first, _ in spans]
    assert took < 1.0, f"{SPANS} spans of one message took {took:.2f} s"


def test_the_async_store_reads_them_the_same_way(
        long_session: tuple[str, str, list[tuple[int, int]]]) -> None:
    schema, epoch, spans = long_session

    async def timed_read() -> tuple[list[int], float]:
        store = AsyncPostgresStore(POSTGRES_DSN, schema=schema)
        try:
            await store.read_spans(KEY, spans[:1], epoch=epoch)
            started = time.perf_counter()
            read = await store.read_spans(KEY, spans, epoch=epoch)
            took = time.perf_counter() - started
        finally:
            await store.aclose()
        assert read is not None
        return [m.seq for m in read], took

    seqs, took = asyncio.run(timed_read())
    assert seqs == [first for first, _ in spans]
    assert took < 1.0, f"{SPANS} spans of one message took {took:.2f} s"
