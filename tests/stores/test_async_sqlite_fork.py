"""An ``AsyncSqliteStore`` made and used before a fork works in the forked child.

Its calls run on a thread of the store's own, and a forked child has none of its parent's
threads: every call in the child (``aclose`` too) waited for ever on a thread that was not
there. A pre-forking server (or ``multiprocessing`` with fork) that made the store first hung.
A child forked while the store's thread was inside SQLite could hang as well (SQLite's own
mutexes, held by a thread the child does not have): a fork waits for the call under way.
Each child runs under a timeout, so a hang fails the test instead of stalling the run.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from contextwright.session import AsyncSqliteStore, SessionKey

PARENT = SessionKey(user_id="fork", session_id="parent")
CHILD = SessionKey(user_id="fork", session_id="child")
fork = multiprocessing.get_context("fork")


def _child_uses_and_closes(store: AsyncSqliteStore, answers: Any) -> None:
    async def use() -> tuple[int, list[int]]:
        counted = await store.count(PARENT)
        seqs = await store.append(CHILD, [{"role": "user", "content": "from the child"}])
        await store.aclose()
        return counted, seqs

    answers.put(asyncio.run(use()))


def _run_child(store: AsyncSqliteStore) -> Any:
    answers = fork.SimpleQueue()
    child = fork.Process(target=_child_uses_and_closes, args=(store, answers))
    child.start()
    child.join(20)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung on its first store call")
    assert child.exitcode == 0
    return answers.get()


def test_a_forked_child_uses_the_store_and_the_parent_keeps_its_own(tmp_path: Path) -> None:
    store = AsyncSqliteStore(tmp_path / "s.db")
    try:
        assert asyncio.run(store.append(PARENT, [{"role": "user", "content": "p"}])) == [1]
        assert _run_child(store) == (1, [1])
        # The child closed only its own connection: the parent's store still works.
        assert asyncio.run(store.count(CHILD)) == 1
        assert asyncio.run(store.append(PARENT, [{"role": "user", "content": "q"}])) == [2]
        assert _run_child(store) == (2, [2])  # and a second child, forked later, too
    finally:
        asyncio.run(store.aclose())


def test_a_fork_waits_for_the_call_the_stores_thread_is_making(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = AsyncSqliteStore(path)
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        asyncio.run(store.count(PARENT))  # the file is open and has its tables
        blocker.execute("BEGIN IMMEDIATE")  # the store's append waits for this write lock
        writer = threading.Thread(target=lambda: asyncio.run(
            store.append(PARENT, [{"role": "user", "content": "in flight"}])))
        writer.start()
        time.sleep(0.3)
        threading.Timer(0.7, blocker.commit).start()
        forked = time.monotonic()
        # Forked while the append waits: the fork waits for it, so the child sees it stored.
        assert _run_child(store) == (1, [1])
        assert time.monotonic() - forked >= 0.5
        writer.join(10)
        assert asyncio.run(store.count(PARENT)) == 1
    finally:
        asyncio.run(store.aclose())
        blocker.close()


def test_many_children_forked_as_their_stores_open_never_hang(tmp_path: Path) -> None:
    for index in range(8):
        store = AsyncSqliteStore(tmp_path / f"s{index}.db")  # opening, as it forks
        try:
            assert _run_child(store) == (0, [1])
        finally:
            asyncio.run(store.aclose())
