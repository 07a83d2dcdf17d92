"""Fixtures for the observe tests: one ``sink`` per backend, each in its own namespace.

Redis and PostgreSQL are the real servers of this machine (``.ci/run`` starts them); as in the
store suite, an unreachable one FAILS its tests unless ``CONTEXTWRIGHT_SKIP_SERVICES=1``. Every
test gets a fresh namespace (a file, a random Redis prefix, a random PostgreSQL schema) that is
removed afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright.observe import JsonlSink, SnapshotSink, SqliteSink

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
SINKS = ("jsonl", "sqlite", "redis", "postgres")


def _service_or_fail(name: str, probe: Callable[[], object]) -> None:
    try:
        probe()
    except Exception as exc:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip(f"{name} unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
        pytest.fail(f"{name} unreachable ({type(exc).__name__}: {exc}); start it (.ci/run does) "
                    "or set CONTEXTWRIGHT_SKIP_SERVICES=1 to skip", pytrace=False)


def _redis_sink() -> Iterator[SnapshotSink]:
    import redis

    from contextwright.observe.sinks_redis import RedisSink

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    _service_or_fail("Redis", client.ping)
    prefix = f"cwtest-{uuid.uuid4().hex}"
    sink = RedisSink(REDIS_URL, prefix=prefix)
    yield sink
    sink.close()
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()


def _postgres_sink() -> Iterator[SnapshotSink]:
    import psycopg

    from contextwright.observe.sinks_postgres import PostgresSink

    holder: list[psycopg.Connection[Any]] = []
    _service_or_fail("PostgreSQL", lambda: holder.append(
        psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3)))
    schema = f"cwtest_{uuid.uuid4().hex}"
    sink = PostgresSink(POSTGRES_DSN, schema=schema)
    yield sink
    sink.close()
    with holder[0] as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=SINKS)
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SnapshotSink]:
    name = request.param
    if name == "jsonl":
        yield JsonlSink(tmp_path / "snapshots.jsonl")
    elif name == "sqlite":
        made = SqliteSink(tmp_path / "snapshots.db")
        yield made
        made.close()
    elif name == "redis":
        yield from _redis_sink()
    else:
        yield from _postgres_sink()


@pytest.fixture
def redis_prefix_url() -> Iterator[str]:
    """A Redis sink URL with a fresh prefix (for the CLI)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    _service_or_fail("Redis", client.ping)
    prefix = f"cwtest-{uuid.uuid4().hex}"
    yield f"{REDIS_URL}?prefix={prefix}"
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()
