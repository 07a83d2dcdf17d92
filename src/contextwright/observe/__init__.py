"""See what the model saw: snapshots of builds, queries over them, diffs, views, metrics, alerts.

``SnapshotRecorder`` takes each build off the request path into a ``SnapshotSink`` (SQLite by
default, JSONL, Redis, PostgreSQL); ``summarize`` answers which sources waste tokens and which
items are cut; ``diff_snapshots`` compares two builds; ``render_html`` and ``print_snapshot``
show one; ``PrometheusMetrics``, ``OpenTelemetryMetrics`` and ``AlertMonitor`` watch them all.
This package reads the core's results and never changes a build.
"""

from contextwright.observe.alerts import Alert, AlertMonitor
from contextwright.observe.diff import SnapshotDiff, diff_snapshots
from contextwright.observe.html import render_html
from contextwright.observe.metrics import OpenTelemetryMetrics, PrometheusMetrics
from contextwright.observe.query import SnapshotSummary, summarize
from contextwright.observe.recorder import (
    RecorderStats,
    Retention,
    SnapshotObserver,
    SnapshotRecorder,
)
from contextwright.observe.replay import replay, snapshot_of
from contextwright.observe.sinks import (
    JsonlSink,
    SnapshotQuery,
    SnapshotSink,
    SqliteSink,
    open_sink,
)
from contextwright.observe.snapshot import Snapshot

__all__ = [
    "Alert",
    "AlertMonitor",
    "JsonlSink",
    "OpenTelemetryMetrics",
    "PrometheusMetrics",
    "RecorderStats",
    "Retention",
    "Snapshot",
    "SnapshotDiff",
    "SnapshotObserver",
    "SnapshotQuery",
    "SnapshotRecorder",
    "SnapshotSink",
    "SnapshotSummary",
    "SqliteSink",
    "diff_snapshots",
    "open_sink",
    "render_html",
    "replay",
    "snapshot_of",
    "summarize",
]

