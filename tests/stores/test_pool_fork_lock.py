"""A process forked while another thread held a sync store's pool lock can use the store.

A fork copies a held lock as held, and the thread that would release it does not exist in the
child: the child's first call waited for ever. Each child runs under a timeout, so a hang fails
the test instead of stalling the run.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from conftest import POSTGRES_DSN
from contextwright.session import PostgresStore, SessionKey, SqliteStore, Store

KEY = SessionKey(user_id="fork", session_id="lock")
fork = multiprocessing.get_context("fork")


def _child_counts(store: Store, answers: Any) -> None:
    answers.put(store.count(KEY))


def _forked_with_the_lock_held(store: Store) -> int:
    lock = store._pool._lock  # type: ignore[attr-defined]
    answers = fork.SimpleQueue()
    child = fork.Process(target=_child_counts, args=(store, answers))
    with lock:  # as a request thread of the parent would be, at the moment of the fork
        child.start()
    child.join(20)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung on its first store call")
    assert child.exitcode == 0
    return int(answers.get())


def test_sqlite(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    try:
        store.append(KEY, [{"role": "user", "content": "hi"}])
        assert _forked_with_the_lock_held(store) == 1
        assert store.count(KEY) == 1  # the parent's pool is as it was
    finally:
        store.close()


def test_postgres(schema: str) -> None:
    store = PostgresStore(POSTGRES_DSN, schema=schema)
    try:
        store.append(KEY, [{"role": "user", "content": "hi"}])
        assert _forked_with_the_lock_held(store) == 1
        assert store.count(KEY) == 1
    finally:
        store.close()
