"""What a SQLite write asks the database: a ``prepare`` makes one or two writes, so each read a
write transaction saves is saved on every call."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from contextwright.errors import ConflictError
from contextwright.session import SessionKey, SqliteStore, StateWrite

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
