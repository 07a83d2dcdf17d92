"""A tenant over its rate is refused at once, even while every build thread is busy.

The rate check used to run on the thread pool that builds and store calls share: with every
thread held by slow calls, a request that was to be refused with a 429 waited for one of them
to finish first.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS

from contextwright.server import BackgroundServer, Limits, ServerConfig, create_app
from contextwright.server.ratelimit import LocalRateLimiter, RateLimiter, RedisRateLimiter
from contextwright.session.memory import MemoryStore
from contextwright.session.store import SessionKey, StoredMessage

THREADS = 2
AUTH = {"Authorization": f"Bearer {KEYS['acme']}"}
NO_HANG = 30.0
"""Seconds after which a call that should have been answered fails the test (never reached
when the service behaves)."""


class _HeldStore(MemoryStore):
    """A store whose reads wait until the test lets them go, counting the reads held."""

    def __init__(self, holding: int) -> None:
        super().__init__()
        self.release = threading.Event()
        self.all_held = threading.Event()
        self._holding = holding
        self._held = 0
        self._count_lock = threading.Lock()

    def read(self, key: SessionKey, *, after: int = 0,
             last: int | None = None) -> list[StoredMessage]:
        with self._count_lock:
            self._held += 1
            if self._held >= self._holding:
                self.all_held.set()
        if not self.release.wait(2 * NO_HANG):
            raise AssertionError("the test never released the held read")
        return super().read(key, after=after, last=last)


@pytest.fixture(params=["local", "redis"])
def limiter(request: pytest.FixtureRequest) -> Iterator[RateLimiter]:
    """The in-process limiter (checked on the event loop) and Redis's (on threads of its own)."""
    made: RateLimiter = (LocalRateLimiter() if request.param == "local"
                         else RedisRateLimiter.from_url(request.getfixturevalue("redis_url")))
    yield made
    made.close()


def test_an_over_limit_call_is_refused_while_every_build_thread_is_busy(
        keys_file: Path, limiter: RateLimiter) -> None:
    store = _HeldStore(holding=THREADS)
    config = ServerConfig(store="memory://", keys=str(keys_file), threads=THREADS,
                          keys_check_every=0.0,
                          limits=Limits(requests_per_minute=THREADS, burst=THREADS))
    with BackgroundServer(create_app(config, store=store, limiter=limiter)) as server, \
            httpx.Client(base_url=server.url, headers=AUTH, timeout=NO_HANG) as http, \
            ThreadPoolExecutor(max_workers=THREADS) as callers:
        held: list[Future[httpx.Response]] = [
            callers.submit(http.get, "/v1/sessions/u/s") for _ in range(THREADS)]
        try:
            assert store.all_held.wait(NO_HANG), "the slow reads never started"
            refused = http.get("/v1/sessions/u/s")
            # Answered while both threads are still held: the check did not wait for them.
            assert not any(call.done() for call in held)
            assert refused.status_code == 429, refused.text
            assert refused.json()["type"] == "urn:contextwright:problem:rate-limited"
            assert int(refused.headers["Retry-After"]) >= 1
        finally:
            store.release.set()
        assert [call.result(NO_HANG).status_code for call in held] == [404] * THREADS


def test_readiness_is_answered_while_every_build_thread_is_busy(keys_file: Path) -> None:
    """A busy worker is still ready: its store answers, only its build threads are taken."""
    store = _HeldStore(holding=THREADS)
    config = ServerConfig(store="memory://", keys=str(keys_file), threads=THREADS,
                          keys_check_every=0.0)
    with BackgroundServer(create_app(config, store=store)) as server, \
            httpx.Client(base_url=server.url, headers=AUTH, timeout=NO_HANG) as http, \
            ThreadPoolExecutor(max_workers=THREADS) as callers:
        held = [callers.submit(http.get, "/v1/sessions/u/s") for _ in range(THREADS)]
        try:
            assert store.all_held.wait(NO_HANG), "the slow reads never started"
            ready = http.get("/readyz")
            assert not any(call.done() for call in held)
            assert ready.status_code == 200, ready.text
        finally:
            store.release.set()
        assert [call.result(NO_HANG).status_code for call in held] == [404] * THREADS
