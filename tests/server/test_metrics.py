"""``/metrics``: with ``--snapshots`` the service records every session build and serves the
builds' Prometheus metrics; without, it says what is missing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
from server_helpers import KEYS, Running

from contextwright.client import Client
from contextwright.observe.sinks import SqliteSink


def test_metrics_count_the_builds_and_snapshots_are_recorded(
        tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    sink = tmp_path / "snapshots.db"
    running = serve_app(f"sqlite:///{tmp_path / 'sessions.db'}", snapshots=f"sqlite:///{sink}")
    with Client(running.url, api_key=KEYS["acme"]) as client:
        client.prepare("nora", "trip", "What is the weather in Paris?")
        client.record("nora", "trip", assistant="Sunny.")
        client.prepare("nora", "trip", "And tomorrow?")
    body = ""
    for _ in range(50):  # the recorder writes and counts off the request path
        body = httpx.get(running.url + "/metrics").text
        if 'contextwright_builds_total{plan="chat",status="ok"} 2.0' in body:
            break
        time.sleep(0.1)
    assert 'contextwright_builds_total{plan="chat",status="ok"} 2.0' in body
    assert "contextwright_context_tokens_bucket" in body
    assert "nora" not in body and "Paris" not in body  # labels are plans and sources only
    snapshots = SqliteSink(sink).read()
    for _ in range(50):  # a build is counted before its snapshot's write has landed
        if len(snapshots) == 2:
            break
        time.sleep(0.1)
        snapshots = SqliteSink(sink).read()
    assert len(snapshots) == 2 and snapshots[-1].cache is not None
    # What became of the recorded builds, so an operator sees snapshots lost on the way too.
    written = 'contextwright_snapshots_total{outcome="written"} 2.0'
    for _ in range(50):
        body = httpx.get(running.url + "/metrics").text
        if written in body:
            break
        time.sleep(0.1)
    assert written in body
    assert 'contextwright_snapshots_total{outcome="dropped_queue_full"} 0.0' in body


def test_without_snapshots_metrics_is_a_problem_not_a_traceback(
        tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 'sessions.db'}")
    response = httpx.get(running.url + "/metrics")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "--snapshots" in response.json()["detail"]
