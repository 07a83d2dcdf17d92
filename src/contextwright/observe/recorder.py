"""``SnapshotRecorder``: takes each build off the request path and writes its snapshot.

The request path does only this: time the build, copy the request's lists (references), and put
one record on a bounded queue without waiting. A writer thread turns records into snapshots,
hands them to the observers (metrics, alerts) and writes them to the sink in batches. A full
queue drops the record; a batch the sink refuses is written again one snapshot at a time, so a
record the sink cannot take loses only itself (an unreachable sink loses the batch); a build
recorded after ``close`` is dropped too. Losses are counted (``stats``) and logged, and never
slow or fail a build. Retention (age, count) is applied by the writer thread every
``Retention.every`` writes, on ``flush`` and on ``close``.
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, is_dataclass
from typing import Any, Protocol

from contextwright.core.final import FinalContext
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.errors import (
    BudgetError,
    ConfigurationError,
    InvalidInputError,
    StoreUnavailable,
)
from contextwright.observe.sinks import SnapshotSink
from contextwright.observe.snapshot import (
    BuildRecord,
    Hasher,
    Snapshot,
    capture,
    deployment_hasher,
    frozen_request,
)

logger = logging.getLogger("contextwright.observe")

LOG_EVERY_SECONDS = 60.0
"""A failing sink is logged at most this often (with the count since the last line)."""


class SnapshotObserver(Protocol):
    """Sees every snapshot on the writer thread, before the sink does (metrics, alerts)."""

    def observe(self, snapshot: Snapshot) -> None:
        """Take one snapshot into account; an exception is counted, never propagated."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """How long snapshots are kept: by age, by count, or both."""

    max_age_seconds: float | None = None
    """Snapshots older than this are removed."""
    max_count: int | None = None
    """Only the newest this many are kept."""
    every: int = 200
    """Apply it after this many writes (and on ``flush`` and ``close``)."""

    def __post_init__(self) -> None:
        """Refuse limits that mean nothing."""
        if self.max_age_seconds is not None and self.max_age_seconds <= 0:
            raise InvalidInputError("retention max_age_seconds must be above 0")
        if self.max_count is not None and self.max_count < 0:
            raise InvalidInputError("retention max_count must be 0 or more")
        if self.every < 1:
            raise InvalidInputError("retention every must be 1 or more")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecorderStats:
    """What became of the builds handed to a recorder."""

    submitted: int
    """Builds put on the queue."""
    written: int
    """Snapshots the sink accepted."""
    dropped_queue_full: int
    """Builds dropped because the queue was full."""
    dropped_closed: int
    """Builds recorded after ``close`` (a request still running at shutdown): not written."""
    dropped_sink_error: int
    """Snapshots lost because the sink raised."""
    capture_errors: int
    """Builds whose snapshot could not be made (e.g. a request that is not JSON)."""
    observer_errors: int
    """Exceptions raised by observers."""
    purged: int
    """Snapshots removed by retention."""
    purge_errors: int
    """Retention runs the sink refused: the snapshots they would remove are kept (none lost)."""


class _Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values = dict.fromkeys(RecorderStats.__dataclass_fields__, 0)

    def add(self, name: str, amount: int = 1) -> None:
        with self.lock:
            self.values[name] += amount


class _Flush:
    """A marker on the queue: set when everything before it is written."""

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()


class _Writer:
    """The state one recorder and all its labelled views share."""

    def __init__(self, sink: SnapshotSink, *, redact: bool, hasher: Hasher, queue_size: int,
                 batch_size: int, retention: Retention | None,
                 observers: tuple[SnapshotObserver, ...]) -> None:
        from contextwright import __version__

        self.sink = sink
        self.redact = redact
        self.hasher = hasher
        self.batch_size = batch_size
        self.retention = retention
        self.observers = observers
        self.version = __version__
        self.queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self.counters = _Counters()
        self.closed = False
        self._accepting = threading.Lock()
        """Held while a build is put on the queue and while ``close`` marks the recorder
        closed: no build lands behind the writer's stop, where nothing would ever write it."""
        self._told_closed = False
        self.finished = False
        """The writer thread has ended (after a stop, or a failure)."""
        self.abandoned = False
        """``close`` stopped waiting for the writer, which then closes the sink itself."""
        self._closing = threading.Lock()
        self._since_purge = 0
        self._last_log = 0.0
        self._unlogged = 0
        self._last_purge_log = 0.0
        self._logged_full = 0
        """``dropped_queue_full`` as of the last line that logged it."""
        self._last_full_log = 0.0
        self.thread = threading.Thread(target=self._run, name="cw-snapshots", daemon=True)
        self.thread.start()
        atexit.register(self.close, 2.0)

    def submit(self, record: BuildRecord) -> None:
        with self._accepting:
            if self.closed:
                self.drop_closed()
                return
            try:
                self.queue.put_nowait(record)
            except queue.Full:
                self.counters.add("dropped_queue_full")
                return
            self.counters.add("submitted")

    def drop_closed(self) -> None:
        """Count a build recorded after ``close``; the first one is logged."""
        self.counters.add("dropped_closed")
        with self.counters.lock:
            first, self._told_closed = not self._told_closed, True
        if first:
            logger.warning("a build was recorded after the recorder was closed; its snapshot "
                           "is dropped (recorder.stats.dropped_closed counts them)",
                           extra={"contextwright": {"event": "snapshot_recorded_after_close"}})

    def _run(self) -> None:
        try:
            while True:
                batch = [self.queue.get()]
                while batch[0] is not _STOP and len(batch) < self.batch_size:
                    try:
                        batch.append(self.queue.get_nowait())
                    except queue.Empty:
                        break
                if self._handle(batch):  # a stop on its own still applies retention
                    return
        finally:
            with self._closing:
                self.finished = True
                if self.abandoned:  # ``close`` gave up waiting: the sink is ours to close
                    self.sink.close()

    def _handle(self, batch: list[object]) -> bool:
        """Write one batch; True when it held the stop marker."""
        snapshots: list[Snapshot] = []
        flushes: list[_Flush] = []
        stop = False
        for item in batch:
            if isinstance(item, BuildRecord):
                # Hand the interpreter back between snapshots: a build waiting for it should
                # not wait out a whole switch interval behind this thread.
                time.sleep(0)
                snapshot = self._capture(item)
                if snapshot is not None:
                    snapshots.append(snapshot)
            elif isinstance(item, _Flush):
                flushes.append(item)
            elif item is _STOP:
                stop = True
        self._write(snapshots)
        self._log_queue_full()
        if flushes or stop:  # a flush or close leaves the sink as retention wants it
            self._apply_retention(force=True)
        for flush in flushes:
            flush.done.set()
        return stop

    def _capture(self, record: BuildRecord) -> Snapshot | None:
        try:
            snapshot = capture(record, redact=self.redact, library_version=self.version,
                               hasher=self.hasher)
            if not self.redact:  # caller data: one that is not JSON must not sink the batch
                json.dumps(snapshot.request, allow_nan=False)
        except Exception:  # a record that cannot be serialised must not stop the others
            self.counters.add("capture_errors")
            logger.warning("a build's snapshot could not be made", exc_info=True,
                           extra={"contextwright": {"event": "snapshot_capture_failed"}})
            return None
        for observer in self.observers:
            try:
                observer.observe(snapshot)
            except Exception:
                self.counters.add("observer_errors")
                logger.warning("a snapshot observer failed", exc_info=True,
                               extra={"contextwright": {"event": "snapshot_observer_failed"}})
        return snapshot

    def _write(self, snapshots: list[Snapshot]) -> None:
        if not snapshots:
            return
        time.sleep(0)
        try:
            self.sink.write(snapshots)
        except Exception as exc:
            written = self._write_one_by_one(snapshots, exc)
        else:
            written = len(snapshots)
        self.counters.add("written", written)
        self._since_purge += written
        if self.retention is not None and self._since_purge >= self.retention.every:
            self._apply_retention(force=True)

    def _write_one_by_one(self, snapshots: list[Snapshot], failure: Exception) -> int:
        """Write a batch the sink refused one snapshot at a time; how many were written.

        One record the sink cannot take (text its database refuses) then costs only itself,
        not the builds batched with it. A sink that is unreachable (``StoreUnavailable``) is
        not asked again for each one: the rest of the batch is dropped at once.
        """
        written = 0
        for at, snapshot in enumerate(snapshots):
            if len(snapshots) == 1 or isinstance(failure, StoreUnavailable):
                lost = len(snapshots) - at
                self.counters.add("dropped_sink_error", lost)
                self._log_sink_failure(failure, lost)
                break
            try:
                self.sink.write([snapshot])
            except Exception as exc:
                failure = exc
                self.counters.add("dropped_sink_error")
                self._log_sink_failure(exc, 1)
                continue
            written += 1
        return written

    def _log_queue_full(self) -> None:
        """Log the builds dropped for a full queue since the last line said so.

        At most every ``LOG_EVERY_SECONDS``: the request path only counts them, and the writer,
        whom the queue waits for, logs them after each batch.
        """
        with self.counters.lock:
            dropped = self.counters.values["dropped_queue_full"]
        now = time.monotonic()
        if dropped == self._logged_full or (
                self._last_full_log and now - self._last_full_log < LOG_EVERY_SECONDS):
            return
        new, self._logged_full, self._last_full_log = dropped - self._logged_full, dropped, now
        logger.warning("snapshot queue full (queue_size %d): %d builds' snapshots dropped",
                       self.queue.maxsize, new, extra={"contextwright": {
                           "event": "snapshot_queue_full", "dropped": new}})

    def _log_sink_failure(self, exc: Exception, lost: int) -> None:
        self._unlogged += lost
        now = time.monotonic()
        if now - self._last_log < LOG_EVERY_SECONDS and self._last_log:
            return
        logger.warning("snapshot sink failed (%s); %d snapshots dropped", type(exc).__name__,
                       self._unlogged, extra={"contextwright": {
                           "event": "snapshot_sink_failed", "error": type(exc).__name__,
                           "dropped": self._unlogged}})
        self._last_log, self._unlogged = now, 0

    def _apply_retention(self, *, force: bool) -> None:
        retention = self.retention
        if retention is None or not (force or self._since_purge >= retention.every):
            return
        self._since_purge = 0
        older_than = (time.time() - retention.max_age_seconds
                      if retention.max_age_seconds is not None else None)
        try:
            removed = self.sink.purge(older_than=older_than, keep_last=retention.max_count)
        except Exception as exc:
            self._retention_failed(exc)
            return
        self.counters.add("purged", removed)

    def _retention_failed(self, exc: Exception) -> None:
        """Count a purge the sink refused; logged at most every ``LOG_EVERY_SECONDS``.

        Apart from the write failures: it loses no snapshot, and was logged as one that
        dropped ``0 snapshots``, which read as a write failure that lost nothing.
        """
        self.counters.add("purge_errors")
        now = time.monotonic()
        if self._last_purge_log and now - self._last_purge_log < LOG_EVERY_SECONDS:
            return
        self._last_purge_log = now
        logger.warning("snapshot retention failed (%s); the snapshots it would remove are "
                       "kept until it succeeds", type(exc).__name__,
                       extra={"contextwright": {"event": "snapshot_retention_failed",
                                                "error": type(exc).__name__}})

    def flush(self, timeout: float | None) -> bool:
        if self.closed or not self.thread.is_alive():
            return not self.thread.is_alive()
        marker = _Flush()
        try:
            self.queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        return marker.done.wait(timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        with self._accepting:
            if self.closed:
                return
            self.closed = True
        atexit.unregister(self.close)
        try:
            self.queue.put(_STOP, timeout=timeout)
        except queue.Full:
            # The writer is still busy with what was queued: the stop follows it as soon as
            # there is room (nothing else is queued once closed), so the writer ends, applies
            # retention and closes the sink. Without it the writer waited for more forever,
            # holding the sink's file or connection open.
            threading.Thread(target=self.queue.put, args=(_STOP,), name="cw-snapshots-stop",
                             daemon=True).start()
            logger.warning("snapshot queue still full at close; the writer writes what is "
                           "queued, then closes the sink",
                           extra={"contextwright": {"event": "snapshot_close_late"}})
        self.thread.join(timeout)
        with self._closing:
            if not self.finished:
                self.abandoned = True
                # Closing the sink under a write would lose it: the writer closes it when
                # its last batch is written.
                logger.warning("snapshot writer still busy at close; it closes the sink when "
                               "done", extra={"contextwright": {"event": "snapshot_close_late"}})
                return
        self.sink.close()


class SnapshotRecorder:
    """Records one snapshot per build into ``sink``, off the request path; thread-safe.

    ``redact`` (default True) keeps hashes and sizes instead of texts, keyed by the snapshot
    key of ``fence_secret`` (default: ``CONTEXTWRIGHT_FENCE_SECRET``, read once, here; without
    one, the built-in key, and each snapshot says so). ``queue_size`` bounds
    the builds waiting to be written; when it is full a build's snapshot is dropped and
    counted. ``observers`` (``PrometheusMetrics``, ``OpenTelemetryMetrics``, ``AlertMonitor``)
    see each snapshot on the writer thread. ``labels`` go into every snapshot; ``labelled``
    makes a view with more labels that shares this recorder's queue, thread and sink.
    """

    def __init__(self, sink: SnapshotSink, *, redact: bool = True, queue_size: int = 1024,
                 batch_size: int = 64, retention: Retention | None = None,
                 observers: Iterable[SnapshotObserver] = (),
                 labels: Mapping[str, Any] | None = None,
                 fence_secret: str | bytes | None = None) -> None:
        if queue_size < 1 or batch_size < 1:
            raise InvalidInputError("queue_size and batch_size must be 1 or more")
        hasher = deployment_hasher(fence_secret)  # a blank secret fails here, not per build
        self._writer = _Writer(sink, redact=redact, hasher=hasher, queue_size=queue_size,
                               batch_size=batch_size, retention=retention,
                               observers=tuple(observers))
        self._labels: Mapping[str, Any] = _checked_labels(labels or {})

    @property
    def sink(self) -> SnapshotSink:
        """Where snapshots go."""
        return self._writer.sink

    @property
    def redact(self) -> bool:
        """Whether texts are kept as hashes and sizes only."""
        return self._writer.redact

    def labelled(self, **labels: Any) -> SnapshotRecorder:
        """A view of this recorder whose snapshots carry ``labels`` as well."""
        view = object.__new__(SnapshotRecorder)
        view._writer = self._writer
        view._labels = {**self._labels, **_checked_labels(labels)}
        return view

    def record_build(self, build: Callable[[], FinalContext], plan: BuildPlan,
                     request: Request, tokenizer: str) -> FinalContext:
        """Run ``build`` and hand its result (or its ``BudgetError``) to the writer thread.

        Returns what ``build`` returns and raises what it raises; recording never raises.
        """
        started = time.time()
        begin = time.perf_counter_ns()
        try:
            context = build()
        except BudgetError as error:
            self._submit(request, plan, None, error, started, time.perf_counter_ns() - begin,
                         tokenizer)
            raise
        self._submit(request, plan, context, None, started, time.perf_counter_ns() - begin,
                     tokenizer)
        return context

    def _submit(self, request: Request, plan: BuildPlan, context: FinalContext | None,
                error: BudgetError | None, started: float, build_ns: int,
                tokenizer: str) -> None:
        writer = self._writer
        if writer.closed:  # checked again as the record is queued: ``close`` may land between
            writer.drop_closed()
            return
        try:
            record = BuildRecord(
                request=frozen_request(request, with_history=not writer.redact), plan=plan,
                context=context, report=context.report if context else error.report
                if error else None, error=error, started=started, build_ns=build_ns,
                tokenizer=tokenizer, history_length=len(request.history), labels=self._labels)
        except Exception:  # never fail a build for its record
            writer.counters.add("capture_errors")
            return
        writer.submit(record)

    @property
    def stats(self) -> RecorderStats:
        """Counts so far."""
        with self._writer.counters.lock:
            return RecorderStats(**self._writer.counters.values)

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until every build handed over so far is written (or dropped); False on timeout."""
        return self._writer.flush(timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Write what is queued, apply retention, stop the thread and close the sink."""
        self._writer.close(timeout)


_BUILD_LABELS = frozenset(("mode", "route", "switch", "session"))
"""Labels a ``ContextManager`` sets; the snapshot turns them into its own fields."""


def _checked_labels(labels: Mapping[str, Any]) -> dict[str, Any]:
    """``labels`` as a dict; ``InvalidInputError`` when a caller's label is not JSON.

    A label named as a build's own field (``mode``, ``route``, ``switch``, ``session``) becomes
    that field, so it must have its form; another one cost every snapshot (it could not be
    made), or was written as a record no read could parse.
    """
    for name, value in labels.items():
        if name in _BUILD_LABELS:
            if value is not None and not _BUILD_LABEL_FORMS[name][0](value):
                raise InvalidInputError(
                    f"snapshot label {name!r} is the build's own field: "
                    f"{_BUILD_LABEL_FORMS[name][1]} (name a label of yours otherwise)")
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise InvalidInputError(f"snapshot label {name!r} is not JSON") from None
    return dict(labels)


def _is_record(value: object) -> bool:
    """A route or switch as the snapshot reads it: a mapping, or a dataclass instance."""
    return isinstance(value, Mapping) or (is_dataclass(value) and not isinstance(value, type))


def _is_session_key(value: object) -> bool:
    return all(isinstance(getattr(value, name, None), str) for name in ("user_id", "session_id"))


_BUILD_LABEL_FORMS: dict[str, tuple[Callable[[object], bool], str]] = {
    "mode": (lambda value: isinstance(value, str), "a mode name"),
    "route": (_is_record, "a RouteDecision"),
    "switch": (_is_record, "a ModeSwitch"),
    "session": (_is_session_key, "a SessionKey (user_id and session_id)"),
}


def as_recorder(snapshots: SnapshotRecorder | SnapshotSink | None,
                fence_secret: str | bytes | None = None) -> SnapshotRecorder | None:
    """A recorder for what a builder or manager was given: a recorder, a sink, or nothing.

    A recorder made for a sink hashes with the key of ``fence_secret`` (the builder's own
    secret; None: the deployment's); a recorder given keeps its own.
    """
    if snapshots is None or isinstance(snapshots, SnapshotRecorder):
        return snapshots
    if not callable(getattr(snapshots, "write", None)):
        # Taken as given, it failed every build's recording on the writer thread, logged only.
        hint = " (a URL or path: use open_sink(url))" if isinstance(snapshots, str) else ""
        raise ConfigurationError(
            f"snapshots must be a SnapshotSink or a SnapshotRecorder, not "
            f"{type(snapshots).__name__}{hint}")
    return SnapshotRecorder(snapshots, fence_secret=fence_secret)
