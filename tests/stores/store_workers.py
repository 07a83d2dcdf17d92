"""Helpers of the store tests, including the code that runs in their child processes.

Kept in its own module, importable by name, because ``multiprocessing`` children re-import the
function they run; a store is described by a picklable ``StoreSpec`` and rebuilt in the child.
The test modules import ``Backend`` and ``FakeClock`` from here rather than from ``conftest``
(several ``conftest`` modules share that name in one test run).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

from contextwright.session import (
    AsyncMemoryStore,
    AsyncPostgresStore,
    AsyncRedisStore,
    AsyncSqliteStore,
    AsyncStore,
    MemoryStore,
    PostgresStore,
    RedisStore,
    SessionKey,
    SqliteStore,
    Store,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreSpec:
    """How to build one backend's store in this or another process."""

    kind: str
    """memory, sqlite, redis or postgres."""
    target: str = ""
    """File path, Redis URL or PostgreSQL DSN."""
    options: dict[str, Any] = field(default_factory=dict)
    """Constructor keywords that isolate the namespace (prefix, schema)."""
    driver: str = "sync"
    """sync, or async: the backend's ``AsyncStore``, driven through ``BlockingStore``."""


def make_store(spec: StoreSpec, **extra: Any) -> Store:
    """Build the store ``spec`` describes; ``extra`` adds ttl_seconds or clock."""
    options = {**spec.options, **extra}
    if spec.driver == "async":
        return BlockingStore(make_async_store(spec, **extra))
    if spec.kind == "memory":
        return MemoryStore(**options)
    if spec.kind == "sqlite":
        return SqliteStore(spec.target, **options)
    if spec.kind == "redis":
        return RedisStore(spec.target, **options)
    if spec.kind == "postgres":
        return PostgresStore(spec.target, **options)
    raise ValueError(f"unknown store kind {spec.kind}")


def make_async_store(spec: StoreSpec, **extra: Any) -> AsyncStore:
    """Build the async store of ``spec``'s backend; ``extra`` adds ttl_seconds or clock."""
    options = {**spec.options, **extra}
    if spec.kind == "memory":
        return AsyncMemoryStore(**options)
    if spec.kind == "sqlite":
        return AsyncSqliteStore(spec.target, **options)
    if spec.kind == "redis":
        return AsyncRedisStore(spec.target, **options)
    if spec.kind == "postgres":
        return AsyncPostgresStore(spec.target, **options)
    raise ValueError(f"unknown store kind {spec.kind}")


class BlockingStore:
    """The ``Store`` protocol over an ``AsyncStore``: each call awaited on a private loop.

    The loop runs on a thread of its own, and calls from many threads run concurrently on it
    as coroutines, so the conformance suite, written against ``Store``, runs unchanged over
    every async backend, its thread races included. The async store is made by the caller
    (a bad argument fails there, as with the sync constructors), then opened on the loop
    (``async with``'s ``__aenter__``: connected, schema created), as a sync store is when made.
    """

    def __init__(self, inner: AsyncStore) -> None:
        self.inner = inner
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.run(inner.__aenter__())  # type: ignore[attr-defined]

    def run(self, call: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(call, self._loop).result(timeout=300)

    def __getattr__(self, name: str) -> Any:
        if isinstance(self.inner, AsyncMemoryStore):
            return getattr(self.inner.store, name)  # the corruption tests reach into memory
        raise AttributeError(name)

    def close(self) -> None:
        try:
            self.run(self.inner.aclose())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()


def _blocking(name: str) -> Callable[..., Any]:
    def call(self: BlockingStore, *args: Any, **kwargs: Any) -> Any:
        return self.run(getattr(self.inner, name)(*args, **kwargs))
    call.__name__ = name
    return call


STORE_METHODS = ("append", "append_if", "read", "epoch", "find_write", "count", "get_state",
                 "put_state", "list_sessions", "erase_session", "erase_user", "purge_expired")
for _name in STORE_METHODS:
    setattr(BlockingStore, _name, _blocking(_name))


def append_worker(spec: StoreSpec, key: SessionKey, writer: int, count: int,
                  barrier: Barrier) -> None:
    """Append ``count`` single messages tagged with this writer, after every writer is ready."""
    store = make_store(spec)
    barrier.wait(timeout=120)
    for index in range(count):
        store.append(key, [{"role": "user", "content": f"w{writer}-{index}",
                            "writer": writer, "index": index}])
    store.close()


def crash_child(path: str, key: SessionKey, run: int, conn: Connection) -> None:
    """Append small batches forever, sending each acknowledged batch; the parent kills us."""
    conn.send("ready")  # the parent's random delay starts now, so the kill lands in our work
    store = SqliteStore(path)
    batch = 0
    while True:
        size = 1 + (batch + run) % 3
        messages = [{"role": "user", "content": f"r{run}-b{batch}-{i}", "run": run,
                     "batch": batch, "size": size, "i": i} for i in range(size)]
        seqs = store.append(key, messages)
        # One small write per acknowledgement: a pipe write this size is atomic, so the parent
        # never sees half an acknowledgement however the SIGKILL falls.
        conn.send((run, batch, seqs))
        batch += 1


class FakeClock:
    """A clock the test moves by hand (the stores take ``clock=``)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Backend:
    """One store backend under test, with what the suite needs to drive it."""

    name: str
    spec: StoreSpec
    native_ttl: bool = False
    """Expiry happens in the server (Redis) on real time, not on the injected clock."""
    ttl: float = 60.0
    """The TTL the expiry tests use: long enough that a slow machine cannot expire it early."""
    opened: list[Store] = field(default_factory=list)

    def make(self, **extra: Any) -> Store:
        store = make_store(self.spec, **extra)
        self.opened.append(store)
        return store

    def elapse(self, clock: FakeClock, seconds: float) -> None:
        """Let ``seconds`` pass for the store: move the fake clock, and sleep if Redis expires."""
        clock.advance(seconds)
        if self.native_ttl:
            time.sleep(seconds)


def chained_append_worker(spec: StoreSpec, key: SessionKey, writer: int, count: int,
                          barrier: Barrier) -> None:
    """Append ``count`` messages, each only after the seq this writer just read (retry if moved)."""
    from contextwright.errors import ConflictError

    store = make_store(spec)
    barrier.wait(timeout=120)
    for index in range(count):
        while True:
            last = store.count(key)
            try:
                store.append_if(key, [{"role": "user", "content": f"w{writer}-{index}",
                                       "after": last}], last_seq=last)
                break
            except ConflictError:
                continue
    store.close()


def racing_manager_worker(spec: StoreSpec, role: str, sessions: int, barrier: Barrier) -> None:
    """One side of the record-vs-prepare race, session by session, in step with the other side.

    ``results`` records the tool result answering call ``c1``; ``user`` prepares a new user
    message. A result refused because the user message came first is the correct outcome.
    """
    from contextwright.errors import InvalidInputError
    from contextwright.manager import ContextManager

    store = make_store(spec)
    manager = ContextManager(store, background=False, tokenizer="estimate")
    for index in range(sessions):
        barrier.wait(timeout=120)
        if role == "results":
            try:
                manager.record("racer", f"s{index}",
                               tool_results=[{"tool_call_id": "c1", "content": "42 in stock"}])
            except InvalidInputError:
                pass
        else:
            manager.prepare("racer", f"s{index}", "and what does the supplier say?")
    manager.close()
    store.close()
