"""``store``: each contextwright backend in a namespace of its own, for the session integrations.

Redis and PostgreSQL are the real local servers (``.ci/run`` starts them); an unreachable one
FAILS its tests unless ``CONTEXTWRIGHT_SKIP_SERVICES=1``, as in the store conformance suite.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright import MemoryStore, PostgresStore, RedisStore, SqliteStore, Store

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")


def _unreachable(name: str, exc: Exception) -> None:
    if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
        pytest.skip(f"{name} unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
    pytest.fail(f"{name} unreachable ({type(exc).__name__}: {exc})", pytrace=False)


def _redis() -> Iterator[Store]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except Exception as exc:
        _unreachable("Redis", exc)
    prefix = f"cwtest-integ-{uuid.uuid4().hex}"
    store = RedisStore(REDIS_URL, prefix=prefix)
    yield store
    store.close()
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()


def _postgres() -> Iterator[Store]:
    import psycopg

    try:
        admin: psycopg.Connection[Any] = psycopg.connect(POSTGRES_DSN, autocommit=True,
                                                         connect_timeout=3)
    except Exception as exc:
        _unreachable("PostgreSQL", exc)
    schema = f"cwtest_integ_{uuid.uuid4().hex}"
    store = PostgresStore(POSTGRES_DSN, schema=schema)
    yield store
    store.close()
    with admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=("memory", "sqlite", "redis", "postgres"))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "redis":
        yield from _redis()
    elif request.param == "postgres":
        yield from _postgres()
    else:
        made: Store = (MemoryStore() if request.param == "memory"
                       else SqliteStore(str(tmp_path / "sessions.db")))
        yield made
        made.close()
