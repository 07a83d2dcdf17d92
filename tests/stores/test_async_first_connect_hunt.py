"""An async store whose first connect failed is bound to no event loop.

The Redis and PostgreSQL async stores serve the loop they connected on. They used to bind to
the loop of their first call even when that call could not connect, so once the server was
back, every call from a later loop (the next ``asyncio.run``, say a retry after a failed
start) raised ``StoreUsageError`` about a loop the store never connected on.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
import redis

from contextwright.errors import StoreUnavailable, StoreUsageError
from contextwright.session import AsyncPostgresStore, AsyncRedisStore, AsyncStore, SessionKey

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
KEY = SessionKey(user_id="first-connect", session_id="s")


class Forwarder:
    """A port on 127.0.0.1 that refuses connections until ``start`` relays it to a server."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()  # nothing listens here until start()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []

    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for sock in self._sockets:
            sock.close()


def _forwarder(url: str) -> Iterator[Forwarder]:
    parts = urlsplit(url)
    forwarder = Forwarder((parts.hostname or "127.0.0.1", parts.port or 0))
    yield forwarder
    forwarder.stop()


@pytest.fixture
def redis_forwarder() -> Iterator[Forwarder]:
    yield from _forwarder(REDIS_URL)


@pytest.fixture
def postgres_forwarder() -> Iterator[Forwarder]:
    yield from _forwarder(POSTGRES_DSN)


def _count_after_a_failed_first_call(store: AsyncStore, forwarder: Forwarder) -> int:
    with pytest.raises(StoreUnavailable):
        asyncio.run(store.count(KEY))
    forwarder.start()

    async def second_loop() -> int:
        try:
            await store.append(KEY, [{"role": "user", "content": "back"}])
            return await store.count(KEY)
        finally:
            await store.aclose()

    return asyncio.run(second_loop())


def test_redis_store_serves_a_later_loop_after_a_failed_connect(
        redis_forwarder: Forwarder) -> None:
    prefix = f"cwtest-{uuid.uuid4().hex}"
    path = urlsplit(REDIS_URL).path
    store = AsyncRedisStore(f"redis://127.0.0.1:{redis_forwarder.port}{path}", prefix=prefix)
    try:
        assert _count_after_a_failed_first_call(store, redis_forwarder) == 1
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        for name in client.scan_iter(match=f"{prefix}:*"):
            client.delete(name)
        client.close()


def test_postgres_store_serves_a_later_loop_after_a_failed_connect(
        postgres_forwarder: Forwarder) -> None:
    schema = f"cwtest_{uuid.uuid4().hex}"
    parts = urlsplit(POSTGRES_DSN)
    user = f"{parts.username}@" if parts.username else ""
    dsn = f"postgresql://{user}127.0.0.1:{postgres_forwarder.port}{parts.path}"
    store = AsyncPostgresStore(dsn, schema=schema)
    try:
        assert _count_after_a_failed_first_call(store, postgres_forwarder) == 1
    finally:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_store_that_connected_still_refuses_another_loop() -> None:
    store = AsyncRedisStore(REDIS_URL, prefix=f"cwtest-{uuid.uuid4().hex}")

    async def count_then(close: bool) -> int:
        try:
            return await store.count(KEY)
        finally:
            if close:
                await store.aclose()

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(count_then(close=False)) == 0
        with pytest.raises(StoreUsageError):
            asyncio.run(count_then(close=False))
        loop.run_until_complete(count_then(close=True))
    finally:
        loop.close()
