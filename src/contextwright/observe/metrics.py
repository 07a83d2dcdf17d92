"""Metrics of builds: a Prometheus exposition and OpenTelemetry spans and instruments.

Both are ``SnapshotObserver``s (they run on the recorder's writer thread, never on the request
path) and both count alerts (``AlertMonitor(metrics=...)``). ``prometheus_client`` and the
OpenTelemetry API are optional extras (``observe-prometheus``, ``observe-otel``), imported when
a metrics object is made. OpenTelemetry attributes use the GenAI semantic conventions' names
where one exists (``gen_ai.usage.input_tokens``, ``gen_ai.request.max_tokens``,
``gen_ai.conversation.id``, ``gen_ai.operation.name``) and ``contextwright.*`` otherwise.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from contextwright.errors import ContextwrightError
from contextwright.observe.alerts import Alert
from contextwright.observe.snapshot import Snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from contextwright.observe.recorder import RecorderStats

TOKEN_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072,
                 262144, 524288, 1048576)
"""Histogram buckets for token counts: powers of two up to a million-token window."""
SHARE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)
"""Buckets for tokens / window."""


def cut_counts(snapshot: Snapshot) -> tuple[Counter[str], Counter[str]]:
    """Truncated items and drops per source (items of unread runs counted one by one).

    An item is counted once however many times it was cut (a record written before a build
    merged its cuts holds one decision per cut).
    """
    truncated: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    cut: set[tuple[str, str]] = set()
    for d in snapshot.decisions:
        if d["action"] == "truncated":
            item = (str(d["source"]), str(d["key"]))
            if item not in cut:
                cut.add(item)
                truncated[item[0]] += 1
        elif d["action"] in ("dropped", "deduplicated", "conflict"):
            dropped[str(d["source"])] += int(d.get("count", 1))
    return truncated, dropped


class PrometheusMetrics:
    """Build metrics in a ``prometheus_client`` registry (a new one unless given).

    ``contextwright_context_tokens`` and ``contextwright_context_window_share`` (histograms by
    plan), ``contextwright_source_tokens`` (by plan and source), ``contextwright_builds_total``
    (by plan and status), ``contextwright_truncations_total`` / ``contextwright_drops_total``
    (by plan and source), ``contextwright_build_seconds`` and ``contextwright_alerts_total``
    (by plan and kind). ``exposition()`` is the text a ``/metrics`` endpoint serves.
    ``watch_recorder`` adds what became of the recorded builds: an observer only sees the
    snapshots that were written, so builds lost on the way (a full queue, a failing sink)
    would otherwise show nowhere an operator looks.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 namespace: str = "contextwright") -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError as exc:
            raise ContextwrightError("PrometheusMetrics needs prometheus_client: pip install "
                                     "'contextwright[observe-prometheus]'") from exc
        self.registry = registry if registry is not None else CollectorRegistry()
        self._namespace = namespace
        self._recorder_stats: Callable[[], RecorderStats] | None = None
        ns, reg = namespace, self.registry
        self.context_tokens = Histogram("context_tokens", "Context tokens per build",
                                        ["plan"], namespace=ns, registry=reg,
                                        buckets=TOKEN_BUCKETS)
        self.window_share = Histogram("context_window_share", "Context tokens / model window",
                                      ["plan"], namespace=ns, registry=reg, buckets=SHARE_BUCKETS)
        self.source_tokens = Histogram("source_tokens", "Tokens a source used in a build",
                                       ["plan", "source"], namespace=ns, registry=reg,
                                       buckets=TOKEN_BUCKETS)
        self.builds = Counter("builds", "Builds recorded", ["plan", "status"], namespace=ns,
                              registry=reg)
        self.truncations = Counter("truncations", "Items truncated to fit", ["plan", "source"],
                                   namespace=ns, registry=reg)
        self.drops = Counter("drops", "Items left out", ["plan", "source"], namespace=ns,
                             registry=reg)
        self.build_seconds = Histogram("build_seconds", "Build wall time", ["plan"],
                                       namespace=ns, registry=reg)
        self.alerts = Counter("alerts", "Alerts raised", ["plan", "kind"], namespace=ns,
                              registry=reg)

    def observe(self, snapshot: Snapshot) -> None:
        """Count one build."""
        plan = snapshot.plan
        self.builds.labels(plan, snapshot.status).inc()
        self.build_seconds.labels(plan).observe(snapshot.build_ms / 1000)
        if snapshot.status == "ok":
            self.context_tokens.labels(plan).observe(snapshot.total_tokens)
            self.window_share.labels(plan).observe(snapshot.window_share)
            for row in snapshot.sources:
                self.source_tokens.labels(plan, str(row["source"])).observe(int(row["tokens"]))
        truncated, dropped = cut_counts(snapshot)
        for source, count in truncated.items():
            self.truncations.labels(plan, source).inc(count)
        for source, count in dropped.items():
            self.drops.labels(plan, source).inc(count)

    def record_alert(self, alert: Alert) -> None:
        """Count one alert."""
        self.alerts.labels(alert.plan, alert.kind).inc()

    def watch_recorder(self, stats: Callable[[], RecorderStats]) -> None:
        """Expose a recorder's counts (``SnapshotRecorder.stats``), read at each scrape.

        ``contextwright_snapshots_total`` by ``outcome``: submitted, written, dropped (queue
        full, closed, sink error), capture, observer and purge errors, purged. One recorder per
        metrics object: a second call is a ``ContextwrightError``.
        """
        if self._recorder_stats is not None:
            raise ContextwrightError("PrometheusMetrics already watches a recorder")
        self._recorder_stats = stats
        self.registry.register(_RecorderCollector(stats, self._namespace))

    def exposition(self) -> bytes:
        """The Prometheus text format of the registry."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _RecorderCollector:
    """A custom collector: the recorder's counters as one Prometheus counter family."""

    def __init__(self, stats: Callable[[], RecorderStats], namespace: str) -> None:
        self._stats = stats
        self._name = f"{namespace}_snapshots"

    def collect(self) -> Iterator[Metric]:
        from dataclasses import asdict

        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self._name, "What became of the builds handed to the "
                                     "snapshot recorder", labels=["outcome"])
        for outcome, count in asdict(self._stats()).items():
            family.add_metric([outcome], count)
        yield family

    def describe(self) -> list[Metric]:
        """Nothing at registration: ``collect`` is not run before a scrape."""
        return []


class OpenTelemetryMetrics:
    """A span per build and histograms / counters, through the OpenTelemetry API.

    Spans (``context_build <plan>``) start and end at the build's own times. Instruments:
    ``contextwright.context.tokens`` (plan), ``contextwright.source.tokens`` (plan, source),
    ``contextwright.truncations`` / ``contextwright.drops`` (plan, source),
    ``contextwright.alerts`` (plan, kind). Providers default to the global ones.
    """

    def __init__(self, *, tracer_provider: TracerProvider | None = None,
                 meter_provider: MeterProvider | None = None) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError as exc:
            raise ContextwrightError("OpenTelemetryMetrics needs opentelemetry-api: pip "
                                     "install 'contextwright[observe-otel]'") from exc
        from contextwright import __version__

        self._tracer = trace.get_tracer("contextwright", __version__,
                                        tracer_provider=tracer_provider)
        meter = metrics.get_meter("contextwright", __version__, meter_provider=meter_provider)
        self._context_tokens = meter.create_histogram(
            "contextwright.context.tokens", unit="{token}", description="Context tokens per build")
        self._source_tokens = meter.create_histogram(
            "contextwright.source.tokens", unit="{token}", description="Tokens a source used")
        self._truncations = meter.create_counter(
            "contextwright.truncations", unit="{item}", description="Items truncated to fit")
        self._drops = meter.create_counter(
            "contextwright.drops", unit="{item}", description="Items left out")
        self._alerts = meter.create_counter(
            "contextwright.alerts", unit="{alert}", description="Alerts raised")

    def observe(self, snapshot: Snapshot) -> None:
        """Emit the build's span and record its measurements."""
        self._span(snapshot)
        plan = {"contextwright.plan": snapshot.plan}
        if snapshot.status == "ok":
            self._context_tokens.record(snapshot.total_tokens, plan)
            for row in snapshot.sources:
                self._source_tokens.record(int(row["tokens"]), {
                    **plan, "contextwright.source": str(row["source"])})
        truncated, dropped = cut_counts(snapshot)
        for source, count in truncated.items():
            self._truncations.add(count, {**plan, "contextwright.source": source})
        for source, count in dropped.items():
            self._drops.add(count, {**plan, "contextwright.source": source})

    def _span(self, snapshot: Snapshot) -> None:
        from opentelemetry.trace import Status, StatusCode

        end = int(snapshot.created_at * 1e9)
        start = end - int(snapshot.build_ms * 1e6)
        span = self._tracer.start_span(f"context_build {snapshot.plan}", start_time=start,
                                       attributes=span_attributes(snapshot))
        if snapshot.status != "ok":
            span.set_status(Status(StatusCode.ERROR, snapshot.error or snapshot.status))
        span.end(end_time=end)

    def record_alert(self, alert: Alert) -> None:
        """Count one alert."""
        self._alerts.add(1, {"contextwright.plan": alert.plan,
                             "contextwright.alert": alert.kind})


def span_attributes(snapshot: Snapshot) -> dict[str, Any]:
    """Attributes of a build's span (GenAI names where they exist)."""
    budget = snapshot.plan_spec.get("budget", {})
    truncated, dropped = cut_counts(snapshot)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "context_build",
        "gen_ai.usage.input_tokens": snapshot.total_tokens,
        "gen_ai.request.max_tokens": int(budget.get("reserved_output", 0)),
        "contextwright.snapshot.id": snapshot.id,
        "contextwright.plan": snapshot.plan,
        "contextwright.plan.hash": snapshot.plan_hash,
        "contextwright.status": snapshot.status,
        "contextwright.window": snapshot.window,
        "contextwright.available_tokens": snapshot.available,
        "contextwright.tokenizer": snapshot.tokenizer,
        "contextwright.truncations": sum(truncated.values()),
        "contextwright.drops": sum(dropped.values()),
    }
    if snapshot.session is not None:
        attributes["gen_ai.conversation.id"] = snapshot.session["session_id"]
    if snapshot.mode is not None:
        attributes["contextwright.mode"] = snapshot.mode
    if snapshot.route is not None:
        attributes["contextwright.route.basis"] = str(snapshot.route.get("basis", ""))
    return attributes
