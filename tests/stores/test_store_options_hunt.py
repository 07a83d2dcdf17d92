"""A store's constructor refuses a bad option with ``InvalidInputError`` naming it.

These used to surface as a bare ``TypeError`` / ``ValueError`` from deep inside a driver
(``int()`` of a busy timeout, a ``socket.settimeout`` at the first connect), or as a wrong
diagnosis ("the redis URL is malformed" for ``max_connections=-1``), or not at all
(``busy_timeout_ms=-1``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextwright.errors import InvalidInputError
from contextwright.session import (
    AsyncPostgresStore,
    AsyncRedisStore,
    AsyncSqliteStore,
    PostgresStore,
    RedisStore,
    SqliteStore,
)

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")


def _sqlite(tmp: Path, **options: Any) -> object:
    return SqliteStore(tmp / "s.db", **options)


def _async_sqlite(tmp: Path, **options: Any) -> object:
    return AsyncSqliteStore(tmp / "s.db", **options)


CASES: list[tuple[str, Callable[[Path], object]]] = [
    ("busy_timeout_ms", lambda tmp: _sqlite(tmp, busy_timeout_ms=None)),
    ("busy_timeout_ms", lambda tmp: _sqlite(tmp, busy_timeout_ms="30s")),
    ("busy_timeout_ms", lambda tmp: _sqlite(tmp, busy_timeout_ms=-1)),
    ("busy_timeout_ms", lambda tmp: _async_sqlite(tmp, busy_timeout_ms="30s")),
    ("path", lambda tmp: SqliteStore(None)),  # type: ignore[arg-type]
    ("socket_timeout", lambda tmp: RedisStore(REDIS_URL, prefix="p", socket_timeout=-1)),
    ("socket_timeout", lambda tmp: AsyncRedisStore(REDIS_URL, prefix="p", socket_timeout=0)),
    ("url", lambda tmp: RedisStore(None, prefix="p")),  # type: ignore[arg-type]
    ("max_connections", lambda tmp: AsyncRedisStore(REDIS_URL, prefix="p", max_connections=0)),
    ("max_connections", lambda tmp: AsyncRedisStore(REDIS_URL, prefix="p",
                                                    max_connections=-1)),
    ("dsn", lambda tmp: PostgresStore(None)),  # type: ignore[arg-type]
    ("max_connections", lambda tmp: AsyncPostgresStore(
        POSTGRES_DSN, max_connections="5")),  # type: ignore[arg-type]
    ("connect_timeout", lambda tmp: AsyncPostgresStore(
        POSTGRES_DSN, connect_timeout="5")),  # type: ignore[arg-type]
    ("connect_timeout", lambda tmp: AsyncPostgresStore(
        POSTGRES_DSN, connect_timeout=None)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("option", "make"), CASES)
def test_a_bad_option_is_refused_by_name(option: str, make: Callable[[Path], object],
                                          tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=option):
        store = make(tmp_path)
        if isinstance(store, AsyncSqliteStore):  # opened on its thread: closed again here
            asyncio.run(store.aclose())


def test_good_options_are_still_taken(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "s.db", busy_timeout_ms=0).close()
    RedisStore(REDIS_URL, prefix="p", socket_timeout=2).close()
    RedisStore(REDIS_URL, prefix="p", socket_timeout=None).close()
    AsyncRedisStore(REDIS_URL, prefix="p", max_connections=1)
    AsyncPostgresStore(POSTGRES_DSN, max_connections=1, connect_timeout=1)
