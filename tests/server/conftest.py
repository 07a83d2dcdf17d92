"""Fixtures for the HTTP service: keys files, real stores, and the app served by real uvicorn.

Every store is a real one in its own namespace (a SQLite file, a random Redis key prefix, a
random PostgreSQL schema), removed afterwards. As in ``tests/stores``, an unreachable Redis or
PostgreSQL FAILS the test unless ``CONTEXTWRIGHT_SKIP_SERVICES=1``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from server_helpers import KEYS, Running, write_keys

from contextwright.server import BackgroundServer, Limits, ServerConfig, create_app

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    return write_keys(tmp_path / "keys.toml", {name: [key] for name, key in KEYS.items()})


def service_or_fail(name: str, probe: Callable[[], object]) -> None:
    try:
        probe()
    except Exception as exc:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip(f"{name} unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
        pytest.fail(f"{name} unreachable ({type(exc).__name__}: {exc}); start it (.ci/run does) "
                    "or set CONTEXTWRIGHT_SKIP_SERVICES=1 to skip", pytrace=False)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis store URL with a fresh key prefix; its keys are deleted afterwards."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    service_or_fail("Redis", client.ping)
    prefix = f"cwtest-{uuid.uuid4().hex}"
    yield f"{REDIS_URL}?prefix={prefix}"
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL store URL with a fresh schema; dropped afterwards."""
    import psycopg

    holder: list[psycopg.Connection[Any]] = []
    service_or_fail("PostgreSQL", lambda: holder.append(
        psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3)))
    schema = f"cwtest_{uuid.uuid4().hex}"
    separator = "&" if "?" in POSTGRES_DSN else "?"
    yield f"{POSTGRES_DSN}{separator}schema={schema}"
    with holder[0] as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each real store in turn."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def serve_app(keys_file: Path) -> Iterator[Callable[..., Running]]:
    """Start ``create_app(config)`` under real uvicorn on 127.0.0.1:<free port>."""
    servers: list[BackgroundServer] = []

    def start(store: str, *, keys: Path | None = None, limits: Limits | None = None,
              **options: Any) -> Running:
        config = ServerConfig(store=store, keys=str(keys or keys_file),
                              limits=limits or Limits(), keys_check_every=0.0, **options)
        server = BackgroundServer(create_app(config)).start()
        servers.append(server)
        return Running(url=server.url, config=config)

    yield start
    for server in reversed(servers):
        server.stop()
