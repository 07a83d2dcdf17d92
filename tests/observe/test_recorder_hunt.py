"""Closing a recorder whose queue is still full (a slow sink at shutdown) writes what was queued
and then closes the sink: the writer used to wait for more forever, holding the sink's file or
connection open, while the log said the queued snapshots were lost. A real SQLite sink, slowed
by a gate on its writes."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.core.items import Message
from contextwright.errors import InvalidInputError
from contextwright.observe import Snapshot, SnapshotRecorder, SqliteSink


class _SlowSqlite(SqliteSink):
    """SQLite whose first write waits for ``gate``: a sink falling behind at shutdown."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate, self.closed, self.first = threading.Event(), threading.Event(), True

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        if self.first:
            self.first = False
            self.gate.wait(10)
        super().write(snapshots)

    def close(self) -> None:
        super().close()
        self.closed.set()


def test_close_with_a_full_queue_writes_it_then_closes_the_sink(tmp_path: Path) -> None:
    sink = _SlowSqlite(tmp_path / "snapshots.db")
    recorder = SnapshotRecorder(sink, redact=False, queue_size=3, batch_size=1)
    builder = ContextBuilder(snapshots=recorder)
    plan = BuildPlan.named("simple_qa")
    builder.build(plan, Request(user_input="first"))
    deadline = time.monotonic() + 10
    while sink.first and time.monotonic() < deadline:
        time.sleep(0.01)  # the writer holds the first build, waiting in the sink
    for n in range(3):
        builder.build(plan, Request(user_input=f"queued {n}"))
    assert recorder.stats.submitted == 4  # the queue is full

    recorder.close(timeout=0.2)  # no room for the stop: close gives up waiting
    sink.gate.set()
    assert sink.closed.wait(10), "the sink was never closed"
    stored = SqliteSink(tmp_path / "snapshots.db").read()
    assert sorted(s.request["user_input"] for s in stored) == [
        "first", "queued 0", "queued 1", "queued 2"]
    assert recorder.stats.written == 4 and recorder.stats.dropped_queue_full == 0


def test_a_label_named_as_a_build_field_must_have_its_form(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "snapshots.db")
    recorder = SnapshotRecorder(sink, redact=False)
    # A session label as a plain id cost every snapshot (it could not be made); a mode that
    # is not a name was written, and then every read of the sink failed on it.
    for labels in ({"session": "s-1"}, {"route": "fast"}, {"switch": "x"}, {"mode": 3}):
        with pytest.raises(InvalidInputError, match=next(iter(labels))):
            SnapshotRecorder(sink, labels=labels)
        with pytest.raises(InvalidInputError, match=next(iter(labels))):
            recorder.labelled(**labels)
    tagged = recorder.labelled(mode="batch", tenant="acme")
    ContextBuilder(snapshots=tagged).build(BuildPlan.named("chat"), Request(user_input="hi"))
    assert recorder.flush()
    (stored,) = sink.read()
    assert stored.mode == "batch" and stored.labels == {"tenant": "acme"}


def test_a_managers_builds_still_carry_session_mode_and_route(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "snapshots.db")
    recorder = SnapshotRecorder(sink, redact=False)
    manager = ContextManager(snapshots=recorder, background=False)
    manager.prepare("u-1", "s-1", "Where is my order?")
    assert recorder.flush() and recorder.stats.capture_errors == 0
    (stored,) = sink.read()
    assert stored.session == {"user_id": "u-1", "session_id": "s-1"}
    assert stored.mode is not None and stored.route is not None


def test_a_message_id_that_is_a_number_leaves_the_sink_readable(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "snapshots.db")
    recorder = SnapshotRecorder(sink, redact=False)
    builder = ContextBuilder(snapshots=recorder)
    # The caller's own Message objects, with its database's row numbers as ids.
    history = [Message(role="user", content="Where is order KST418?", id=41),  # type: ignore[arg-type]
               Message(role="assistant", content="It shipped.", id=42)]  # type: ignore[arg-type]
    builder.build(BuildPlan.named("chat"), Request(user_input="When?", history=history))  # type: ignore[arg-type]
    builder.build(BuildPlan.named("chat"), Request(user_input="another conversation"))
    assert recorder.flush()
    stored = sink.read()  # one record of a number id made every read fail
    assert len(stored) == 2 and recorder.stats.capture_errors == 0
    assert [m.get("id") for m in stored[0].messages if m.get("id")] == ["41", "42"]

