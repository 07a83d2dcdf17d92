"""Fixtures for the store conformance suite: one ``backend`` per store, each in its own namespace.

Redis and PostgreSQL are the real servers on this machine (``.ci/run`` starts them). If one is
unreachable its tests FAIL, so CI can never pass by skipping them; set
``CONTEXTWRIGHT_SKIP_SERVICES=1`` to skip them instead (a laptop without the servers). Every test
gets a fresh namespace (a SQLite file, a random Redis key prefix, a random PostgreSQL schema) that
is removed afterwards. The contract suites run each backend twice: its sync store, and its async
store through ``BlockingStore`` (``async-…`` in the test ids), so one suite holds both kinds to
one contract.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_workers import Backend, StoreSpec

from contextwright.session import Store

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ("memory", "sqlite", "redis", "postgres")
ASYNC_BACKENDS = ("async-memory", "async-sqlite", "async-redis", "async-postgres")
"""Each backend's async store, driven through ``BlockingStore``."""
CONTRACT_MODULES = frozenset(("test_store_conformance", "test_store_conditional_writes",
                              "test_store_dict_keys", "test_store_legacy_ids"))
"""The store contract: run over the async stores too. The manager's own race tests drive a sync
manager and run on the sync stores (``test_async_manager`` races the async manager itself)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        contract = metafunc.module.__name__.rpartition(".")[2] in CONTRACT_MODULES
        metafunc.parametrize("backend", BACKENDS + ASYNC_BACKENDS if contract else BACKENDS,
                             indirect=True)


def _service_or_fail(name: str, probe: Callable[[], object]) -> None:
    try:
        probe()
    except Exception as exc:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip(f"{name} unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
        pytest.fail(f"{name} unreachable ({type(exc).__name__}: {exc}); start it (.ci/run does) "
                    "or set CONTEXTWRIGHT_SKIP_SERVICES=1 to skip", pytrace=False)


def _redis_backend(driver: str) -> Iterator[Backend]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    _service_or_fail("Redis", client.ping)
    prefix = f"cwtest-{uuid.uuid4().hex}"
    yield Backend(name="redis", spec=StoreSpec(kind="redis", target=REDIS_URL,
                                               options={"prefix": prefix}, driver=driver),
                  native_ttl=True, ttl=2.0)
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()


def _postgres_backend(driver: str) -> Iterator[Backend]:
    import psycopg

    holder: list[psycopg.Connection[Any]] = []
    _service_or_fail("PostgreSQL", lambda: holder.append(
        psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3)))
    schema = f"cwtest_{uuid.uuid4().hex}"
    yield Backend(name="postgres", spec=StoreSpec(kind="postgres", target=POSTGRES_DSN,
                                                  options={"schema": schema}, driver=driver))
    with holder[0] as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    # ``name`` is the kind for both drivers, so tests that reach into a backend work on both.
    name = request.param.removeprefix("async-")
    driver = "async" if request.param.startswith("async-") else "sync"
    if name == "memory":
        source: Iterator[Backend] = iter([Backend(name=name, spec=StoreSpec(
            kind="memory", driver=driver))])
    elif name == "sqlite":
        spec = StoreSpec(kind="sqlite", target=str(tmp_path / "sessions.db"), driver=driver)
        source = iter([Backend(name=name, spec=spec)])
    elif name == "redis":
        source = _redis_backend(driver)
    else:
        source = _postgres_backend(driver)
    item = next(source)
    yield item
    for store in item.opened:
        store.close()
    next(source, None)


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.make()


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh PostgreSQL schema name, dropped (with whatever a test made in it) afterwards."""
    import psycopg

    name = f"cwtest_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def prefix() -> Iterator[str]:
    """A fresh Redis key prefix; every key under it is deleted afterwards."""
    import redis

    name = f"cwtest-{uuid.uuid4().hex}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{name}:*", count=1000):
        client.delete(key)
    client.close()
