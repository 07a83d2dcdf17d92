"""``contextwright session``: arguments refused before anything is asked or read."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.session import SqliteStore
from contextwright.session.store import SessionKey

runner = CliRunner()


def _seed(path: Path) -> str:
    store = SqliteStore(path)
    store.append(SessionKey(user_id="U1", session_id="S1"), [{"role": "user", "content": "hi"}])
    store.close()
    return f"sqlite:///{path}"


@pytest.mark.parametrize("ids", [["--user", "U1", "--session", ""], ["--user", ""],
                                 ["--user", "", "--session", "S1"]])
def test_erase_refuses_a_blank_id_before_asking(tmp_path: Path, ids: list[str]) -> None:
    # "--session ''" asked "Erase every session of user U1?", and only a yes was refused.
    url = _seed(tmp_path / "s.db")
    result = runner.invoke(app, ["session", "erase", "--store", url, *ids], input="y\n")
    assert result.exit_code == 2
    assert "Erase" not in result.stdout
    assert "must be a non-empty string" in result.stderr
    store = SqliteStore(tmp_path / "s.db")
    assert store.count(SessionKey(user_id="U1", session_id="S1")) == 1
    store.close()


def test_show_of_a_malformed_summary_prints_only_the_error(tmp_path: Path) -> None:
    # The session's heading was printed, then the error: a partial listing, read as the session.
    url = _seed(tmp_path / "s.db")
    store = SqliteStore(tmp_path / "s.db")
    store.put_state(SessionKey(user_id="U1", session_id="S1"), {"summary": {"need": 5}},
                    expected_version=None)
    store.close()
    result = runner.invoke(app, ["session", "show", "--store", url, "--user", "U1",
                                 "--session", "S1"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: SummaryError: summary field need")


def test_a_sqlite_url_with_options_is_refused_for_its_options(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # "no SQLite database at s.db?timeout=30" named a file that exists: the options are wrong.
    _seed(tmp_path / "s.db")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["session", "list", "--store", "sqlite:///s.db?timeout=30"])
    assert result.exit_code == 2
    assert "takes no query options" in result.stderr
    assert not (tmp_path / "s.db?timeout=30").exists()
