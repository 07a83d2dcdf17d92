"""The sync SQL stores keep no connection for a thread that has ended.

A service that runs each call on a thread of its own (a thread per request, a timer, an executor
that recycles its threads) must not leave one connection behind per thread: PostgreSQL would
refuse clients ("too many clients already") long before the store is closed. PostgreSQL's
connections are counted by the server (``pg_stat_activity``, by a unique ``application_name``);
SQLite's by the store, and by this process's file descriptors on the database file where that
count is exact (SQLite defers closing a file while another connection of the process holds a
lock on it, and reuses it for the next connection).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_workers import Backend

from contextwright.errors import InvalidInputError, StoreError, StoreUnavailable
from contextwright.session import PostgresStore, SessionKey, SqliteStore, Store

K = SessionKey(user_id="U001", session_id="S001")
THREADS = 40


def _settled(count: Callable[[], int], within: Callable[[int], bool]) -> int:
    """``count()`` once it is ``within`` bounds, or after 10 s: a closed connection's server
    process may still be listed for a moment after the client closed it."""
    deadline = time.monotonic() + 10
    value = count()
    while not within(value) and time.monotonic() < deadline:
        time.sleep(0.05)
        value = count()
    return value


def _postgres_connections(dsn: str, application: str) -> Callable[[], int]:
    import psycopg

    def count() -> int:
        with psycopg.connect(dsn, autocommit=True) as admin:
            row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name"
                                " = %s", (application,)).fetchone()
        assert row is not None
        return int(row[0])

    return count


def _open_files(path: str) -> int:
    """File descriptors of this process open on ``path`` (Linux; -1 elsewhere)."""
    if not Path("/proc/self/fd").is_dir():
        return -1
    target, opened = os.path.realpath(path), 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            opened += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:  # closed since it was listed
            continue
    return opened


def _named(dsn: str, application: str) -> str:
    """``dsn`` whose connections show as ``application`` in ``pg_stat_activity``."""
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={application}"


def _store_and_counter(backend: Backend, **options: Any) -> tuple[Store, Callable[[], int]]:
    """A sync SQL store of ``backend`` and a count of its open connections, taken outside it."""
    spec = backend.spec
    if spec.kind == "postgres":
        application = f"cwtest-{uuid.uuid4().hex[:16]}"
        store: Store = PostgresStore(_named(spec.target, application), **spec.options, **options)
        counter = _postgres_connections(spec.target, application)
    elif spec.kind == "sqlite":
        sqlite = SqliteStore(spec.target, **spec.options, **options)
        store, counter = sqlite, lambda: sqlite._pool.open_connections
    else:
        pytest.skip(f"the {spec.kind} store keeps no SQL connection per caller")
    backend.opened.append(store)
    return store, counter


def _on_threads(work: Callable[[int], None], count: int, *, at_once: bool) -> None:
    """``work(i)`` on ``count`` threads that all end: one after another, or all at once."""
    errors: list[BaseException] = []
    start = threading.Barrier(count if at_once else 1)

    def run(index: int) -> None:
        try:
            start.wait(timeout=60)
            work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
        if not at_once:
            thread.join()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_threads_that_ended_one_after_another_leave_one_connection(backend: Backend) -> None:
    store, open_connections = _store_and_counter(backend)
    _on_threads(lambda i: store.append(K, [{"role": "user", "content": f"m{i}"}]), THREADS,
                at_once=False)
    if backend.spec.kind == "sqlite":  # the files the process holds, counted by the OS
        assert _open_files(backend.spec.target) in (1, -1)
    assert _settled(open_connections, lambda n: n == 1) == 1
    assert store.count(K) == THREADS and open_connections() == 1


def test_threads_that_ran_at_once_leave_at_most_the_idle_connections(backend: Backend) -> None:
    store, open_connections = _store_and_counter(backend, max_idle_connections=3)

    def write_and_read(index: int) -> None:
        store.append(K, [{"role": "user", "content": f"m{index}"}])
        assert store.read(K)

    _on_threads(write_and_read, 12, at_once=True)
    assert 1 <= _settled(open_connections, lambda n: n <= 3) <= 3
    assert [m.seq for m in store.read(K)] == list(range(1, 13))


def test_a_closed_store_leaves_no_connection_open(backend: Backend) -> None:
    store, open_connections = _store_and_counter(backend)
    _on_threads(lambda i: store.append(K, [{"role": "user", "content": f"m{i}"}]), 4,
                at_once=True)
    store.close()
    assert _settled(open_connections, lambda n: n == 0) == 0
    if backend.spec.kind == "sqlite":
        assert _open_files(backend.spec.target) in (0, -1)
    with pytest.raises(StoreError, match="closed"):
        store.count(K)


def test_max_idle_connections_must_be_a_positive_integer(backend: Backend) -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidInputError, match="max_idle_connections"):
            _store_and_counter(backend, max_idle_connections=bad)


def test_a_connection_the_server_dropped_is_not_lent_again(backend: Backend) -> None:
    if backend.spec.kind != "postgres":
        pytest.skip("drops a connection from the PostgreSQL server's side")
    import psycopg

    application = f"cwtest-{uuid.uuid4().hex[:16]}"
    store = PostgresStore(_named(backend.spec.target, application), **backend.spec.options)
    backend.opened.append(store)
    store.append(K, [{"role": "user", "content": "before"}])
    with psycopg.connect(backend.spec.target, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                      " WHERE application_name = %s", (application,))
    # A dropped connection that has its farewell from the server is replaced before it is
    # lent; one the call reaches first fails that call, as any call on a lost link.
    with contextlib.suppress(StoreUnavailable):
        store.count(K)
    assert store.count(K) == 1  # the next one gets a fresh connection
    open_connections = _postgres_connections(backend.spec.target, application)
    assert _settled(open_connections, lambda n: n == 1) == 1
