"""``/metrics`` shows what became of the recorded builds, lost ones included."""

from __future__ import annotations

from pathlib import Path

import pytest
from observe_helpers import pressured
from prometheus_client.parser import text_string_to_metric_families

from contextwright import ContextBuilder
from contextwright.errors import ContextwrightError
from contextwright.observe import PrometheusMetrics, SnapshotRecorder, SqliteSink


def _outcomes(metrics: PrometheusMetrics) -> dict[str, float]:
    """``contextwright_snapshots_total`` by outcome, parsed from the exposition text."""
    text = metrics.exposition().decode("utf-8")
    return {sample.labels["outcome"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "contextwright_snapshots_total"}


def test_the_exposition_counts_written_and_dropped_builds(tmp_path: Path) -> None:
    metrics = PrometheusMetrics()
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), observers=[metrics])
    metrics.watch_recorder(lambda: recorder.stats)
    builder = ContextBuilder(snapshots=recorder)
    plan, request = pressured()
    for _ in range(3):
        builder.build(plan, request)
    assert recorder.flush()
    recorder.close()
    builder.build(plan, request)  # after close: lost, and counted as such
    outcomes = _outcomes(metrics)
    assert outcomes["submitted"] == 3 and outcomes["written"] == 3
    assert outcomes["dropped_closed"] == 1
    assert outcomes["dropped_queue_full"] == 0 and outcomes["dropped_sink_error"] == 0


def test_one_metrics_object_watches_one_recorder(tmp_path: Path) -> None:
    metrics = PrometheusMetrics()
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"))
    metrics.watch_recorder(lambda: recorder.stats)
    with pytest.raises(ContextwrightError, match="already watches"):
        metrics.watch_recorder(lambda: recorder.stats)
    recorder.close()
