"""A process forked from one that used a SQLite or PostgreSQL store opens its own connections.

The pool's idle connections were inherited by the child (``multiprocessing`` with fork, a
pre-forking server that made the store before forking): parent and child then sent their
statements over one socket and read each other's answers, and a child that closed the store
(or just exited and garbage-collected it) ended the parent's database session.
"""

from __future__ import annotations

import multiprocessing
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from contextwright.session import PostgresStore, SessionKey, SqliteStore

POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
KEY = SessionKey(user_id="fork", session_id="parent")
fork = multiprocessing.get_context("fork")


@pytest.fixture
def postgres_store() -> Iterator[PostgresStore]:
    schema = f"cwtest_{uuid.uuid4().hex}"
    store = PostgresStore(POSTGRES_DSN, schema=schema)
    yield store
    store.close()
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _backend_pid(store: PostgresStore) -> int:
    with store._pool.lease() as db:
        return int(db.info.backend_pid)


def _child_uses_and_closes(store: PostgresStore, answers: Any) -> None:
    store.append(SessionKey(user_id="fork", session_id="child"),
                 [{"role": "user", "content": "c"}])
    answers.put(_backend_pid(store))
    store.close()  # closes the child's connections only


def test_a_forked_child_never_uses_or_closes_its_parents_postgres_connection(
        postgres_store: PostgresStore) -> None:
    postgres_store.append(KEY, [{"role": "user", "content": "p"}])
    parents = _backend_pid(postgres_store)
    answers = fork.SimpleQueue()
    child = fork.Process(target=_child_uses_and_closes, args=(postgres_store, answers))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert answers.get() != parents
    assert _backend_pid(postgres_store) == parents, "the parent's connection was ended"
    assert [m.message["content"] for m in postgres_store.read(KEY)] == ["p"]


def _child_counts(store: SqliteStore, answers: Any) -> None:
    with store._pool.lease() as db:
        answers.put(id(db))
    answers.put(store.count(KEY))
    store.close()


def test_a_forked_child_opens_its_own_sqlite_connection(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    try:
        store.append(KEY, [{"role": "user", "content": "p"}])
        with store._pool.lease() as db:
            parents = id(db)  # the child's copy of this object has the same id
        answers = fork.SimpleQueue()
        child = fork.Process(target=_child_counts, args=(store, answers))
        child.start()
        child.join(30)
        assert child.exitcode == 0
        assert answers.get() != parents
        assert answers.get() == 1
        assert store.count(KEY) == 1
    finally:
        store.close()
