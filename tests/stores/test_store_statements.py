"""What a write asks the database (SQLite, PostgreSQL): a ``prepare`` makes one or two writes,
so each statement a write transaction saves is saved on every call (a round trip, on a
server)."""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright.errors import ConflictError, StoreUnavailable
from contextwright.session import PostgresStore, SessionKey, SqliteStore, StateWrite
from contextwright.session.postgres_common import PostgresLayout, Sql

K = SessionKey(user_id="U001", session_id="S001")


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements of every SQLite connection opened from now on."""
    statements: list[str] = []
    connect = sqlite3.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", tracing)
    return statements


def _reads(statements: list[str]) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("SELECT")]


def test_a_write_reads_the_session_and_its_state_version_at_once(
        tmp_path: Path, traced: list[str]) -> None:
    store = SqliteStore(tmp_path / "sessions.db")
    store.append(K, [{"role": "user", "content": "hello"}])
    version = store.put_state(K, {"mode": "chat"}, expected_version=None)
    traced.clear()
    written = store.append_if(K, [{"role": "assistant", "content": "hi"}],
                              state=StateWrite(data={"mode": "chat", "n": 1},
                                               expected_version=version))
    assert len(_reads(traced)) == 1
    assert written.state_version == version + 1
    with pytest.raises(ConflictError):  # the version read so still guards the write
        store.append_if(K, [], state=StateWrite(data={"n": 2}, expected_version=version))
    store.close()


def test_a_state_without_its_session_row_still_guards_a_write(
        tmp_path: Path, traced: list[str]) -> None:
    path = tmp_path / "sessions.db"
    store = SqliteStore(path)
    version = store.put_state(K, {"mode": "chat"}, expected_version=None)
    with sqlite3.connect(path) as db:  # as a database written by hand, or long ago, may be
        db.execute("DELETE FROM sessions")
    with pytest.raises(ConflictError):
        store.append_if(K, [], state=StateWrite(data={"n": 1}, expected_version=None))
    written = store.append_if(K, [], state=StateWrite(data={"n": 1}, expected_version=version))
    assert written.state_version == version + 1
    store.close()


POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def postgres() -> Iterator[PostgresStore]:
    schema = f"cwtest_{uuid.uuid4().hex[:12]}"
    try:
        store = PostgresStore(POSTGRES_DSN, schema=schema)
    except StoreUnavailable:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip("PostgreSQL is not running and CONTEXTWRIGHT_SKIP_SERVICES=1")
        raise
    yield store
    store.close()
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_postgres_write_takes_the_state_version_and_epoch_with_the_lock(
        postgres: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    statements: list[str] = []
    append_if = PostgresLayout.append_if

    def counted(self: PostgresLayout, *args: Any) -> Generator[Sql, Any, Any]:
        flow = append_if(self, *args)
        result = None
        while True:
            try:
                statement = flow.send(result)
            except StopIteration as stop:
                return stop.value
            statements.append(statement.text)
            result = yield statement

    postgres.append(K, [{"role": "user", "content": "hello"}])
    version = postgres.put_state(K, {"mode": "chat"}, expected_version=None)
    monkeypatch.setattr(PostgresLayout, "append_if", counted)
    written = postgres.append_if(K, [{"role": "assistant", "content": "hi"}],
                                 state=StateWrite(data={"n": 1}, expected_version=version))
    # Lock the row, take it (with the state's version and the epoch), reserve the seqs, insert
    # the message, write the state.
    assert len(statements) == 5
    assert written.state_version == version + 1 and written.epoch == postgres.epoch(K)
    with pytest.raises(ConflictError):
        postgres.append_if(K, [], state=StateWrite(data={"n": 2}, expected_version=version))
    assert [m.message["content"] for m in postgres.read(K)] == ["hello", "hi"]
