"""A build recorded after its recorder was closed (a shutdown race: a request still running while
the app closes) is counted as ``dropped_closed`` and logged once, not as ``dropped_queue_full``,
which sent whoever read the stats looking for a queue that was never full. A close that lands
while a build is being handed over loses that build visibly too, never silently. Real SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.observe import SnapshotRecorder, SqliteSink


def _closed_after_one(tmp_path: Path) -> tuple[SnapshotRecorder, ContextBuilder]:
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "snapshots.db"))
    builder = ContextBuilder(snapshots=recorder)
    builder.build(BuildPlan.named("simple_qa"), Request(user_input="before"))
    recorder.close()
    return recorder, builder


def test_builds_after_close_are_counted_as_dropped_closed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    recorder, builder = _closed_after_one(tmp_path)
    for n in range(3):
        context = builder.build(BuildPlan.named("simple_qa"), Request(user_input=f"late {n}"))
        assert context.messages  # the build itself is unaffected
    stats = recorder.stats
    assert (stats.submitted, stats.written) == (1, 1)
    assert stats.dropped_closed == 3
    assert stats.dropped_queue_full == 0
    late = [r for r in caplog.records if "after the recorder was closed" in r.getMessage()]
    assert len(late) == 1  # once, however many builds come late
    assert late[0].contextwright == {"event": "snapshot_recorded_after_close"}  # type: ignore[attr-defined]


def test_a_labelled_view_of_a_closed_recorder_counts_in_the_same_place(tmp_path: Path) -> None:
    recorder, _ = _closed_after_one(tmp_path)
    view = recorder.labelled(region="eu")
    ContextBuilder(snapshots=view).build(BuildPlan.named("simple_qa"), Request(user_input="x"))
    assert recorder.stats.dropped_closed == view.stats.dropped_closed == 1


class _ClosingHistory(list[Any]):
    """A history whose length, once armed, closes the recorder: a close that lands on another
    thread just as a finished build is handed over."""

    recorder: SnapshotRecorder | None = None

    def __len__(self) -> int:
        if self.recorder is not None:
            recorder, self.recorder = self.recorder, None
            recorder.close()
        return super().__len__()


def test_a_close_during_the_hand_over_drops_the_build_as_closed(tmp_path: Path) -> None:
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "snapshots.db"))
    plan = BuildPlan.named("simple_qa")
    history = _ClosingHistory([{"role": "user", "content": "hi"},
                               {"role": "assistant", "content": "hello"}])
    request = Request(user_input="late", history=history)
    builder = ContextBuilder()

    def build() -> Any:
        context = builder.build(plan, request)
        history.recorder = recorder  # the close lands after the build, before the hand-over
        return context

    recorder.record_build(build, plan, request, "estimate")
    stats = recorder.stats
    # The build was put on the queue behind the writer's stop, counted as submitted and never
    # written: it vanished from every counter.
    assert stats.submitted == stats.written
    assert stats.dropped_closed == 1
    stored = SqliteSink(tmp_path / "snapshots.db")
    assert stored.read() == []
    stored.close()


class _PurgeFails(SqliteSink):
    """SQLite whose retention fails (a database locked by a long reader, a read-only file)."""

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        from contextwright.errors import StoreError

        raise StoreError("snapshot database failed (OperationalError)")


def test_a_retention_that_fails_is_counted_and_logged_as_such(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from contextwright.observe import Retention

    recorder = SnapshotRecorder(_PurgeFails(tmp_path / "snapshots.db"),
                                retention=Retention(max_count=1))
    builder = ContextBuilder(snapshots=recorder)
    for n in range(2):
        builder.build(BuildPlan.named("simple_qa"), Request(user_input=f"build {n}"))
        assert recorder.flush()
    stats = recorder.stats
    assert (stats.written, stats.dropped_sink_error, stats.purged) == (2, 0, 0)
    assert stats.purge_errors == 2
    failed = [r.getMessage() for r in caplog.records if r.name == "contextwright.observe"]
    # It lost no snapshot: it kept ones it should have removed.
    assert failed == ["snapshot retention failed (StoreError); the snapshots it would remove "
                      "are kept until it succeeds"]  # once a minute at most
    recorder.close()


class _GatedSqlite(SqliteSink):
    """SQLite whose first write waits for ``gate``: a sink falling behind a burst of builds."""

    def __init__(self, path: Path) -> None:
        import threading

        super().__init__(path)
        self.gate, self.waiting = threading.Event(), threading.Event()

    def write(self, snapshots: Any) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            self.gate.wait(10)
        super().write(snapshots)


def test_builds_dropped_for_a_full_queue_are_logged_not_only_counted(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sink = _GatedSqlite(tmp_path / "snapshots.db")
    recorder = SnapshotRecorder(sink, queue_size=1, batch_size=1)
    builder = ContextBuilder(snapshots=recorder)
    plan = BuildPlan.named("simple_qa")
    builder.build(plan, Request(user_input="first"))
    assert sink.waiting.wait(10)  # the writer holds the first build, waiting in the sink
    for n in range(4):  # one fits in the queue, three are dropped
        builder.build(plan, Request(user_input=f"burst {n}"))
    sink.gate.set()
    assert recorder.flush()
    assert recorder.stats.dropped_queue_full == 3
    full = [r for r in caplog.records if r.name == "contextwright.observe"]
    assert [r.getMessage() for r in full] == [
        "snapshot queue full (queue_size 1): 3 builds' snapshots dropped"]
    assert full[0].contextwright == {  # type: ignore[attr-defined]
        "event": "snapshot_queue_full", "dropped": 3}
    recorder.close()
