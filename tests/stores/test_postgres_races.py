"""PostgreSQL writes racing each other, made deterministic (sync and async stores).

Each race is forced rather than hoped for: a second connection holds a lock (or an open write
transaction) that the store's statement must wait for, the test waits until PostgreSQL reports
that statement blocked by it, lets the competing call run to its end, and only then releases
the lock. So every run takes the interleaving that a busy server takes now and then. The
promises: an erase removes a session whole or leaves it whole, and of two first writes that both
expect no state yet exactly one wins.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from store_workers import StoreSpec, make_store

from contextwright.errors import ConflictError
from contextwright.session import SessionKey, StateWrite, Store
from contextwright.session.postgres_common import PostgresLayout, run_sql, write_conditions

POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
WAIT_LIMIT = 60.0
"""Seconds to wait for a statement to block: only a broken test runs into it."""

psycopg = pytest.importorskip("psycopg")


def msg(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


@pytest.fixture(params=["sync", "async"])
def pg(request: pytest.FixtureRequest) -> Iterator[tuple[Store, str]]:
    """A store (the sync one, or the async one driven blocking) in a fresh schema, its name."""
    try:
        admin = psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip("PostgreSQL unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
        pytest.fail(f"PostgreSQL unreachable ({exc})", pytrace=False)
    schema = f"cwtest_{uuid.uuid4().hex}"
    store = make_store(StoreSpec(kind="postgres", target=POSTGRES_DSN,
                                 options={"schema": schema}, driver=request.param))
    try:
        yield store, schema
    finally:
        store.close()
        with admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def worker() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool


def _wait_until_blocked_by(holder: Any) -> None:
    """Return once some statement waits for a lock ``holder`` (a connection) holds."""
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as probe:
        deadline = time.monotonic() + WAIT_LIMIT
        while True:
            row = probe.execute("SELECT count(*) FROM pg_stat_activity"
                                " WHERE %s = ANY(pg_blocking_pids(pid))",
                                (holder.info.backend_pid,)).fetchone()
            if row is not None and row[0] > 0:
                return
            if time.monotonic() > deadline:
                pytest.fail("the store's statement never waited for the held lock")
            time.sleep(0.01)


def _assert_whole(store: Store, key: SessionKey, epoch: str, contents: list[str],
                  state: dict[str, Any], write_key: str | None = None) -> None:
    assert store.epoch(key) == epoch
    assert store.count(key) == len(contents)
    assert [m.message["content"] for m in store.read(key)] == contents
    record = store.get_state(key)
    assert record is not None and record.data == state
    if write_key is not None:
        assert store.find_write(key, write_key) == list(range(1, len(contents) + 1))


def test_erase_user_leaves_a_session_it_did_not_see_whole(
        pg: tuple[Store, str], worker: ThreadPoolExecutor) -> None:
    store, schema = pg
    old = SessionKey(user_id="u1", session_id="old")
    new = SessionKey(user_id="u1", session_id="new")
    store.append(old, [msg("old session")])
    with psycopg.connect(POSTGRES_DSN) as locker:
        # A lock on the old session's message pauses the erase after it deleted the rows of
        # the sessions it found, while the user opens a new session.
        locker.execute(f'SELECT 1 FROM "{schema}".messages WHERE user_id = %s'
                       " AND session_id = %s FOR UPDATE", (old.user_id, old.session_id))
        erasing: Future[int] = worker.submit(store.erase_user, "u1")
        _wait_until_blocked_by(locker)
        written = store.append_if(new, [msg("hello, new session")], idempotency_key="k1",
                                  state=StateWrite(data={"mode": "structured"},
                                                   expected_version=None))
        locker.rollback()
    assert erasing.result(timeout=WAIT_LIMIT) == 1
    assert store.epoch(old) is None and store.read(old) == [] and store.get_state(old) is None
    _assert_whole(store, new, written.epoch, ["hello, new session"], {"mode": "structured"},
                  write_key="k1")
    assert store.append(new, [msg("next")]) == [2], "seqs stay gap-free"


def test_erasing_an_absent_session_leaves_its_first_write_whole(
        pg: tuple[Store, str], worker: ThreadPoolExecutor) -> None:
    store, schema = pg
    key = SessionKey(user_id="u", session_id="s")
    with psycopg.connect(POSTGRES_DSN) as locker:
        # Deleting messages waits for this lock; a state-only write inserts none, so it passes.
        locker.execute(f'LOCK TABLE "{schema}".messages IN SHARE MODE')
        erasing: Future[bool] = worker.submit(store.erase_session, key)
        _wait_until_blocked_by(locker)
        assert store.put_state(key, {"summary": "important"}, expected_version=None) == 1
        epoch = store.epoch(key)
        locker.rollback()
    assert erasing.result(timeout=WAIT_LIMIT) is False, "the session was absent when it looked"
    assert epoch is not None
    _assert_whole(store, key, epoch, [], {"summary": "important"})


def test_of_two_first_writes_expecting_no_state_one_conflicts(
        pg: tuple[Store, str], worker: ThreadPoolExecutor) -> None:
    store, schema = pg
    key = SessionKey(user_id="u", session_id="s")
    layout = PostgresLayout(schema, None, time.time)
    with psycopg.connect(POSTGRES_DSN) as first:
        # The first writer has created the session and its state, and not yet committed.
        when, state_text = write_conditions(
            key, [msg("A")], None, None, None,
            StateWrite(data={"writer": "A"}, expected_version=None))
        run_sql(layout.append_if(key, [msg("A")], when, state_text), first)
        second: Future[Any] = worker.submit(
            store.append_if, key, [msg("B")],
            state=StateWrite(data={"writer": "B"}, expected_version=None))
        _wait_until_blocked_by(first)
        first.commit()
    with pytest.raises(ConflictError):
        second.result(timeout=WAIT_LIMIT)
    epoch = store.epoch(key)
    assert epoch is not None
    _assert_whole(store, key, epoch, ["A"], {"writer": "A"})
    record = store.get_state(key)
    assert record is not None and record.version == 1
