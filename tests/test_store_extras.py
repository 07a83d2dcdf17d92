"""Stores whose driver is missing name the extra that installs it, from the API and the CLI."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from contextwright.errors import StoreUnavailable


@pytest.fixture
def without_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import psycopg`` fails as it does on a core-only install."""
    for name in [m for m in sys.modules if m == "psycopg" or m.startswith("psycopg.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)


@pytest.mark.usefixtures("without_psycopg")
def test_a_postgres_store_without_psycopg_names_the_extra() -> None:
    from contextwright.session import PostgresStore, open_store

    for make in (lambda: PostgresStore("postgresql://127.0.0.1/test"),
                 lambda: open_store("postgresql://127.0.0.1/test")):
        with pytest.raises(StoreUnavailable, match=r"contextwright\[postgres\]"):
            make().list_sessions()  # a store that connects lazily fails on first use


@pytest.mark.usefixtures("without_psycopg")
def test_the_cli_says_which_extra_in_one_line() -> None:
    from contextwright.cli import app

    result = CliRunner().invoke(app, ["session", "list", "--store", "postgresql://127.0.0.1/test"])
    assert result.exit_code == 2, result.output
    assert "contextwright[postgres]" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
