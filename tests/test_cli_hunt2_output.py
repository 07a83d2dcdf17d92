"""What ``contextwright session show|erase`` print in their edge cases (a real SQLite store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.session import SqliteStore
from contextwright.session.store import SessionKey

runner = CliRunner()


def _store_with_one_unrouted_session(path: Path) -> str:
    # Messages appended straight to the store: no manager ever routed the session.
    store = SqliteStore(path)
    store.append(SessionKey(user_id="u", session_id="s"), [{"role": "user", "content": "hi"}])
    store.close()
    return f"sqlite:///{path}"


@pytest.mark.parametrize("last", ["-1", "9223372036854775808"])
def test_a_last_out_of_range_names_the_option(tmp_path: Path, last: str) -> None:
    url = _store_with_one_unrouted_session(tmp_path / "s.db")
    result = runner.invoke(app, ["session", "show", "--store", url, "--user", "u",
                                 "--session", "s", "--last", last])
    assert result.exit_code == 2
    assert "'--last'" in result.stderr and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_show_says_a_session_never_routed_has_no_mode_yet(tmp_path: Path) -> None:
    url = _store_with_one_unrouted_session(tmp_path / "s.db")
    result = runner.invoke(app, ["session", "show", "--store", url, "--user", "u",
                                 "--session", "s"])
    assert result.exit_code == 0, result.output
    assert "mode (not routed yet)" in result.stdout and "None" not in result.stdout


def test_erasing_a_session_that_does_not_exist_says_nothing_matched(tmp_path: Path) -> None:
    url = _store_with_one_unrouted_session(tmp_path / "s.db")
    result = runner.invoke(app, ["session", "erase", "--store", url, "--user", "u",
                                 "--session", "typo", "--yes"])
    # Erasing is idempotent: what was asked for (no such session) holds, so exit 0.
    assert result.exit_code == 0, result.output
    assert result.stdout == "nothing erased: no session u/typo\n"
    assert "u\ts\t1 messages" in runner.invoke(app, ["session", "list", "--store", url]).stdout


def test_erasing_a_user_without_sessions_says_nothing_matched(tmp_path: Path) -> None:
    url = _store_with_one_unrouted_session(tmp_path / "s.db")
    result = runner.invoke(app, ["session", "erase", "--store", url, "--user", "nobody",
                                 "--yes"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "nothing erased: user nobody has no sessions\n"


def test_erasing_what_exists_still_counts_it(tmp_path: Path) -> None:
    url = _store_with_one_unrouted_session(tmp_path / "s.db")
    result = runner.invoke(app, ["session", "erase", "--store", url, "--user", "u",
                                 "--session", "s", "--yes"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "erased 1 session(s)\n"
