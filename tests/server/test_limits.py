"""Limits: payload size, messages per call, per-tenant rate shared through Redis, build time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS, Running, write_keys

from contextwright.client import Client, RateLimited
from contextwright.server import Limits

AUTH = {"Authorization": f"Bearer {KEYS['acme']}"}


def _http(running: Running, key: str = KEYS["acme"]) -> httpx.Client:
    return httpx.Client(base_url=running.url, headers={"Authorization": f"Bearer {key}"})


def test_a_body_over_the_limit_is_413_declared_or_streamed(
        tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}", limits=Limits(max_body_bytes=2000))
    big = b'{"user_input": "' + b"x" * 3000 + b'"}'

    def chunks() -> Iterator[bytes]:
        yield from (big[i:i + 500] for i in range(0, len(big), 500))

    with _http(running) as http:
        declared = http.post("/v1/build", content=big,
                             headers={"Content-Type": "application/json"})
        streamed = http.post("/v1/build", content=chunks(),
                             headers={"Content-Type": "application/json"})
        small = http.post("/v1/build", json={"user_input": "x" * 100})
    for answer in (declared, streamed):
        assert answer.status_code == 413
        assert answer.json()["type"] == "urn:contextwright:problem:payload-too-large"
        assert "xxxx" not in answer.text
    assert "chunked" in streamed.request.headers.get("transfer-encoding", "")
    assert small.status_code == 200


def test_too_many_messages_in_one_call_is_413(tmp_path: Path,
                                              serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}", limits=Limits(max_messages=4))
    history = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    with _http(running) as http:
        built = http.post("/v1/build", json={"user_input": "x", "history": history})
        recorded = http.post("/v1/sessions/u/s/record", json={"messages": history})
        fits = http.post("/v1/build", json={"user_input": "x", "history": history[:4]})
    assert built.status_code == recorded.status_code == 413
    assert built.json()["max_messages"] == 4
    assert fits.status_code == 200


def test_the_rate_limit_is_shared_by_workers_through_redis(
        redis_url: str, serve_app: Callable[..., Running]) -> None:
    limits = Limits(requests_per_minute=3, burst=3)
    first = serve_app(redis_url, limits=limits)
    second = serve_app(redis_url, limits=limits)  # another worker on the same Redis
    with _http(first) as a, _http(second) as b, _http(first, KEYS["ac"]) as other:
        statuses = [a.get("/v1/sessions/u/s").status_code,
                    b.get("/v1/sessions/u/s").status_code,
                    a.get("/v1/sessions/u/s").status_code]
        assert statuses == [404, 404, 404]  # admitted (the session does not exist)
        refused = [b.get("/v1/sessions/u/s"), a.get("/v1/sessions/u/s")]
        assert other.get("/v1/sessions/u/s").status_code == 404  # another tenant's own limit
    for answer in refused:
        assert answer.status_code == 429
        assert answer.json()["type"] == "urn:contextwright:problem:rate-limited"
        assert 1 <= int(answer.headers["retry-after"]) <= 20  # one request comes back per 20 s


def test_a_tenants_own_rate_wins_and_the_client_reports_retry_after(
        tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    keys = write_keys(tmp_path / "keys.toml", {"acme": [KEYS["acme"]]},
                      extra="requests_per_minute = 2\n")
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}", keys=keys,
                        limits=Limits(requests_per_minute=1000, burst=2))
    with Client(running.url, api_key=KEYS["acme"], max_retry_wait=0.1) as client:
        client.prepare("u", "s", "one")
        client.prepare("u", "s", "two")
        with pytest.raises(RateLimited) as refused:
            client.prepare("u", "s", "three")
    assert refused.value.retry_after >= 1
    assert refused.value.status == 429


def test_a_build_over_the_time_limit_is_503_and_a_retry_stores_nothing_twice(
        tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}",
                        limits=Limits(build_timeout=0.001))
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i} " + "about the trip to Lisbon " * 40}
               for i in range(400)]
    with _http(running) as http:
        slow = http.post("/v1/build", json={"user_input": "What did we plan?",
                                            "history": history})
        assert slow.status_code == 503
        assert slow.json()["type"] == "urn:contextwright:problem:build-timeout"
        assert slow.headers["retry-after"] == "1"
        for _ in range(2):
            answer = http.post("/v1/sessions/u/s/prepare",
                               json={"text": "hello", "idempotency_key": "m1"})
            assert answer.status_code in (200, 503)
    generous = serve_app(running.config.store)
    with _http(generous) as http:
        assert http.get("/v1/sessions/u/s").json()["message_count"] == 1


def test_the_local_bucket_refills_at_the_sustained_rate() -> None:
    from contextwright.server.ratelimit import LocalRateLimiter, Rate

    now = [1000.0]
    limiter = LocalRateLimiter(clock=lambda: now[0])
    rate = Rate(requests_per_minute=60, burst=2)
    assert [limiter.acquire("acme", rate) for _ in range(2)] == [0.0, 0.0]
    assert limiter.acquire("acme", rate) == pytest.approx(1.0)
    assert limiter.acquire("other", rate) == 0.0  # tenants have their own buckets
    now[0] += 1.0
    assert limiter.acquire("acme", rate) == 0.0
    assert limiter.acquire("acme", rate) == pytest.approx(1.0)
    now[0] += 60.0  # a quiet spell refills the burst, no more
    waits = [limiter.acquire("acme", rate) for _ in range(3)]
    assert waits[:2] == [0.0, 0.0] and waits[2] == pytest.approx(1.0)
