"""Parts whose extra is missing: they name the extra, or work when they need nothing from it."""

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


@pytest.fixture
def without_fastapi(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import fastapi`` fails as it does without the ``server`` extra."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("fastapi", "uvicorn")
                 or m.startswith("contextwright.server")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    monkeypatch.setitem(sys.modules, "uvicorn", None)


@pytest.mark.usefixtures("without_fastapi")
def test_making_an_api_key_needs_no_server_extra() -> None:
    from contextwright.cli import app
    from contextwright.server.tenants import hash_key

    result = CliRunner().invoke(app, ["api-key", "acme"])
    assert result.exit_code == 0, result.output
    key = result.stdout.split("): ")[1].splitlines()[0]
    assert hash_key(key) in result.stdout


@pytest.mark.usefixtures("without_fastapi")
def test_the_service_without_the_server_extra_names_it() -> None:
    with pytest.raises(ImportError, match=r"contextwright\[server\]"):
        from contextwright.server import create_app  # noqa: F401
