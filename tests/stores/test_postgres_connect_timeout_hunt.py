"""A ``connect_timeout`` written in a PostgreSQL DSN is the one the stores use.

psycopg's keyword arguments override the DSN's settings, so the stores' own default (10 s)
used to replace it: a server that accepts connections but never answers (a hung host, a
half-open load balancer) held every call 10 s, whatever the URL said.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from contextwright.errors import StoreUnavailable
from contextwright.session import AsyncPostgresStore, PostgresStore, SessionKey


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for connection in accepted:
        connection.close()


def test_the_sync_store_honours_the_dsns_connect_timeout(silent_server: int) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        PostgresStore(f"postgresql://postgres@127.0.0.1:{silent_server}/test?connect_timeout=1")
    assert time.monotonic() - started < 5


def test_the_async_store_honours_the_dsns_connect_timeout(silent_server: int) -> None:
    store = AsyncPostgresStore(
        f"postgresql://postgres@127.0.0.1:{silent_server}/test?connect_timeout=1")

    async def first_call() -> None:
        try:
            await store.count(SessionKey(user_id="u", session_id="s"))
        finally:
            await store.aclose()

    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        asyncio.run(first_call())
    assert time.monotonic() - started < 5
