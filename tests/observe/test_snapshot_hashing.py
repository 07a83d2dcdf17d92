"""Redacted snapshots hash the caller's ids and texts with a key derived from the deployment's
secret, and every reader still finds the plain SHA-256 records written before."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from observe_helpers import pressured
from rich.console import Console
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.cli import app
from contextwright.core.fence import DEFAULT_FENCE_KEY, deployment_fence_key
from contextwright.errors import ConfigurationError, CorruptRecordError, InvalidInputError
from contextwright.observe import (
    JsonlSink,
    Snapshot,
    SnapshotQuery,
    SnapshotRecorder,
    SnapshotSink,
    SqliteSink,
    diff_snapshots,
    render_html,
)
from contextwright.observe.diff import divergence_text
from contextwright.observe.replay import snapshot_of
from contextwright.observe.snapshot import (
    DEFAULT_SNAPSHOT_KEY,
    PLAIN,
    Hasher,
    snapshot_key,
)
from contextwright.observe.view import print_snapshot

SECRET_VARIABLE = "CONTEXTWRIGHT_FENCE_SECRET"
SECRET = "the deployment's own secret"
LEGACY = Path(__file__).with_name("legacy_snapshots_v1.jsonl")
"""Two redacted records as the library wrote them before keyed hashing (plain SHA-256): a
manager's builds for user ``U001`` / session ``s-old`` (input "yes") and ``U002`` /
``s-other`` (input "no")."""
GUESSES = ("U001", "s1", "yes", "m-7", "ada", "call_1", "order-4471", "billing")


def _legacy() -> list[Snapshot]:
    return [Snapshot.from_json(line) for line in LEGACY.read_text("utf-8").splitlines()]


def _record_identifying_builds(sink: SnapshotSink) -> SnapshotRecorder:
    """A builder's and a manager's builds whose every caller-chosen id and text is short and
    guessable (``GUESSES``), recorded redacted; the recorder is flushed, still open."""
    recorder = SnapshotRecorder(sink)
    history = [{"role": "user", "content": "yes", "id": "m-7", "name": "ada"},
               {"role": "assistant", "content": None, "tool_calls": [{
                   "id": "call_1", "type": "function",
                   "function": {"name": "lookup", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": "ok"}]
    request = Request(user_input="yes", history=history, documents=[
        {"id": "order-4471", "text": "yes", "source": "billing"}])
    ContextBuilder(snapshots=recorder).build(BuildPlan.named("tool_heavy"), request)
    manager = ContextManager(snapshots=recorder, background=False)
    manager.prepare(user_id="U001", session_id="s1", text="yes")
    manager.close()
    assert recorder.flush()
    return recorder


def test_a_guessed_id_or_short_text_cannot_be_confirmed_without_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    recorder = _record_identifying_builds(SqliteSink(tmp_path / "s.db"))
    built, managed = recorder.sink.read()
    recorder.close()
    stored = built.to_json() + managed.to_json()
    public = Hasher(DEFAULT_SNAPSHOT_KEY)  # what anyone can compute from the source alone
    for guess in GUESSES:
        for hashed in (PLAIN.identifier(guess), PLAIN.digest(guess), public.digest(guess)):
            assert hashed not in stored, guess
    # They are there, keyed: whoever holds the secret finds them.
    own = Hasher(snapshot_key(SECRET))
    assert managed.session == {"user_id": own.identifier("U001"),
                               "session_id": own.identifier("s1")}
    assert built.request["documents"][0]["id"] == own.identifier("order-4471")
    assert built.request["user_input"] == own.text("yes") == {"hmac": own.digest("yes"),
                                                              "chars": 3}
    assert managed.hashing == {"scheme": "hmac-sha256", "key": "deployment",
                               "key_id": own.key_id}


def test_without_a_secret_a_snapshot_says_its_hashes_are_not_private(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)
    plan, request = pressured()
    snapshot = snapshot_of(plan, request, redact=True)
    public = Hasher(DEFAULT_SNAPSHOT_KEY)
    assert snapshot.hashing == {"scheme": "hmac-sha256", "key": "default",
                                "key_id": public.key_id}
    assert snapshot.request["user_input"] == public.text(request.user_input)
    assert "built-in key, which is public" in render_html(snapshot)
    out = StringIO()
    print_snapshot(snapshot, Console(file=out, width=200))
    assert f"set {SECRET_VARIABLE}" in out.getvalue()
    keyed = snapshot_of(plan, request, redact=True, fence_secret=SECRET)
    assert keyed.hashing is not None and keyed.hashing["key"] == "deployment"
    assert keyed.hashing["key_id"] != public.key_id
    assert snapshot_of(plan, request).hashing is None  # unredacted: nothing hashed


def test_the_snapshot_key_is_derived_apart_from_the_fence_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)
    assert snapshot_key() == DEFAULT_SNAPSHOT_KEY != DEFAULT_FENCE_KEY
    assert snapshot_key(SECRET) != deployment_fence_key(SECRET)
    assert snapshot_key(SECRET) not in (DEFAULT_SNAPSHOT_KEY, snapshot_key(SECRET + "!"))
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    assert snapshot_key() == snapshot_key(SECRET)  # the one secret the deployment reads
    monkeypatch.setenv(SECRET_VARIABLE, "  ")
    with pytest.raises(ConfigurationError):
        SnapshotRecorder(JsonlSink(tmp_path / "s.jsonl"))


def test_a_recorder_of_another_secret_never_reuses_a_hash() -> None:
    # The recorded form of a message is kept per message object: it must be kept per key too.
    plan, request = pressured()
    raw = snapshot_of(plan, request)
    for secret in ("first secret", "second secret"):
        own = Hasher(snapshot_key(secret))
        redacted = snapshot_of(plan, request, redact=True, fence_secret=secret)
        assert [m["content"] for m in redacted.messages] == [
            own.text(m["content"]) for m in raw.messages]


def test_a_user_or_session_finds_keyed_records_and_those_written_before(
        sink: SnapshotSink, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    old_u001, old_u002 = _legacy()
    assert old_u001.session is not None and old_u001.hashing is None
    assert old_u001.session["user_id"] == PLAIN.identifier("U001")  # what the fixture is
    sink.write([old_u001, old_u002])
    recorder = _record_identifying_builds(sink)
    managed = sink.read()[-1]

    def ids(**wanted: Any) -> list[str]:
        return [s.id for s in sink.read(SnapshotQuery(**wanted))]

    assert ids(user_id="U001") == [old_u001.id, managed.id]
    assert ids(user_id="U001", limit=1) == [managed.id]
    assert ids(user_id="U002") == [old_u002.id]
    assert ids(session_id="s-old") == [old_u001.id]
    assert ids(user_id="U001", session_id="s1") == [managed.id]
    assert ids(user_id="U003") == []
    # Another deployment's secret cannot find the keyed record; the old one is plain SHA-256.
    assert ids(user_id="U001", fence_secret="another deployment") == [old_u001.id]
    recorder.close()


def test_a_query_refuses_an_id_no_session_can_have() -> None:
    for bad in ("", "\ud800", "a\x00b"):
        with pytest.raises(InvalidInputError):
            SnapshotQuery(user_id=bad)
        with pytest.raises(InvalidInputError):
            SnapshotQuery(session_id=bad)


_OLD_SCHEMA = (
    "CREATE TABLE snapshots (id TEXT PRIMARY KEY, created_at REAL NOT NULL, plan TEXT NOT "
    "NULL, mode TEXT, status TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX snapshots_by_time ON snapshots (created_at)",
    "CREATE INDEX snapshots_by_plan ON snapshots (plan, created_at)",
)
_OLD_INSERT = "INSERT OR REPLACE INTO snapshots VALUES (?,?,?,?,?,?)"


def _insert_as_an_older_writer(path: Path, lines: list[str]) -> None:
    """Write ``lines`` as a writer of an older version does: six columns, the body as read."""
    db = sqlite3.connect(path)
    with db:
        for line in lines:
            data = json.loads(line)
            db.execute(_OLD_INSERT, (data["id"], data["created_at"], data["plan"],
                                     data["mode"], data["status"], line))
    db.close()


def test_sqlite_indexes_user_and_session_over_rows_an_older_version_wrote(
        tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    old = sqlite3.connect(path)
    for statement in _OLD_SCHEMA:
        old.execute(statement)
    old.close()
    first, second = LEGACY.read_text("utf-8").splitlines()
    _insert_as_an_older_writer(path, [first])  # before this version opened the file
    sink = SqliteSink(path)
    _insert_as_an_older_writer(path, [second])  # an older writer still at work after
    statements: list[str] = []
    sink._db.set_trace_callback(statements.append)
    assert [s.id for s in sink.read(SnapshotQuery(user_id="U001"))] == [
        json.loads(first)["id"]]
    assert [s.id for s in sink.read(SnapshotQuery(session_id="s-other", limit=5))] == [
        json.loads(second)["id"]]
    sink.close()
    probe = sqlite3.connect(path)
    for statement, index in zip(statements[-2:], ("snapshots_by_user_id",
                                                  "snapshots_by_session_id"), strict=True):
        plan = " ".join(row[3] for row in probe.execute("EXPLAIN QUERY PLAN " + statement))
        assert f"USING INDEX {index}" in plan, (statement, plan)
    probe.close()


def test_two_snapshots_of_one_deployment_compare_equal_texts_as_equal() -> None:
    plan, request = pressured()
    first = snapshot_of(plan, request, redact=True, fence_secret=SECRET)
    second = snapshot_of(plan, request, redact=True, fence_secret=SECRET)
    same = diff_snapshots(first, second)
    assert same.hashes_comparable and same.first_divergence is None and not same.items
    raw = snapshot_of(plan, request)
    twins = diff_snapshots(raw, first, fence_secret=SECRET)  # the raw side hashed alike
    assert twins.hashes_comparable and twins.first_divergence is None


def test_a_raw_and_a_redacted_record_of_one_build_know_an_id_message_as_one_item() -> None:
    history = [{"role": "user", "content": "hi", "id": "m1", "name": "ada"},
               {"role": "assistant", "content": "hello", "id": "m2"}]
    request = Request(user_input="next", history=history)
    raw = snapshot_of(BuildPlan.named("chat"), request)
    redacted = snapshot_of(BuildPlan.named("chat"), request, redact=True, fence_secret=SECRET)
    for diff in (diff_snapshots(raw, redacted, fence_secret=SECRET),
                 diff_snapshots(redacted, raw, fence_secret=SECRET)):
        assert diff.hashes_comparable and diff.first_divergence is None
        assert diff.items == ()
    both_raw = diff_snapshots(raw, snapshot_of(BuildPlan.named("chat"), replace(
        request, history=history[1:])))
    assert [(c.key, c.change) for c in both_raw.items] == [("message:m1", "removed")]


def test_a_diff_says_when_the_hashes_cannot_match() -> None:
    plan, request = pressured()
    ours = snapshot_of(plan, request, redact=True, fence_secret=SECRET)
    theirs = snapshot_of(plan, request, redact=True, fence_secret="another deployment")
    raw = snapshot_of(plan, request)
    for diff in (diff_snapshots(ours, theirs), diff_snapshots(ours, _legacy()[0]),
                 diff_snapshots(raw, ours, fence_secret="another deployment")):
        assert not diff.hashes_comparable
        assert "different keys" in divergence_text(diff)


def test_records_of_the_older_layout_are_read_and_unknown_ones_refused() -> None:
    data = json.loads(LEGACY.read_text("utf-8").splitlines()[0])
    assert data["schema"] == 1 and Snapshot.from_dict(data).redacted
    for schema in (3, "1", [1], None):
        with pytest.raises(CorruptRecordError):
            Snapshot.from_dict({**data, "schema": schema})


def test_the_cli_finds_a_users_builds_with_the_deployment_secret_old_and_new(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "snapshots.db"
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    _record_identifying_builds(SqliteSink(path)).close()
    _insert_as_an_older_writer(path, LEGACY.read_text("utf-8").splitlines())
    runner, sink = CliRunner(), f"sqlite:///{path}"

    def builds(*args: str) -> int:
        result = runner.invoke(app, ["snapshots", "query", "--sink", sink, *args, "--json"])
        assert result.exit_code == 0, result.output
        return int(json.loads(result.stdout)["builds"])

    assert builds("--user", "U001") == 2  # the old record and the new one
    assert builds("--user", "U001", "--session", "s1") == 1
    listed = runner.invoke(app, ["snapshots", "list", "--sink", sink, "--user", "U002",
                                 "--json"])
    assert [row["id"] for row in json.loads(listed.stdout)] == [_legacy()[1].id]
    monkeypatch.delenv(SECRET_VARIABLE)
    assert builds("--user", "U001") == 1  # without the secret only the plain record matches
    monkeypatch.setenv(SECRET_VARIABLE, " ")
    blank = runner.invoke(app, ["snapshots", "query", "--sink", sink, "--user", "U001"])
    assert blank.exit_code == 2 and "secret" in blank.output
    assert len(blank.output.strip().splitlines()) == 1


class _SqlSpy:
    """A PostgreSQL connection that notes every statement and its parameters."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.statements: list[tuple[str, Any]] = []

    def execute(self, sql: str, params: Any = None) -> Any:
        self.statements.append((sql, params))
        return self.connection.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


@pytest.mark.parametrize("sink", ["postgres"], indirect=True)
def test_postgres_reads_a_user_or_session_through_its_index(
        sink: SnapshotSink, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextwright.observe.sinks_postgres import PostgresSink

    assert isinstance(sink, PostgresSink)
    sink.write(_legacy())
    spy = _SqlSpy(sink._db)
    monkeypatch.setattr(sink, "_db", spy)
    assert [s.id for s in sink.read(SnapshotQuery(user_id="U002"))] == [_legacy()[1].id]
    assert [s.id for s in sink.read(SnapshotQuery(session_id="s-old", limit=1))] == [
        _legacy()[0].id]
    monkeypatch.undo()  # the fixture closes the real connection
    with spy.connection.transaction():  # no sequential scan, where an index can serve
        spy.connection.execute("SET LOCAL enable_seqscan = off")
        for (sql, params), index in zip(spy.statements, ("snapshots_by_user_id",
                                                         "snapshots_by_session_id"),
                                        strict=True):
            plan = " ".join(row[0] for row in spy.connection.execute(
                "EXPLAIN " + sql, params).fetchall())
            assert index in plan, plan


def test_a_builder_given_a_sink_records_with_its_own_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)
    sink = JsonlSink(tmp_path / "s.jsonl")
    builder = ContextBuilder(fence_secret=SECRET, snapshots=sink)
    builder.build(BuildPlan.named("tool_heavy"), Request(user_input="yes"))
    assert builder.snapshots is not None and builder.snapshots.flush()
    (snapshot,) = sink.read()
    builder.snapshots.close()
    assert snapshot.hashing == {"scheme": "hmac-sha256", "key": "deployment",
                                "key_id": Hasher(snapshot_key(SECRET)).key_id}
