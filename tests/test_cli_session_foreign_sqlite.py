"""``contextwright session`` refuses a SQLite file that is not a session store, and leaves it
as it was.

Opening a store creates its tables: ``--store sqlite:///app.db`` (another program's database,
or an empty file) had them added to it and showed an empty list, as a missing file would have
without the check these commands make for that.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.session import SqliteStore
from contextwright.session.store import SessionKey

COMMANDS = [["list"], ["show", "--user", "U", "--session", "S"],
            ["export", "--user", "U", "--session", "S"], ["erase", "--user", "U", "--yes"]]


def _tables(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as db:
        return sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master"))


def _invoke(path: Path, command: list[str]) -> Any:
    return CliRunner().invoke(app, ["session", command[0], "--store", f"sqlite:///{path}",
                                    *command[1:]])


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_another_programs_database_is_refused_and_left_alone(tmp_path: Path,
                                                            command: list[str]) -> None:
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE people (name TEXT)")
        db.commit()
    result = _invoke(path, command)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert "is a SQLite database but not a session store" in result.stderr
    assert _tables(path) == ["people"]


def test_an_empty_file_is_refused_and_left_empty(tmp_path: Path) -> None:
    path = tmp_path / "contextwright.db"
    path.touch()
    result = _invoke(path, ["list"])
    assert result.exit_code == 2
    assert path.stat().st_size == 0


def test_a_file_that_is_no_database_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("not a database at all, just some notes\n" * 10)
    result = _invoke(path, ["list"])
    assert result.exit_code == 2
    assert "is not a SQLite database" in result.stderr


def test_a_session_store_is_still_listed(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    store.append(SessionKey(user_id="U", session_id="S"), [{"role": "user", "content": "hi"}])
    store.close()
    result = _invoke(path, ["list"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "U\tS\t1 messages\n"
