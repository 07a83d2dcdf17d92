"""One ``AlertMonitor`` given to several recorders sees each build from its recorder's writer
thread: it must neither fail nor miss alerts when those threads call it at once, and its p95
over the sliding window is the nearest-rank percentile of the builds in it. Real builds."""

from __future__ import annotations

import random
import threading
from dataclasses import replace

from contextwright import BuildPlan, Request
from contextwright.observe import AlertMonitor, Snapshot
from contextwright.observe.query import percentile
from contextwright.observe.replay import snapshot_of


def _template() -> Snapshot:
    return snapshot_of(BuildPlan.named("chat"), Request(user_input="where is my order?"))


def test_a_monitor_shared_by_writer_threads_counts_every_build() -> None:
    template = _template()
    alerts: list[str] = []
    monitor = AlertMonitor(min_builds=1, threshold=0.5, on_alert=lambda a: alerts.append(a.kind))
    failures: list[str] = []

    def writer(thread: int) -> None:
        for i in range(4000):
            # Every build uses 90% of its window: the p95 alert is due once, and only once.
            built = replace(template, id=f"{thread}-{i}", created_at=1000.0 + i / 1000,
                            total_tokens=int(template.window * 0.9))
            try:
                monitor.observe(built)
            except Exception as exc:  # the recorder would count it and lose the build's alerts
                failures.append(repr(exc))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert alerts == ["p95_window_share"]
    assert monitor.p95_share("chat") == int(template.window * 0.9) / template.window


def test_the_p95_is_that_of_the_builds_in_the_sliding_window() -> None:
    template, shuffled = _template(), random.Random(7)
    monitor = AlertMonitor(min_builds=1, threshold=1.0, window_seconds=50.0)
    seen: list[tuple[float, float]] = []
    for i in range(600):
        at, tokens = 1000.0 + i * 0.5, shuffled.randrange(template.window + 1)
        monitor.observe(replace(template, id=str(i), created_at=at, total_tokens=tokens))
        seen.append((at, tokens / template.window))
        in_window = [share for when, share in seen if when >= at - 50.0]
        assert monitor.p95_share("chat") == percentile(in_window, 0.95), i
