"""``AlertMonitor``: the two alerts of context-length monitoring, as log events and metrics.

* ``p95_window_share``: over a sliding window of recent builds of one plan, the 95th percentile
  of context tokens / model window passes ``threshold`` (80% by default). Raised once when it
  passes and again only after it fell back below, so a sustained state is one event, not one
  per build.
* ``never_cut_truncated``: a part the plan marks as never to be cut (``cuttable: false``: the
  system prompt, the user's message) was truncated or dropped. Raised every time. A build whose
  never-cut parts did not fit at all raised ``BudgetError``: that is ``budget_error``.

Each alert is logged on ``contextwright.observe.alerts`` (WARNING, with the structured event in
``extra["contextwright"]``), counted by the metrics given, and passed to ``on_alert``.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from contextwright.errors import InvalidInputError
from contextwright.observe.snapshot import Snapshot

logger = logging.getLogger("contextwright.observe.alerts")

AlertKind = Literal["p95_window_share", "never_cut_truncated", "budget_error", "truncation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Alert:
    """One alert."""

    kind: AlertKind
    """What happened."""
    plan: str
    """The plan of the build that raised it."""
    message: str
    """A line for people."""
    snapshot_id: str
    """The build that raised it."""
    at: float
    """Its time."""
    value: float = 0.0
    """The measured value (a share, or a count of items)."""
    threshold: float = 0.0
    """The limit it passed."""
    source: str | None = None
    """The source concerned, if one."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return asdict(self)


class AlertMetrics(Protocol):
    """Metrics that count alerts (``PrometheusMetrics``, ``OpenTelemetryMetrics``)."""

    def record_alert(self, alert: Alert) -> None:
        """Count one alert."""
        ...


class AlertMonitor:
    """A ``SnapshotObserver`` raising alerts; give it to ``SnapshotRecorder(observers=...)``.

    ``window_seconds`` is the sliding window of the p95 alert, which waits for ``min_builds``
    builds of a plan in it. ``any_truncation`` also raises ``truncation`` for every build that
    truncated or dropped anything for the budget (noisy under steady pressure; off by default,
    the metrics count those anyway).
    """

    def __init__(self, *, threshold: float = 0.8, window_seconds: float = 300.0,
                 min_builds: int = 20, any_truncation: bool = False,
                 metrics: Iterable[AlertMetrics] = (),
                 on_alert: Callable[[Alert], None] | None = None) -> None:
        if not 0 < threshold <= 1 or window_seconds <= 0 or min_builds < 1:
            raise InvalidInputError("threshold must be in (0, 1], window_seconds above 0, "
                                    "min_builds 1 or more")
        self.threshold = threshold
        self.window_seconds = window_seconds
        self.min_builds = min_builds
        self.any_truncation = any_truncation
        self._metrics = tuple(metrics)
        self._on_alert = on_alert
        self._shares: dict[str, deque[tuple[float, float]]] = defaultdict(deque)
        """Per plan, (time, share) of the builds in the sliding window, in arrival order."""
        self._sorted: dict[str, list[float]] = defaultdict(list)
        """The same shares, sorted: the p95 is read, not sorted again, on every build."""
        self._raised: set[str] = set()
        self._lock = threading.RLock()
        """One monitor may watch several recorders, each calling from its writer thread (and
        ``on_alert``, called under it, may read ``p95_share``)."""
        self.alerts: deque[Alert] = deque(maxlen=1000)
        """The most recent alerts (up to 1,000), oldest first."""

    def observe(self, snapshot: Snapshot) -> None:
        """Check one build (safe to call from the writer threads of several recorders)."""
        with self._lock:
            self._observe(snapshot)

    def _observe(self, snapshot: Snapshot) -> None:
        if snapshot.status == "budget_error":
            self._emit(Alert(kind="budget_error", plan=snapshot.plan, snapshot_id=snapshot.id,
                             at=snapshot.created_at, value=snapshot.total_tokens,
                             threshold=snapshot.available, message=(
                                 f"plan {snapshot.plan}: the parts that may not be cut need "
                                 f"{snapshot.total_tokens} tokens, {snapshot.available} are "
                                 "available")))
        else:
            self._check_p95(snapshot)
        self._check_never_cut(snapshot)
        if self.any_truncation:
            self._check_any_truncation(snapshot)

    def p95_share(self, plan: str) -> float:
        """The current p95 of tokens / window for ``plan`` over the sliding window."""
        with self._lock:
            return self._p95(plan)

    def _p95(self, plan: str) -> float:
        """``percentile(shares, 0.95)`` of the sorted shares (nearest rank)."""
        ordered = self._sorted[plan]
        if not ordered:
            return 0.0
        return ordered[max(1, math.ceil(0.95 * len(ordered))) - 1]

    def _check_p95(self, snapshot: Snapshot) -> None:
        recent, ordered = self._shares[snapshot.plan], self._sorted[snapshot.plan]
        recent.append((snapshot.created_at, snapshot.window_share))
        bisect.insort(ordered, snapshot.window_share)
        while recent and recent[0][0] < snapshot.created_at - self.window_seconds:
            _, share = recent.popleft()
            del ordered[bisect.bisect_left(ordered, share)]
        if len(recent) < self.min_builds:
            return
        p95 = self._p95(snapshot.plan)
        if p95 <= self.threshold:
            self._raised.discard(snapshot.plan)
            return
        if snapshot.plan in self._raised:
            return
        self._raised.add(snapshot.plan)
        self._emit(Alert(
            kind="p95_window_share", plan=snapshot.plan, snapshot_id=snapshot.id,
            at=snapshot.created_at, value=round(p95, 4), threshold=self.threshold,
            message=f"plan {snapshot.plan}: p95 context length is {p95:.0%} of the window over "
                    f"the last {len(recent)} builds (limit {self.threshold:.0%})"))

    def _check_never_cut(self, snapshot: Snapshot) -> None:
        for row in snapshot.sources:
            if row.get("cuttable", True):
                continue
            cut = int(row["truncated"]) + int(row["dropped"])
            if cut:
                self._emit(Alert(
                    kind="never_cut_truncated", plan=snapshot.plan, snapshot_id=snapshot.id,
                    at=snapshot.created_at, value=cut, source=str(row["source"]),
                    message=f"plan {snapshot.plan}: {cut} item(s) of never-cut source "
                            f"{row['source']} were truncated or dropped"))

    def _check_any_truncation(self, snapshot: Snapshot) -> None:
        # A run of unread items is one decision with its ``count``: items are counted, as the
        # report's rows and the metrics' ``cut_counts`` count them, not decisions.
        cut = sum(int(d.get("count", 1)) for d in snapshot.decisions if _cut_for_budget(d))
        if cut:
            self._emit(Alert(kind="truncation", plan=snapshot.plan, snapshot_id=snapshot.id,
                             at=snapshot.created_at, value=cut,
                             message=f"plan {snapshot.plan}: {cut} item(s) cut for the budget"))

    def _emit(self, alert: Alert) -> None:
        self.alerts.append(alert)
        logger.warning("alert %s: %s", alert.kind, alert.message,
                       extra={"contextwright": {"event": "alert", **alert.to_dict()}})
        for metrics in self._metrics:
            metrics.record_alert(alert)
        if self._on_alert is not None:
            self._on_alert(alert)


def _cut_for_budget(decision: Mapping[str, Any]) -> bool:
    """Truncated, or dropped because it did not fit (not as a duplicate or a conflict)."""
    action = decision["action"]
    return action == "truncated" or (
        action == "dropped" and str(decision["reason"]).startswith("budget"))
