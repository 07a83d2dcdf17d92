"""Sinks recover from what a deployment meets: a dropped database link, text a database
refuses, and one bad record in a batch of good ones."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

from conftest import POSTGRES_DSN
from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.errors import StoreError, StoreUnavailable
from contextwright.observe import SnapshotQuery, SnapshotRecorder, SnapshotSink, snapshot_of
from contextwright.observe.snapshot import Snapshot


def _snapshot(text: str) -> Snapshot:
    return snapshot_of(BuildPlan.named("simple_qa"), Request(user_input=text))


def _terminate(sink: SnapshotSink) -> None:
    """End the sink's server session from another connection, as a restart would."""
    pid = sink._db.info.backend_pid  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.mark.parametrize("sink", ["postgres"], indirect=True)
def test_postgres_sink_reconnects_after_the_server_drops_its_connection(
        sink: SnapshotSink) -> None:
    first, second, third = _snapshot("one"), _snapshot("two"), _snapshot("three")
    sink.write([first])
    _terminate(sink)
    sink.write([second])  # on a new connection, not lost
    _terminate(sink)
    assert [s.id for s in sink.read()] == [first.id, second.id]  # reads recover too
    _terminate(sink)
    assert sink.get(first.id).id == first.id
    _terminate(sink)
    assert sink.purge(keep_last=1) == 1
    sink.write([third])
    assert [s.id for s in sink.read()] == [second.id, third.id]


@pytest.mark.parametrize("sink", ["postgres"], indirect=True)
def test_a_recorder_on_postgres_loses_nothing_across_a_dropped_connection(
        sink: SnapshotSink) -> None:
    recorder = SnapshotRecorder(sink)
    builder = ContextBuilder(snapshots=recorder)
    plan = BuildPlan.named("simple_qa")
    builder.build(plan, Request(user_input="before"))
    assert recorder.flush()
    _terminate(sink)
    for turn in range(5):
        builder.build(plan, Request(user_input=f"after {turn}"))
    assert recorder.flush()
    stats = recorder.stats
    assert (stats.written, stats.dropped_sink_error) == (6, 0)
    assert len(sink.read()) == 6


@pytest.mark.parametrize("sink", ["postgres"], indirect=True)
def test_a_closed_postgres_sink_stays_closed(sink: SnapshotSink) -> None:
    sink.close()
    with pytest.raises(StoreUnavailable):
        sink.write([_snapshot("late")])


@pytest.mark.parametrize("sink", ["jsonl", "sqlite", "redis", "postgres"], indirect=True)
def test_every_sink_stores_text_holding_nul_and_surrogate_escapes(sink: SnapshotSink) -> None:
    good, nul = _snapshot("hello"), _snapshot("pasted binary: a\x00b")
    emoji, backslash = _snapshot("smile \U0001F600"), _snapshot("a literal \\u0000 and \\ud800")
    sink.write([good, nul, emoji, backslash])
    stored = {s.id: s for s in sink.read()}
    assert set(stored) == {good.id, nul.id, emoji.id, backslash.id}
    assert stored[nul.id].to_json() == nul.to_json()
    assert stored[backslash.id].to_json() == backslash.to_json()


@pytest.mark.parametrize("sink", ["postgres"], indirect=True)
def test_postgres_finds_a_session_among_snapshots_holding_nul(sink: SnapshotSink) -> None:
    recorder = SnapshotRecorder(sink, redact=False)
    manager = ContextManager(snapshots=recorder, background=False)
    manager.prepare("u-nul", "s-nul", "binary a\x00b")
    manager.prepare("u-other", "s-2", "plain")
    assert recorder.flush()
    found = sink.read(SnapshotQuery(user_id="u-nul"))
    assert len(found) == 1 and (found[0].session or {}).get("session_id") == "s-nul"
    assert recorder.stats.dropped_sink_error == 0


class _Refusing:
    """A sink that refuses any batch holding its poison text; its first write waits for
    ``gate``, so the builds made meanwhile reach it as one batch."""

    def __init__(self, poison: str, error: type[Exception] = StoreError) -> None:
        self.poison, self.error = poison, error
        self.gate = threading.Event()
        self.batches: list[int] = []
        self.stored: list[Snapshot] = []

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        if not self.batches:
            self.gate.wait(10)
        self.batches.append(len(snapshots))
        if any(self.poison in s.to_json() for s in snapshots):
            raise self.error("refused")
        self.stored.extend(snapshots)

    def read(self, query: Any = None) -> list[Snapshot]:
        return list(self.stored)

    def get(self, snapshot_id: str) -> Snapshot:
        raise NotImplementedError

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        return 0

    def close(self) -> None:
        pass


def _record(sink: _Refusing, texts: list[str]) -> SnapshotRecorder:
    """Record a first build, then one per text while the sink holds the first: one batch."""
    recorder = SnapshotRecorder(sink, redact=False)
    builder = ContextBuilder(snapshots=recorder)
    plan = BuildPlan.named("simple_qa")
    builder.build(plan, Request(user_input="first"))
    deadline = time.monotonic() + 10
    while recorder._writer.queue.qsize() and time.monotonic() < deadline:
        time.sleep(0.01)  # the writer has taken the first build and waits in the sink
    for text in texts:
        builder.build(plan, Request(user_input=text))
    sink.gate.set()
    assert recorder.flush()
    return recorder


def test_one_snapshot_a_sink_refuses_costs_only_itself() -> None:
    sink = _Refusing("POISON")
    recorder = _record(sink, ["a", "b", "POISON", "c", "d"])
    assert sink.batches[1] == 5  # the five went as one batch, refused whole, then one by one
    assert sorted(s.request["user_input"] for s in sink.stored) == ["a", "b", "c", "d",
                                                                   "first"]
    stats = recorder.stats
    assert (stats.written, stats.dropped_sink_error) == (5, 1)
    recorder.close()


def test_an_unreachable_sink_is_not_asked_again_for_each_snapshot() -> None:
    sink = _Refusing("", error=StoreUnavailable)  # every batch refused: the store is down
    recorder = _record(sink, ["a", "b", "c"])
    assert sink.batches == [1, 3]
    assert (recorder.stats.written, recorder.stats.dropped_sink_error) == (0, 4)
    recorder.close()


@pytest.mark.parametrize("sink", ["postgres"], indirect=True)
def test_a_postgres_schema_made_by_an_earlier_version_takes_nul_once_reopened(
        sink: SnapshotSink) -> None:
    from contextwright.observe.sinks_postgres import PostgresSink

    schema = sink._schema  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:  # the earlier index
        admin.execute(f'CREATE INDEX snapshots_by_user_id ON "{schema}".snapshots '
                      "(((body::json -> 'session') ->> 'user_id'), created_at)")
    reopened = PostgresSink(POSTGRES_DSN, schema=schema)
    try:
        nul = _snapshot("a\x00b")
        reopened.write([nul])
        assert [s.id for s in reopened.read()] == [nul.id]
    finally:
        reopened.close()
