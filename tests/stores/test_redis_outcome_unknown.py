"""A Redis write whose answer never comes: the error says it may land, and a retry stores once.

A small TCP proxy between the store and the real Redis freezes the connection: it holds the
store's bytes and forwards them only when thawed, so the write times out in the client and then
lands in Redis afterwards, as it does behind a stalled network or a paused server.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from contextwright.errors import OutcomeUnknown, StoreUnavailable
from contextwright.session import RedisStore, SessionKey

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
K = SessionKey(user_id="U001", session_id="S001")


class FreezingProxy:
    """Forwards TCP to Redis; while frozen, holds what clients send until thawed."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._running = threading.Event()
        self._running.set()
        self._thawed = threading.Event()
        self._thawed.set()
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self._thawed.clear()

    def thaw(self) -> None:
        self._thawed.set()

    def close(self) -> None:
        self._running.clear()
        self._thawed.set()
        for sock in self._sockets:
            sock.close()

    def _accept(self) -> None:
        while self._running.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, held: bool) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if held:
                self._thawed.wait()
            try:
                target.sendall(data)
            except OSError:
                return


@pytest.fixture
def proxy() -> Iterator[FreezingProxy]:
    parts = urlsplit(REDIS_URL)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 3).close()
    except OSError as exc:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip("Redis unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
        pytest.fail(f"Redis unreachable ({exc})", pytrace=False)
    running = FreezingProxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    yield running
    running.close()



def _wait_for_count(store: RedisStore, expected: int, seconds: float = 10.0) -> int:
    deadline = time.monotonic() + seconds
    while (count := store.count(K)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def test_a_write_that_times_out_says_it_may_land_and_a_retry_stores_once(
        proxy: FreezingProxy, prefix: str) -> None:
    frozen = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", prefix=prefix, socket_timeout=0.5)
    direct = RedisStore(REDIS_URL, prefix=prefix)
    frozen.append(K, [{"role": "user", "content": "hello"}])
    proxy.freeze()
    with pytest.raises(OutcomeUnknown) as caught:
        frozen.append_if(K, [{"role": "assistant", "content": "answer"}],
                         idempotency_key="turn-1")
    assert isinstance(caught.value, StoreUnavailable)  # callers catching that still catch it
    assert "may still be applied" in str(caught.value)
    assert direct.count(K) == 1  # not yet ...
    proxy.thaw()
    assert _wait_for_count(direct, 2) == 2  # ... but it lands later, and only once
    time.sleep(0.3)  # a client that re-sent the write would show a third message by now
    retried = frozen.append_if(K, [{"role": "assistant", "content": "answer"}],
                               idempotency_key="turn-1")
    assert (retried.seqs, retried.replayed) == ([2], True)
    assert [m.message["content"] for m in direct.read(K)] == ["hello", "answer"]
    frozen.close()
    direct.close()


def test_a_read_that_times_out_is_plainly_unavailable(proxy: FreezingProxy, prefix: str) -> None:
    frozen = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", prefix=prefix, socket_timeout=0.5)
    proxy.freeze()
    with pytest.raises(StoreUnavailable) as caught:
        frozen.read(K)
    assert not isinstance(caught.value, OutcomeUnknown)
    proxy.thaw()
    frozen.close()
