"""Store URLs reach the driver as written, less the ``prefix`` / ``schema`` option.

libpq reads ``postgresql:///db`` (no host: the local socket, or ``?host=…``) only with its
``//``, and keeps ``+`` in a query value as a plus sign, so a URL rebuilt by ``urllib`` (which
drops the ``//`` and writes ``%20`` as ``+``) connects somewhere else or not at all.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from contextwright.errors import InvalidInputError
from contextwright.session import SessionKey, open_async_store, open_store
from contextwright.session.store import parse_store_url

POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
KEY = SessionKey(user_id="url-user", session_id="url-session")



@pytest.mark.parametrize(("url", "target", "option"), [
    ("postgresql:///test", "postgresql:///test", "contextwright"),
    ("postgresql:///test?host=/var/run/postgresql&schema=s1",
     "postgresql:///test?host=/var/run/postgresql", "s1"),
    ("postgresql://h/db?options=-c%20statement_timeout%3D5000&schema=s2",
     "postgresql://h/db?options=-c%20statement_timeout%3D5000", "s2"),
    ("postgresql://u:p%40ss%23@h/db?schema=s3&sslmode=disable",
     "postgresql://u:p%40ss%23@h/db?sslmode=disable", "s3"),
    ("unix:///tmp/redis.sock?db=2&prefix=p", "unix:///tmp/redis.sock?db=2", "p"),
    ("redis://h:6379/0?prefix=a%20b", "redis://h:6379/0", "a b"),
])
def test_the_url_reaches_the_driver_as_written(url: str, target: str, option: str) -> None:
    assert parse_store_url(url)[1:] == (target, option)


def test_an_option_given_twice_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="prefix more than once"):
        parse_store_url("redis://h/0?prefix=a&db=1&prefix=b")


def test_a_postgres_url_without_a_host_opens_the_store(schema: str) -> None:
    url = f"postgresql:///test?host=127.0.0.1&user=postgres&schema={schema}"
    store = open_store(url)
    try:
        assert store.append(KEY, [{"role": "user", "content": "hi"}]) == [1]
    finally:
        store.close()


def test_postgres_options_with_spaces_reach_the_server(schema: str) -> None:
    url = (f"{POSTGRES_DSN}?options=-c%20statement_timeout%3D4321&schema={schema}")
    store = open_store(url)
    try:
        store.append(KEY, [{"role": "user", "content": "hi"}])
        assert [m.message["content"] for m in store.read(KEY)] == ["hi"]
    finally:
        store.close()


def test_the_async_store_reads_the_same_url(schema: str) -> None:
    store = open_async_store(
        f"postgresql:///test?host=127.0.0.1&user=postgres"
        f"&options=-c%20statement_timeout%3D4321&schema={schema}")

    async def append_once() -> list[int]:
        try:
            return await store.append(KEY, [{"role": "user", "content": "hi"}])
        finally:
            await store.aclose()

    assert asyncio.run(append_once()) == [1]


@pytest.mark.parametrize("url", ["sqlite:///agent.db?timeout=30", "sqlite:///agent.db#x",
                                 "memory://?ttl=5", "memory://shared"])
def test_options_a_url_cannot_carry_are_refused_not_read_as_a_path(url: str) -> None:
    """``sqlite:///agent.db?timeout=30`` (an SQLAlchemy URL) opened a second, empty database
    in a file named ``agent.db?timeout=30``; ``memory://…`` dropped whatever followed."""
    with pytest.raises(InvalidInputError, match="option"):
        parse_store_url(url)


def test_plain_sqlite_and_memory_urls_still_open(tmp_path: Path) -> None:
    assert parse_store_url(f"sqlite:///{tmp_path}/agent.db") == (
        "sqlite", f"{tmp_path}/agent.db", "")
    assert parse_store_url("memory://") == ("memory", "", "")
