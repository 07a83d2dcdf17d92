"""Metrics (a real Prometheus registry, the real OpenTelemetry SDK in memory) and alerts."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from observe_helpers import pressured
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from contextwright import BudgetError, BuildPlan, ContextBuilder, Request
from contextwright.errors import InvalidInputError
from contextwright.observe import (
    Alert,
    AlertMonitor,
    OpenTelemetryMetrics,
    PrometheusMetrics,
    Snapshot,
    SnapshotRecorder,
    SqliteSink,
)
from contextwright.observe.metrics import cut_counts
from contextwright.observe.replay import snapshot_of


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value
            for s in registry.collect() for s in s.samples if s.name == name}


def _record_builds(tmp_path: Path, observers: list[object], builds: int = 3) -> Snapshot:
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), observers=observers)  # type: ignore[arg-type]
    builder = ContextBuilder(snapshots=recorder)
    plan, request = pressured()
    for _ in range(builds):
        builder.build(plan, request)
    with pytest.raises(BudgetError):
        builder.build(BuildPlan.named("chat").with_budget(window=512, reserved_output=256),
                      Request(user_input="word " * 600))
    assert recorder.flush()
    snapshot = recorder.sink.read()[0]
    recorder.close()
    return snapshot


def test_prometheus_metrics_count_builds_tokens_truncations_and_drops(tmp_path: Path) -> None:
    metrics = PrometheusMetrics()
    snap = _record_builds(tmp_path, [metrics])
    registry = metrics.registry
    assert _samples(registry, "contextwright_builds_total") == {
        (("plan", "tool_heavy"), ("status", "ok")): 3.0,
        (("plan", "chat"), ("status", "budget_error")): 1.0}
    assert _samples(registry, "contextwright_context_tokens_sum") == {
        (("plan", "tool_heavy"),): 3.0 * snap.total_tokens}
    drops = _samples(registry, "contextwright_drops_total")
    assert drops[(("plan", "tool_heavy"), ("source", "history"))] == 3 * 75
    history = _samples(registry, "contextwright_source_tokens_sum")
    assert history[(("plan", "tool_heavy"), ("source", "history"))] == 3 * next(
        r["tokens"] for r in snap.sources if r["source"] == "history")
    families = {f.name for f in text_string_to_metric_families(
        metrics.exposition().decode("utf-8"))}
    assert {"contextwright_context_tokens", "contextwright_drops",
            "contextwright_context_window_share"} <= families


def test_opentelemetry_emits_a_span_per_build_and_token_histograms(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    otel = OpenTelemetryMetrics(tracer_provider=tracer_provider, meter_provider=meter_provider)
    snap = _record_builds(tmp_path, [otel], builds=2)
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["context_build tool_heavy"] * 2 + ["context_build chat"]
    first = spans[0]
    assert first.attributes is not None
    assert first.attributes["gen_ai.usage.input_tokens"] == snap.total_tokens
    assert first.attributes["gen_ai.request.max_tokens"] == 512
    assert first.attributes["contextwright.plan.hash"] == snap.plan_hash
    assert first.attributes["contextwright.drops"] == 75
    assert first.end_time is not None and first.start_time is not None
    assert abs((first.end_time - first.start_time) / 1e6 - snap.build_ms) < 0.01
    assert spans[2].status.status_code == StatusCode.ERROR
    data = reader.get_metrics_data()
    assert data is not None
    points = {m.name: m.data.data_points for rm in data.resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics}
    (tokens,) = points["contextwright.context.tokens"]
    assert tokens.count == 2 and tokens.sum == 2 * snap.total_tokens
    assert tokens.attributes == {"contextwright.plan": "tool_heavy"}
    drops = {p.attributes["contextwright.source"]: p.value
             for p in points["contextwright.drops"]}
    assert drops["history"] == 2 * 75


def _at(snap: Snapshot, index: int, tokens: int) -> Snapshot:
    return replace(snap, id=f"s{index}", created_at=1000.0 + index, total_tokens=tokens)


def test_p95_above_80_percent_of_the_window_raises_one_alert_until_it_recovers(
        caplog: pytest.LogCaptureFixture) -> None:
    plan, request = pressured()
    base = snapshot_of(plan, request)  # window 4096
    prometheus = PrometheusMetrics()
    seen: list[Alert] = []
    monitor = AlertMonitor(window_seconds=60, min_builds=20, metrics=[prometheus],
                           on_alert=seen.append)
    for index in range(30):  # 2,500 tokens: 61% of the window
        monitor.observe(_at(base, index, 2500))
    assert seen == []
    caplog.set_level(logging.WARNING, "contextwright.observe.alerts")
    for index in range(30, 40):  # a third of the recent builds at 3,500: 85%
        monitor.observe(_at(base, index, 3500))
    assert [a.kind for a in seen] == ["p95_window_share"]
    assert seen[0].value == pytest.approx(3500 / 4096, abs=1e-4) and seen[0].threshold == 0.8
    event = caplog.records[-1].contextwright  # type: ignore[attr-defined]
    assert event["event"] == "alert" and event["kind"] == "p95_window_share"
    assert _samples(prometheus.registry, "contextwright_alerts_total") == {
        (("kind", "p95_window_share"), ("plan", "tool_heavy")): 1.0}
    for index in range(40, 200):  # the old builds leave the 60-second window
        monitor.observe(_at(base, index, 2500))
    assert monitor.p95_share("tool_heavy") < 0.8
    for index in range(200, 260):
        monitor.observe(_at(base, index, 3600))
    assert [a.kind for a in seen] == ["p95_window_share"] * 2


def test_a_truncated_never_cut_part_and_a_budget_error_raise_alerts(tmp_path: Path) -> None:
    seen: list[Alert] = []
    monitor = AlertMonitor(on_alert=seen.append)
    _record_builds(tmp_path, [monitor], builds=1)
    assert [a.kind for a in seen] == ["budget_error"]
    plan, request = pressured()
    snap = snapshot_of(plan, request)
    # The builder refuses to cut these parts (it raises BudgetError instead), so a cut one is a
    # bug elsewhere, which is exactly what the alert is for: feed the monitor such a record.
    rows = tuple({**row, "truncated": 1} if row["source"] == "user" else row
                 for row in snap.sources)
    monitor.observe(replace(snap, sources=rows))
    assert seen[-1].kind == "never_cut_truncated" and seen[-1].source == "user"
    noisy = AlertMonitor(any_truncation=True, on_alert=seen.append)
    noisy.observe(snap)
    assert seen[-1].kind == "truncation" and seen[-1].value == 75
    with pytest.raises(InvalidInputError):
        AlertMonitor(threshold=1.5)


def test_the_truncation_alert_counts_every_item_of_an_unread_run() -> None:
    history = [{"role": role, "content": f"{role} {index} " + "word " * 50}
               for index in range(300) for role in ("user", "assistant")]
    snap = snapshot_of(BuildPlan.named("chat"), Request(user_input="x", history=history),
                       tokenizer="o200k_base")
    runs = [d for d in snap.decisions if str(d["key"]).endswith(".*")]
    assert runs and all(int(d["count"]) > 1 for d in runs)  # the case under test
    seen: list[Alert] = []
    AlertMonitor(any_truncation=True, on_alert=seen.append).observe(snap)
    row = next(r for r in snap.sources if r["source"] == "history")
    _, dropped = cut_counts(snap)
    assert seen[-1].value == row["dropped"] + row["truncated"] == dropped["history"]
    assert f"{row['dropped']} item(s)" in seen[-1].message


def test_a_failing_observer_is_counted_and_the_snapshot_still_written(tmp_path: Path) -> None:
    class Broken:
        def observe(self, snapshot: Snapshot) -> None:
            raise RuntimeError("bug in a metrics exporter")

    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), observers=[Broken()])
    ContextBuilder(snapshots=recorder).build(*pressured())
    assert recorder.flush()
    assert recorder.stats.observer_errors == 1 and recorder.stats.written == 1
    recorder.close()
