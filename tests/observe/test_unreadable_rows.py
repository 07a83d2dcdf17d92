"""A stored snapshot that cannot be read (damaged, or written by a newer version) hides no other
one in SQLite, PostgreSQL or Redis, as a bad JSONL line hides none: reads skip it, name it once
in a warning, and ``unreadable_rows`` lists it; asked for by id it is a ``CorruptRecordError``
naming it. The bad rows are written straight into the real databases."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from observe_helpers import pressured
from typer.testing import CliRunner

from conftest import POSTGRES_DSN, REDIS_URL, _service_or_fail
from contextwright.cli import app
from contextwright.errors import CorruptRecordError
from contextwright.observe import Snapshot, SnapshotQuery, SqliteSink
from contextwright.observe.replay import snapshot_of
from contextwright.observe.snapshot import OTHER_LAYOUT

NEWER = json.dumps({"schema": 99, "id": "newer", "created_at": 1005.5, "plan": "chat"})
"""A record of a layout a later version writes: JSON, but not one this version reads."""
NOT_JSON = "{not json"


@pytest.fixture(scope="module")
def base() -> Snapshot:
    plan, request = pressured()
    return snapshot_of(plan, request, redact=True)


def _series(base: Snapshot, count: int) -> list[Snapshot]:
    return [replace(base, id=f"{index:04d}snap", created_at=1000.0 + index,
                    plan="chat" if index % 2 else "tool_heavy",
                    session={"user_id": "ada", "session_id": "trip"})
            for index in range(count)]


@dataclass
class Backend:
    """A sink, a way to store a raw row in it as another writer would, and its URL."""

    sink: Any
    put_raw: Callable[[str, float, str, str], None]
    """Store ``body`` under id, time and plan, bypassing the sink's own checks."""
    url: str


def _sqlite(tmp_path: Path) -> Iterator[Backend]:
    path = tmp_path / "snapshots.db"
    sink = SqliteSink(path)

    def put_raw(snapshot_id: str, created_at: float, plan: str, body: str) -> None:
        with sqlite3.connect(path) as db:
            db.execute("INSERT INTO snapshots VALUES (?,?,?,?,?,?)",
                       (snapshot_id, created_at, plan, None, "ok", body))
        db.close()

    yield Backend(sink, put_raw, f"sqlite:///{path}")
    sink.close()


def _postgres() -> Iterator[Backend]:
    import psycopg

    from contextwright.observe.sinks_postgres import PostgresSink

    holder: list[Any] = []
    _service_or_fail("PostgreSQL", lambda: holder.append(
        psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3)))
    admin = holder[0]
    schema = f"cwtest_{uuid.uuid4().hex}"
    sink = PostgresSink(POSTGRES_DSN, schema=schema)

    def put_raw(snapshot_id: str, created_at: float, plan: str, body: str) -> None:
        admin.execute(f'INSERT INTO "{schema}".snapshots VALUES (%s,%s,%s,%s,%s,%s)',
                      (snapshot_id, created_at, plan, None, "ok", body))

    yield Backend(sink, put_raw, f"{POSTGRES_DSN}?schema={schema}")
    sink.close()
    admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    admin.close()


def _redis() -> Iterator[Backend]:
    import redis

    from contextwright.observe.sinks_redis import RedisSink

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    _service_or_fail("Redis", client.ping)
    prefix = f"cwtest-{uuid.uuid4().hex}"
    sink = RedisSink(REDIS_URL, prefix=prefix)

    def put_raw(snapshot_id: str, created_at: float, plan: str, body: str) -> None:
        # As the sink indexes a snapshot: body, time, and its plan's set.
        client.hset(f"{prefix}:snapshots:body", snapshot_id, body)
        client.zadd(f"{prefix}:snapshots:time", {snapshot_id: created_at})
        client.zadd(f"{prefix}:snapshots:by:plan:{plan}", {snapshot_id: created_at})

    yield Backend(sink, put_raw, f"{REDIS_URL}?prefix={prefix}")
    sink.close()
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture(params=("sqlite", "postgres", "redis"))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    elif request.param == "postgres":
        yield from _postgres()
    else:
        yield from _redis()


def _reason(body: str) -> str:
    with pytest.raises(CorruptRecordError) as caught:
        Snapshot.from_json(body)
    return str(caught.value)


def test_a_row_of_a_newer_layout_is_skipped_and_named(
        backend: Backend, base: Snapshot, caplog: pytest.LogCaptureFixture) -> None:
    series = _series(base, 10)
    backend.sink.write(series)
    backend.put_raw("newer", 1005.5, "chat", NEWER)
    assert backend.sink.read() == series
    assert backend.sink.unreadable_rows() == [("newer", f"{OTHER_LAYOUT} (99)")]
    assert backend.sink.read(SnapshotQuery(plan="chat")) == [
        s for s in series if s.plan == "chat"]
    assert backend.sink.read(SnapshotQuery(user_id="ada", since=1004)) == series[4:]
    warnings = [r.getMessage() for r in caplog.records if "newer" in r.getMessage()]
    assert warnings == [f"snapshot newer is not readable ({OTHER_LAYOUT} (99)); "
                        "reads skip it"]  # once, however many reads met it


def test_a_limit_counts_the_snapshots_read_not_the_rows_skipped(
        backend: Backend, base: Snapshot) -> None:
    series = _series(base, 6)
    backend.sink.write(series)
    for index in range(3):  # the three newest rows are unreadable
        backend.put_raw(f"bad{index}", 2000.0 + index, "chat", NEWER)
    assert backend.sink.read(SnapshotQuery(limit=1)) == series[-1:]
    assert backend.sink.read(SnapshotQuery(limit=4)) == series[-4:]
    assert backend.sink.read(SnapshotQuery(limit=4, plan="chat")) == [
        s for s in series if s.plan == "chat"]
    assert [i for i, _ in backend.sink.unreadable_rows()] == ["bad0", "bad1", "bad2"]


def test_an_unreadable_row_asked_for_by_id_is_an_error_naming_it(
        backend: Backend, base: Snapshot) -> None:
    backend.sink.write([base])
    backend.put_raw("newer", 1005.5, "chat", NEWER)
    with pytest.raises(CorruptRecordError, match=r"snapshot newer cannot be read: "
                       r"a snapshot record of a layout"):
        backend.sink.get("newer")
    assert backend.sink.get(base.id) == base


def test_an_unreadable_row_is_purged_by_age(backend: Backend, base: Snapshot) -> None:
    series = _series(base, 4)
    backend.sink.write(series)
    backend.put_raw("newer", 999.0, "chat", NEWER)
    assert backend.sink.read() == series
    assert backend.sink.purge(older_than=1000.0) == 1
    assert backend.sink.read() == series
    assert backend.sink.unreadable_rows() == []


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
def test_a_row_that_is_not_json_is_skipped_and_named(backend: Backend, base: Snapshot,
                                                      tmp_path: Path) -> None:
    # PostgreSQL refuses such a row: its session indexes parse every body.
    if isinstance(backend.sink, SqliteSink):
        # Neither does SQLite take one while its session indexes exist: a database written
        # before them (or by a SQLite without JSON functions) may hold one.
        with sqlite3.connect(backend.sink.path) as db:
            for name in ("user_id", "session_id"):
                db.execute(f"DROP INDEX snapshots_by_{name}")
        db.close()
    series = _series(base, 3)
    backend.sink.write(series)
    backend.put_raw("torn", 1001.5, "chat", NOT_JSON)
    sink = backend.sink if not isinstance(backend.sink, SqliteSink) else SqliteSink(
        backend.sink.path)  # opened on the damaged file, as the CLI would
    assert sink.read() == series
    assert sink.read(SnapshotQuery(user_id="ada")) == series
    assert sink.unreadable_rows() == [("torn", _reason(NOT_JSON))]
    with pytest.raises(CorruptRecordError, match="snapshot torn cannot be read"):
        sink.get("torn")
    if sink is not backend.sink:
        sink.close()


def test_the_cli_lists_the_rest_and_names_the_skipped_row(backend: Backend,
                                                           base: Snapshot) -> None:
    series = _series(base, 3)
    backend.sink.write(series)
    backend.put_raw("newer", 1001.5, "chat", NEWER)
    runner = CliRunner()
    listed = runner.invoke(app, ["snapshots", "list", "--sink", backend.url, "--json"])
    assert listed.exit_code == 0, listed.output
    assert [row["id"] for row in json.loads(listed.stdout)] == [s.id for s in series]
    assert listed.stderr == (f"warning: skipped 1 unreadable snapshot(s): newer "
                             f"({OTHER_LAYOUT} (99))\n")
    shown = runner.invoke(app, ["snapshots", "show", "newer", "--sink", backend.url])
    assert shown.exit_code == 2
    assert shown.stderr.startswith("error: CorruptRecordError: snapshot newer cannot be read")


def test_a_redis_body_that_is_not_utf8_is_skipped_and_named(base: Snapshot) -> None:
    import redis

    from contextwright.observe.sinks_redis import RedisSink

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    _service_or_fail("Redis", client.ping)
    prefix = f"cwtest-{uuid.uuid4().hex}"
    series = _series(base, 3)
    # As an earlier version (or another program) left them: bodies and times only, so the
    # first sink to open the prefix reads every body to index it.
    client.hset(f"{prefix}:snapshots:body", mapping={
        **{s.id: s.to_json() for s in series}, "binary": b"\xff\xfe{\"schema\": 2"})
    client.zadd(f"{prefix}:snapshots:time", {
        **{s.id: s.created_at for s in series}, "binary": 1001.5})
    try:
        sink = RedisSink(REDIS_URL, prefix=prefix)
        assert sink.read() == series
        assert sink.read(SnapshotQuery(user_id="ada", limit=2)) == series[-2:]
        assert sink.unreadable_rows() == [("binary", "a snapshot record is not JSON")]
        with pytest.raises(CorruptRecordError, match="snapshot binary cannot be read"):
            sink.get("binary")
        sink.close()
    finally:
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
        client.close()


def test_a_sqlite_body_that_is_not_utf8_is_skipped_and_named(base: Snapshot,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "snapshots.db"
    sink = SqliteSink(path)
    series = _series(base, 3)
    sink.write(series)
    # A snapshot whose stored text lost a byte to damage: JSON still, but not UTF-8.
    damaged = replace(series[0], id="binary", created_at=1001.5).to_json().encode()
    damaged = damaged.replace(b'"plan":"tool_heavy"', b'"plan":"tool_\xffheavy"', 1)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO snapshots VALUES (?,?,?,?,?,CAST(? AS TEXT))",
                   ("binary", 1001.5, "tool_heavy", None, "ok", damaged))
    db.close()
    assert sink.read() == series
    assert sink.read(SnapshotQuery(user_id="ada", limit=2)) == series[-2:]
    assert sink.unreadable_rows() == [("binary", "a snapshot record is not JSON")]
    with pytest.raises(CorruptRecordError, match="snapshot binary cannot be read"):
        sink.get("binary")
    sink.close()


def test_a_jsonl_line_of_a_newer_layout_asked_for_by_id_is_an_error_naming_it(
        base: Snapshot, tmp_path: Path) -> None:
    from contextwright.errors import InvalidInputError
    from contextwright.observe import JsonlSink

    sink = JsonlSink(tmp_path / "s.jsonl")
    sink.write([base])
    with open(tmp_path / "s.jsonl", "a", encoding="utf-8") as handle:
        handle.write(NEWER + "\n{not json\n")
    assert sink.read() == [base]
    # The file holds it, in a layout an upgraded process wrote: not "no snapshot with id".
    with pytest.raises(CorruptRecordError, match=r"snapshot newer cannot be read: "
                       r"a snapshot record of a layout version .* \(99\)"):
        sink.get("newer")
    with pytest.raises(InvalidInputError, match="no snapshot with id absent"):
        sink.get("absent")
    assert sink.get(base.id) == base
