"""``contextwright session …`` over PostgreSQL: a store is read, never created.

A mistyped ``?schema=`` made ``session list`` create that schema and its tables and show an
empty store. Against the real server (``CONTEXTWRIGHT_TEST_POSTGRES_DSN``); every schema a
test names is dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.errors import StoreError
from contextwright.session.postgres import PostgresStore
from contextwright.session.store import SessionKey

DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                     "postgresql://postgres@127.0.0.1:5432/test")
runner = CliRunner()


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip("PostgreSQL unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
        pytest.fail(f"PostgreSQL unreachable ({exc})", pytrace=False)


@pytest.fixture
def schema() -> Iterator[str]:
    """A schema name no test has made yet; dropped afterwards, whatever made it."""
    name = f"cwhunt2_{uuid.uuid4().hex[:12]}"
    yield name
    with _admin() as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _tables(schema: str) -> set[str] | None:
    """The schema's tables, or None when there is no such schema."""
    with _admin() as admin:
        if admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                         (schema,)).fetchone() is None:
            return None
        rows = admin.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                             (schema,)).fetchall()
    return {str(row[0]) for row in rows}


def _url(schema: str) -> str:
    return f"{DSN}?schema={schema}"


@pytest.mark.parametrize("command", [
    ["list"], ["show", "--user", "u", "--session", "s"],
    ["export", "--user", "u", "--session", "s"], ["erase", "--user", "u", "--yes"]])
def test_a_missing_schema_is_refused_and_not_created(schema: str, command: list[str]) -> None:
    result = runner.invoke(app, ["session", *command, "--store", _url(schema)])
    assert result.exit_code == 2, result.output
    assert schema in result.stderr and "does not exist" in result.stderr
    assert result.stdout == ""
    assert _tables(schema) is None


def test_a_schema_without_a_store_is_refused_and_left_empty(schema: str) -> None:
    with _admin() as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'CREATE TABLE "{schema}".sessions (other_program TEXT)')
    result = runner.invoke(app, ["session", "list", "--store", _url(schema)])
    assert result.exit_code == 2, result.output
    assert schema in result.stderr and "messages, states" in result.stderr
    assert _tables(schema) == {"sessions"}


def test_an_existing_store_is_listed_shown_and_erased(schema: str) -> None:
    store = PostgresStore(DSN, schema=schema)
    store.append(SessionKey(user_id="u1", session_id="s1"),
                 [{"role": "user", "content": "hello"}])
    store.close()
    listed = runner.invoke(app, ["session", "list", "--store", _url(schema)])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout == "u1\ts1\t1 messages\n"
    shown = runner.invoke(app, ["session", "show", "--store", _url(schema), "--user", "u1",
                                "--session", "s1"])
    assert shown.exit_code == 0, shown.output
    assert "#1 user: hello" in shown.stdout
    erased = runner.invoke(app, ["session", "erase", "--store", _url(schema), "--user", "u1",
                                 "--yes"])
    assert erased.exit_code == 0, erased.output
    assert "erased 1 session(s)" in erased.stdout


def test_the_store_opened_without_create_refuses_a_missing_schema(schema: str) -> None:
    with pytest.raises(StoreError, match=schema):
        PostgresStore(DSN, schema=schema, create=False)
    assert _tables(schema) is None


def test_the_store_opened_without_create_brings_an_older_store_up_to_date(schema: str) -> None:
    # A store made before epochs, write keys and recall indexes were kept.
    with _admin() as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'CREATE TABLE "{schema}".sessions (user_id TEXT NOT NULL, session_id'
                      " TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE"
                      " PRECISION NOT NULL, last_seq BIGINT NOT NULL)")
        admin.execute(f'CREATE TABLE "{schema}".messages (user_id TEXT NOT NULL, session_id'
                      " TEXT NOT NULL, seq BIGINT NOT NULL, created_at DOUBLE PRECISION NOT"
                      " NULL, body TEXT NOT NULL)")
        admin.execute(f'CREATE TABLE "{schema}".states (user_id TEXT NOT NULL, session_id'
                      " TEXT NOT NULL, version BIGINT NOT NULL, data TEXT NOT NULL, updated_at"
                      " DOUBLE PRECISION NOT NULL)")
    PostgresStore(DSN, schema=schema, create=False).close()
    assert {"write_keys", "recall_index"} <= (_tables(schema) or set())


def test_the_store_still_creates_its_schema_by_default(schema: str) -> None:
    PostgresStore(DSN, schema=schema).close()
    assert (_tables(schema) or set()) >= {"sessions", "messages", "states"}
