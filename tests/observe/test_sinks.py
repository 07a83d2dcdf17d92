"""Every sink keeps, filters, finds and forgets snapshots alike: JSONL, SQLite, Redis, Postgres."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from observe_helpers import pressured

from contextwright import BuildPlan, ContextBuilder
from contextwright.errors import InvalidInputError
from contextwright.observe import (
    Retention,
    Snapshot,
    SnapshotQuery,
    SnapshotRecorder,
    SnapshotSink,
    SqliteSink,
    open_sink,
    render_html,
)
from contextwright.observe.replay import snapshot_of
from contextwright.observe.snapshot import identifier_digest


@pytest.fixture(scope="module")
def base() -> Snapshot:
    plan, request = pressured()
    return snapshot_of(plan, request, redact=True)


def _series(base: Snapshot, count: int) -> list[Snapshot]:
    return [replace(base, id=f"{index:04d}snap", created_at=1000.0 + index,
                    plan="chat" if index % 2 else "tool_heavy",
                    mode="deep" if index % 3 == 0 else None) for index in range(count)]


def test_a_sink_returns_what_was_written_oldest_first(sink: SnapshotSink,
                                                     base: Snapshot) -> None:
    series = _series(base, 10)
    sink.write(series[5:])
    sink.write(series[:5])
    assert sink.read() == series
    assert sink.get("0003snap") == series[3]
    with pytest.raises(InvalidInputError, match="no snapshot"):
        sink.get("9999snap")


def test_a_sink_filters_by_time_plan_mode_and_limit(sink: SnapshotSink, base: Snapshot) -> None:
    series = _series(base, 10)
    sink.write(series)
    assert [s.id for s in sink.read(SnapshotQuery(since=1003, until=1006))] == [
        "0003snap", "0004snap", "0005snap"]
    assert all(s.plan == "chat" for s in sink.read(SnapshotQuery(plan="chat")))
    assert len(sink.read(SnapshotQuery(plan="chat"))) == 5
    assert [s.id for s in sink.read(SnapshotQuery(mode="deep"))] == [
        "0000snap", "0003snap", "0006snap", "0009snap"]
    assert [s.id for s in sink.read(SnapshotQuery(limit=2))] == ["0008snap", "0009snap"]
    assert [s.id for s in sink.read(SnapshotQuery(plan="tool_heavy", limit=1))] == ["0008snap"]
    # A limit of 0 asks for none (not, as a slice from -0 would give, all of them).
    assert sink.read(SnapshotQuery(limit=0)) == []
    assert sink.read(SnapshotQuery(user_id="ada", limit=0)) == []
    with pytest.raises(InvalidInputError, match="limit"):
        SnapshotQuery(limit=-1)


def test_a_plan_filter_finds_the_builds_grown_from_that_plan(sink: SnapshotSink,
                                                             base: Snapshot) -> None:
    # A build of simple_qa whose request held history used ``simple_qa+history``.
    sink.write([replace(base, id="0001snap", plan="simple_qa+history", created_at=1001.0),
                replace(base, id="0002snap", plan="simple_qa", created_at=1002.0),
                replace(base, id="0003snap", plan="simple_qa_v2", created_at=1003.0)])
    assert [s.id for s in sink.read(SnapshotQuery(plan="simple_qa"))] == ["0001snap", "0002snap"]
    assert [s.id for s in sink.read(SnapshotQuery(plan="simple_qa+history"))] == ["0001snap"]
    assert all(SnapshotQuery(plan="simple_qa").matches(s) == (s.id != "0003snap")
               for s in sink.read())


def test_a_sink_purges_by_age_then_by_count(sink: SnapshotSink, base: Snapshot) -> None:
    sink.write(_series(base, 10))
    assert sink.purge(older_than=1004) == 4
    assert sink.read()[0].id == "0004snap"
    assert sink.purge(keep_last=2) == 4
    assert [s.id for s in sink.read()] == ["0008snap", "0009snap"]
    assert sink.purge(keep_last=5) == 0
    assert sink.purge(keep_last=0) == 2 and sink.read() == []


def test_the_recorder_applies_retention_to_the_sink(sink: SnapshotSink) -> None:
    recorder = SnapshotRecorder(sink, retention=Retention(max_count=3, every=2))
    builder = ContextBuilder(snapshots=recorder)
    plan, request = pressured()
    for _ in range(7):
        builder.build(plan, request)
    assert recorder.flush()
    assert len(sink.read()) == 3 and recorder.stats.purged == 4
    recorder.close()


def test_close_applies_retention_when_every_build_was_written_before_it(
        tmp_path: Path, base: Snapshot) -> None:
    # The writer may have written the last build before ``close`` queues its stop: the stop
    # alone must still leave the sink as retention wants it.
    sink = SqliteSink(tmp_path / "s.db")
    sink.write([replace(base, id="oldsnap", created_at=1000.0)])
    recorder = SnapshotRecorder(sink, retention=Retention(max_age_seconds=3600))
    plan, request = pressured()
    ContextBuilder(snapshots=recorder).build(plan, request)
    deadline = time.monotonic() + 30
    while recorder.stats.written < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorder.stats.written == 1
    recorder.close()
    reopened = SqliteSink(tmp_path / "s.db")
    assert [s.id for s in reopened.read()] != [] and "oldsnap" not in [
        s.id for s in reopened.read()]
    reopened.close()


def test_retention_by_age_removes_old_snapshots_on_close(tmp_path: Path,
                                                         base: Snapshot) -> None:
    sink = SqliteSink(tmp_path / "s.db")
    sink.write([replace(base, id="oldsnap", created_at=1000.0)])
    recorder = SnapshotRecorder(sink, retention=Retention(max_age_seconds=3600))
    plan, request = pressured()
    ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.close()
    reopened = SqliteSink(tmp_path / "s.db")
    ids = [s.id for s in reopened.read()]
    assert "oldsnap" not in ids and len(ids) == 1
    reopened.close()


def test_open_sink_reads_urls_and_refuses_unknown_ones(tmp_path: Path) -> None:
    sink = open_sink(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(sink, SqliteSink)
    sink.close()
    for bad in ("nothing", "ftp://x", "sqlite://relative"):
        with pytest.raises(InvalidInputError):
            open_sink(bad)
    with pytest.raises(InvalidInputError):
        Retention(max_age_seconds=0)


def test_a_corrupt_jsonl_line_is_skipped_and_named(tmp_path: Path, base: Snapshot,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    from contextwright.observe import JsonlSink

    sink = JsonlSink(tmp_path / "s.jsonl")
    sink.write([base])
    with open(tmp_path / "s.jsonl", "a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    assert sink.read() == [base]
    assert "line 2 of s.jsonl is not a snapshot" in caplog.text
    assert sink.unreadable_lines() == [(2, "a snapshot record is not JSON")]


SECRET = "ada.quist@example.com"


def _identifying_builds(sink: SnapshotSink) -> SnapshotRecorder:
    """A builder's and a manager's builds, recorded redacted (the default), whose every
    identifier the caller chose carries ``SECRET``; the recorder is flushed, still open."""
    from contextwright import ContextManager, Request

    recorder = SnapshotRecorder(sink)
    history = [{"role": "user", "content": "look it up", "name": f"speaker {SECRET}"},
               {"role": "assistant", "content": None, "tool_calls": [{
                   "id": f"call {SECRET}", "type": "function",
                   "function": {"name": "lookup", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": f"call {SECRET}", "name": "lookup",
                "content": "found"}]
    request = Request(user_input="and then?", history=history, documents=[
        {"id": f"doc {SECRET}", "text": "a document", "source": f"src {SECRET}"}])
    ContextBuilder(snapshots=recorder).build(BuildPlan.named("tool_heavy"), request)
    manager = ContextManager(snapshots=recorder, background=False)
    manager.prepare(user_id=SECRET, session_id=f"session {SECRET}", text="hi")
    manager.close()
    assert recorder.flush() and recorder.stats.written == 2
    return recorder


def test_a_redacted_snapshot_keeps_no_identifier_in_clear_in_any_sink(
        sink: SnapshotSink) -> None:
    recorder = _identifying_builds(sink)
    built, managed = sink.read()
    for snapshot in (built, managed):
        assert SECRET not in snapshot.to_json() and SECRET not in render_html(snapshot)
    document = next(m for m in built.messages if m.get("document"))
    assert document["label"] == identifier_digest(f"src {SECRET}")
    assert built.request["documents"][0]["id"] == identifier_digest(f"doc {SECRET}")
    tool = next(m for m in built.messages if m["role"] == "tool")
    assert tool["name"] == "lookup" and tool["label"] == "tool lookup"  # the app's own names
    assert managed.session == {"user_id": identifier_digest(SECRET),
                               "session_id": identifier_digest(f"session {SECRET}")}
    recorder.close()


def test_a_user_or_session_id_finds_its_builds_though_kept_hashed(sink: SnapshotSink) -> None:
    recorder = _identifying_builds(sink)
    _, managed = sink.read()
    assert sink.read(SnapshotQuery(user_id=SECRET, limit=1)) == [managed]
    assert sink.read(SnapshotQuery(session_id=f"session {SECRET}")) == [managed]
    assert sink.read(SnapshotQuery(user_id="someone else")) == []
    recorder.close()


def test_a_limited_query_by_user_merges_every_form_the_id_is_kept_in(
        sink: SnapshotSink, base: Snapshot) -> None:
    # Recorded with and without redaction: the same user's id is kept in clear and hashed.
    forms = ("ada", identifier_digest("ada"), "bob")
    series = [replace(base, id=f"{index:04d}snap", created_at=1000.0 + index // 2,
                      session={"user_id": forms[index % 3], "session_id": "s"},
                      plan="chat" if index % 4 == 0 else "tool_heavy")
              for index in range(12)]
    sink.write(series)
    ada = [s for s in series if s.session is not None and s.session["user_id"] != "bob"]
    for limit in (1, 3, 5, 20):
        assert sink.read(SnapshotQuery(user_id="ada", limit=limit)) == ada[-limit:], limit
    assert sink.read(SnapshotQuery(user_id="ada", session_id="s", limit=4)) == ada[-4:]
    chat = [s for s in ada if s.plan == "chat"]
    assert len(chat) == 2 and sink.read(SnapshotQuery(user_id="ada", plan="chat", limit=1)) == (
        chat[-1:])
