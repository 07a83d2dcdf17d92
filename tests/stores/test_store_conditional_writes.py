"""Conditional writes, on every backend: epochs, compare-and-append and idempotency keys.

Part of the conformance suite (the ``backend`` fixture runs each test on memory, SQLite, Redis and
PostgreSQL). The promises: a write conditioned on a session's epoch never lands in a later
incarnation (erasure wins), ``append_if(last_seq=…)`` appends only on the log it checked, a state
written with messages lands with them or not at all, and a write retried with its idempotency key
is stored once.
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest
from store_workers import Backend, FakeClock, chained_append_worker

from contextwright.errors import ConflictError, InvalidInputError, SessionGone
from contextwright.session import SessionKey, StateWrite, Store

K = SessionKey(user_id="U001", session_id="S001")


def msg(content: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": content}


def assert_absent(store: Store, key: SessionKey = K) -> None:
    assert store.count(key) == 0
    assert store.read(key) == []
    assert store.get_state(key) is None
    assert store.epoch(key) is None
    assert key not in {info.key for info in store.list_sessions()}


# -- epochs -------------------------------------------------------------------------------------

def test_each_incarnation_of_a_session_has_its_own_epoch(store: Store) -> None:
    assert store.epoch(K) is None
    first = store.append_if(K, [msg("a")]).epoch
    assert store.epoch(K) == first
    store.put_state(K, {"n": 1}, expected_version=None)
    store.append(K, [msg("b")])
    assert store.epoch(K) == first, "writes to a live session keep its epoch"
    store.erase_session(K)
    assert store.epoch(K) is None
    store.append(K, [msg("c")])
    assert store.epoch(K) not in (None, first)


def test_write_for_an_erased_incarnation_is_refused_and_stores_nothing(store: Store) -> None:
    epoch = store.append_if(K, [msg("card 4111 1111 1111 1111")]).epoch
    assert store.erase_session(K)
    with pytest.raises(SessionGone):
        store.put_state(K, {"facts": ["card 4111"]}, expected_version=None, epoch=epoch)
    with pytest.raises(SessionGone):
        store.append_if(K, [msg("more")], epoch=epoch)
    assert_absent(store)


def test_write_for_an_erased_incarnation_never_reaches_the_next_one(store: Store) -> None:
    old = store.append_if(K, [msg("old")]).epoch
    store.erase_user(K.user_id)
    store.append(K, [msg("new")])  # the same ids, started again
    with pytest.raises(SessionGone):
        store.put_state(K, {"facts": ["old"]}, expected_version=None, epoch=old)
    assert store.get_state(K) is None
    assert [m.message["content"] for m in store.read(K)] == ["new"]


def test_expired_session_ends_its_epoch(backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(ttl_seconds=backend.ttl, clock=clock)
    epoch = store.append_if(K, [msg("a")]).epoch
    backend.elapse(clock, backend.ttl + 1)
    with pytest.raises(SessionGone):
        store.put_state(K, {"n": 1}, expected_version=None, epoch=epoch)
    assert store.get_state(K) is None


# -- compare-and-append -------------------------------------------------------------------------

def test_append_if_last_seq_appends_only_on_the_log_it_checked(store: Store) -> None:
    assert store.append_if(K, [msg("a")], last_seq=0).seqs == [1]
    with pytest.raises(ConflictError):
        store.append_if(K, [msg("late"), msg("late too")], last_seq=0)
    assert store.append_if(K, [msg("b")], last_seq=1).seqs == [2]
    assert [m.message["content"] for m in store.read(K)] == ["a", "b"]


def test_messages_and_state_land_together_or_not_at_all(store: Store) -> None:
    done = store.append_if(K, [msg("a")], state=StateWrite(data={"n": 1}, expected_version=None))
    assert (done.seqs, done.state_version) == ([1], 1)
    with pytest.raises(ConflictError):  # the state moved on: the messages stay out too
        store.append_if(K, [msg("b")], state=StateWrite(data={"n": 2}, expected_version=None))
    with pytest.raises(ConflictError):  # the log moved on: the state stays as it was
        store.append_if(K, [msg("c")], last_seq=0,
                        state=StateWrite(data={"n": 3}, expected_version=1))
    record = store.get_state(K)
    assert record is not None
    assert (record.version, record.data) == (1, {"n": 1})
    assert store.count(K) == 1


@pytest.mark.parametrize("bad", [{"last_seq": -1}, {"last_seq": True}, {"last_seq": 2**63},
                                 {"epoch": 7},
                                 {"idempotency_key": ""}, {"idempotency_key": "x\x00"},
                                 {"idempotency_key": "k" * 300}])
def test_bad_conditions_are_refused(store: Store, bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        store.append_if(K, [msg("a")], **bad)
    assert store.count(K) == 0


# -- idempotency keys ---------------------------------------------------------------------------

def test_retry_with_the_same_key_stores_once(store: Store) -> None:
    first = store.append_if(K, [msg("a"), msg("b", "assistant")], idempotency_key="req-1")
    again = store.append_if(K, [msg("a"), msg("b", "assistant")], idempotency_key="req-1")
    assert first.seqs == again.seqs == [1, 2]
    assert (first.replayed, again.replayed) == (False, True)
    assert again.epoch == first.epoch
    assert store.count(K) == 2
    assert store.find_write(K, "req-1") == [1, 2]
    assert store.find_write(K, "req-2") is None
    assert store.append_if(K, [msg("c")], idempotency_key="req-2").seqs == [3]


def test_a_write_without_messages_leaves_its_key_unused(store: Store) -> None:
    state_only = store.append_if(K, [], idempotency_key="req-1",
                                 state=StateWrite(data={"n": 1}, expected_version=None))
    assert (state_only.seqs, state_only.replayed, state_only.state_version) == ([], False, 1)
    assert store.find_write(K, "req-1") is None
    stored = store.append_if(K, [msg("a")], idempotency_key="req-1")
    assert (stored.seqs, stored.replayed) == ([1], False), "stored, not replayed as nothing"
    assert store.find_write(K, "req-1") == [1]
    assert store.append_if(K, [msg("a")], idempotency_key="req-1").replayed
    assert store.count(K) == 1


def test_a_replay_wins_over_the_conditions_it_was_first_checked_under(store: Store) -> None:
    store.append_if(K, [msg("a")], last_seq=0, idempotency_key="req-1")
    store.append(K, [msg("someone else")])
    again = store.append_if(K, [msg("a")], last_seq=0, idempotency_key="req-1")
    assert (again.seqs, again.replayed) == ([1], True)
    assert store.count(K) == 2


def test_keys_are_per_session_and_erased_with_it(store: Store) -> None:
    other = SessionKey(user_id=K.user_id, session_id="S002")
    store.append_if(K, [msg("a")], idempotency_key="req-1")
    assert store.append_if(other, [msg("a")], idempotency_key="req-1").seqs == [1]
    assert store.count(other) == 1
    store.erase_session(K)
    assert store.find_write(K, "req-1") is None
    fresh = store.append_if(K, [msg("a")], idempotency_key="req-1")
    assert (fresh.seqs, fresh.replayed) == ([1], False)


def test_concurrent_retries_with_one_key_store_once(store: Store) -> None:
    barrier = threading.Barrier(4)
    results: list[list[int]] = []

    def retry() -> None:
        barrier.wait()
        results.append(store.append_if(K, [msg("once")], idempotency_key="req-1").seqs)

    threads = [threading.Thread(target=retry) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == [[1]] * 4
    assert store.count(K) == 1


# -- races with real threads and processes ------------------------------------------------------

ROUNDS = 40


def test_erase_racing_a_conditioned_state_write_always_wins(store: Store) -> None:
    """Erase and (append, then state under that append's epoch) race ``ROUNDS`` times.

    Whatever the interleaving, a state never outlives the erase of the message it came from:
    the session is either gone, or holds the message appended after the erase.
    """
    for round_ in range(ROUNDS):
        key = SessionKey(user_id="racer", session_id=f"s{round_}")
        store.append(key, [msg("before")])
        barrier = threading.Barrier(2)

        def write(key: SessionKey = key, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            epoch = store.append_if(key, [msg("secret")]).epoch
            try:
                store.put_state(key, {"facts": ["secret"]}, expected_version=None, epoch=epoch)
            except SessionGone:
                pass

        def erase(key: SessionKey = key, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            store.erase_session(key)

        threads = [threading.Thread(target=write), threading.Thread(target=erase)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        if store.get_state(key) is not None:
            assert [m.message["content"] for m in store.read(key)] == ["secret"]


WORKERS, PER_WORKER = 3, 40


def test_compare_and_append_from_processes_keeps_one_chain(backend: Backend) -> None:
    """Several OS processes append, each only on the log it read; every append sees its parent.

    Each message names the seq it was appended after; with a non-atomic check-then-append two
    writers could both append after the same seq.
    """
    if backend.name == "memory":
        pytest.skip("the memory store lives in one process (its threads are tested above)")
    backend.make()  # creates the schema once, before the writers race
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    processes = [context.Process(target=chained_append_worker,
                                 args=(backend.spec, K, w, PER_WORKER, barrier))
                 for w in range(WORKERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=180)
    assert [p.exitcode for p in processes] == [0] * WORKERS
    messages = backend.make().read(K)
    assert [m.seq for m in messages] == list(range(1, WORKERS * PER_WORKER + 1))
    assert [m.message["after"] for m in messages] == list(range(WORKERS * PER_WORKER))


def test_sqlite_file_from_before_epochs_opens_and_keeps_its_sessions(tmp_path: Any) -> None:
    import sqlite3

    from contextwright.session import SqliteStore

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the schema as it was before epochs and write keys
        db.execute("CREATE TABLE sessions (user_id TEXT NOT NULL, session_id TEXT NOT NULL,"
                   " created_at REAL NOT NULL, updated_at REAL NOT NULL,"
                   " last_seq INTEGER NOT NULL, PRIMARY KEY (user_id, session_id)) WITHOUT ROWID")
        db.execute("CREATE TABLE messages (user_id TEXT NOT NULL, session_id TEXT NOT NULL,"
                   " seq INTEGER NOT NULL, created_at REAL NOT NULL, body TEXT NOT NULL,"
                   " PRIMARY KEY (user_id, session_id, seq)) WITHOUT ROWID")
        db.execute("INSERT INTO sessions VALUES ('U001', 'S001', 1.0, 9e9, 1)")
        db.execute("INSERT INTO messages VALUES ('U001', 'S001', 1, 1.0,"
                   " '{\"role\":\"user\",\"content\":\"old\"}')")
    store = SqliteStore(path)
    assert store.epoch(K) == ""
    assert store.put_state(K, {"n": 1}, expected_version=None, epoch="") == 1
    assert store.append_if(K, [msg("new")], last_seq=1, idempotency_key="k").seqs == [2]
    store.erase_session(K)
    assert store.append_if(K, [msg("again")]).epoch not in ("", None)
    store.close()


def test_update_state_for_an_erased_incarnation_writes_nothing(store: Store) -> None:
    from contextwright.session.state import SessionState, update_state

    epoch = store.append_if(K, [msg("a")]).epoch
    store.erase_session(K)
    with pytest.raises(SessionGone):
        update_state(store, K, lambda state: SessionState(mode="structured"), epoch=epoch)
    assert_absent(store)
