"""Every store backend keeps the same promises.

Each test runs against memory, SQLite, Redis and PostgreSQL (the ``backend`` fixture), each in a
fresh namespace. The promises: gap-free seqs from 1, exact round trips (lone surrogates, NUL), ids
that never collide, all-or-nothing appends even when the fault happens mid-transaction, optimistic
state versions, retention, erase isolation, and concurrent writers from several OS processes
losing nothing.
"""

from __future__ import annotations

import math
import multiprocessing
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from store_workers import Backend, FakeClock, append_worker

from contextwright.errors import (
    ConflictError,
    CorruptRecordError,
    InvalidInputError,
    StoreUnavailable,
)
from contextwright.session import SessionKey, Store, open_store

K = SessionKey(user_id="U001", session_id="S001")


def msg(content: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": content}


def contents(store: Store, key: SessionKey = K) -> list[str]:
    return [m.message["content"] for m in store.read(key)]


# -- the log ------------------------------------------------------------------------------------

def test_store_satisfies_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)


def test_append_assigns_gap_free_seqs_from_one(store: Store) -> None:
    assert store.append(K, [msg("a"), msg("b", "assistant")]) == [1, 2]
    assert store.append(K, [msg("c")]) == [3]
    assert store.append(K, []) == []
    assert [m.seq for m in store.read(K)] == [1, 2, 3]
    assert store.count(K) == 3


def test_read_after_and_last_select_ascending_windows(store: Store) -> None:
    store.append(K, [msg(str(i)) for i in range(1, 11)])
    assert [m.seq for m in store.read(K, after=7)] == [8, 9, 10]
    assert [m.seq for m in store.read(K, last=3)] == [8, 9, 10]
    assert [m.seq for m in store.read(K, after=8, last=5)] == [9, 10]
    assert [m.seq for m in store.read(K, after=2, last=3)] == [8, 9, 10]
    assert store.read(K, after=10) == []
    assert store.read(K, last=0) == []
    assert [m.seq for m in store.read(K, last=50)] == list(range(1, 11))


def test_read_rejects_negative_windows(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        store.read(K, after=-1)
    with pytest.raises(InvalidInputError):
        store.read(K, last=-1)


def test_windows_past_64_bits_are_refused_alike_and_the_largest_is_read(store: Store) -> None:
    store.append(K, [msg("a"), msg("b")])
    assert store.read(K, after=2**63 - 1) == []
    assert [m.seq for m in store.read(K, last=2**63 - 1)] == [1, 2]
    for window in ({"after": 2**63}, {"last": 2**63}, {"after": 10**30}):
        with pytest.raises(InvalidInputError):
            store.read(K, **window)


def test_unknown_session_is_empty(store: Store) -> None:
    assert store.read(K) == []
    assert store.count(K) == 0
    assert store.get_state(K) is None
    assert store.list_sessions() == []
    assert store.erase_session(K) is False
    assert store.erase_user("nobody") == 0


def test_created_at_is_stamped_by_the_store(backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(clock=clock)
    store.append(K, [msg("a")])
    clock.advance(5)
    store.append(K, [msg("b")])
    assert [m.created_at for m in store.read(K)] == [clock.now - 5, clock.now]


# -- exact round trips --------------------------------------------------------------------------

TRICKY: list[dict[str, Any]] = [
    msg("lone \ud800 high and \udfff low surrogates"),
    msg("NUL \x00 inside, and at the end \x00"),
    msg("中文、emoji 🧭, combining e\u0301, RTL \u202e, BOM \ufeff, line sep \u2028"),
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"上海\\u0000\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
     "content": "{\"temp\": 25}", "id": "m-5", "timestamp": 1700000000.123456789},
    {"role": "user", "content": "numbers", "big": 2**70, "neg": -0.0, "tiny": 5e-324,
     "nested": {"list": [1, 2.5, None, True, False, "\x00"], "empty": {}}},
]


def test_messages_round_trip_exactly(store: Store) -> None:
    store.append(K, TRICKY)
    got = [m.message for m in store.read(K)]
    assert got == TRICKY
    assert [type(m["content"]) for m in got] == [str] * len(TRICKY)
    assert math.copysign(1, got[5]["neg"]) == -1


def test_state_round_trips_exactly(store: Store) -> None:
    data = {"mode": "structured", "summary": "订单 20241001 \x00 \ud83d", "zones": {"facts": []}}
    store.put_state(K, data, expected_version=None)
    record = store.get_state(K)
    assert record is not None
    assert record.data == data
    assert record.version == 1


def test_stored_copy_is_independent_of_the_callers_dict(store: Store) -> None:
    message = msg("original")
    store.append(K, [message])
    message["content"] = "changed"
    read = store.read(K)[0].message
    assert read["content"] == "original"


def test_non_json_messages_are_refused_without_echoing_them(store: Store) -> None:
    with pytest.raises(InvalidInputError) as caught:
        store.append(K, [msg("ok"), {"role": "user", "content": {"secret-42": math.inf}}])
    assert "secret-42" not in str(caught.value)
    with pytest.raises(InvalidInputError):
        store.append(K, [msg("ok"), {"role": "user", "content": object()}])
    with pytest.raises(InvalidInputError):
        store.append(K, ["not a mapping"])  # type: ignore[list-item]
    assert store.count(K) == 0


# -- ids ----------------------------------------------------------------------------------------

COLLIDING_KEYS = [
    SessionKey(user_id="u1", session_id="s"), SessionKey(user_id="u10", session_id="s"),
    SessionKey(user_id="u1", session_id="s0"), SessionKey(user_id="u", session_id="1s"),
    SessionKey(user_id="a", session_id="b:c"), SessionKey(user_id="a:b", session_id="c"),
    SessionKey(user_id="a", session_id="b"), SessionKey(user_id="1:a", session_id="b"),
    SessionKey(user_id="1", session_id="a:b"), SessionKey(user_id="2:a:", session_id="b"),
    SessionKey(user_id="%", session_id="_"), SessionKey(user_id="_", session_id="%"),
    SessionKey(user_id="u%", session_id="s_"), SessionKey(user_id="u_", session_id="s%"),
    SessionKey(user_id="o'brien", session_id='say "hi"'),
    SessionKey(user_id="back\\slash", session_id="*?[glob]"),
    SessionKey(user_id="user id with spaces", session_id="\t"),
    SessionKey(user_id="用户", session_id="会话 🧭"),
]


def test_prefix_and_special_character_ids_never_collide(store: Store) -> None:
    for index, key in enumerate(COLLIDING_KEYS):
        store.append(key, [msg(f"only {index}")])
        store.put_state(key, {"owner": index}, expected_version=None)
    for index, key in enumerate(COLLIDING_KEYS):
        assert contents(store, key) == [f"only {index}"]
        state = store.get_state(key)
        assert state is not None
        assert state.data == {"owner": index}
    listed = [info.key for info in store.list_sessions()]
    assert listed == sorted(COLLIDING_KEYS, key=lambda k: (k.user_id, k.session_id))


@pytest.mark.parametrize("bad", ["", "nul\x00", "lone \ud800", 7, None])
def test_invalid_ids_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        SessionKey(user_id=bad, session_id="s")
    with pytest.raises(InvalidInputError):
        SessionKey(user_id="u", session_id=bad)


def test_erase_user_touches_only_that_user(store: Store) -> None:
    for key in COLLIDING_KEYS:
        store.append(key, [msg("x")])
    assert store.erase_user("u1") == 2
    assert store.count(SessionKey(user_id="u10", session_id="s")) == 1
    assert store.count(SessionKey(user_id="u", session_id="1s")) == 1
    assert store.erase_user("a") == 2
    assert store.count(SessionKey(user_id="a:b", session_id="c")) == 1
    assert store.erase_user("%") == 1
    assert store.count(SessionKey(user_id="_", session_id="%")) == 1
    remaining = {info.key for info in store.list_sessions()}
    assert remaining == set(COLLIDING_KEYS) - {
        SessionKey(user_id="u1", session_id="s"), SessionKey(user_id="u1", session_id="s0"),
        SessionKey(user_id="a", session_id="b:c"), SessionKey(user_id="a", session_id="b"),
        SessionKey(user_id="%", session_id="_")}


def test_erase_session_removes_messages_and_state(store: Store) -> None:
    other = SessionKey(user_id=K.user_id, session_id="S002")
    store.append(K, [msg("a")])
    store.put_state(K, {"mode": "x"}, expected_version=None)
    store.append(other, [msg("b")])
    assert store.erase_session(K) is True
    assert store.erase_session(K) is False
    assert (store.read(K), store.get_state(K), store.count(K)) == ([], None, 0)
    assert contents(store, other) == ["b"]
    assert store.append(K, [msg("again")]) == [1]
    assert store.get_state(K) is None


def test_list_sessions_reports_counts_sorted_and_filtered(backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(clock=clock)
    store.append(SessionKey(user_id="u2", session_id="b"), [msg("1"), msg("2")])
    clock.advance(1)
    store.put_state(SessionKey(user_id="u1", session_id="z"), {}, expected_version=None)
    store.append(SessionKey(user_id="u10", session_id="a"), [msg("1")])
    infos = store.list_sessions()
    assert [(i.key.user_id, i.key.session_id, i.message_count) for i in infos] == [
        ("u1", "z", 0), ("u10", "a", 1), ("u2", "b", 2)]
    assert infos[2].created_at == infos[2].updated_at == clock.now - 1
    assert [i.key.user_id for i in store.list_sessions("u1")] == ["u1"]
    assert store.list_sessions("u") == []


# -- all or nothing -----------------------------------------------------------------------------

def test_failed_batch_leaves_nothing_half_written(store: Store) -> None:
    store.append(K, [msg("before 1"), msg("before 2")])
    batch = [msg("1"), msg("2"), {"role": "user", "content": math.nan}, msg("4"), msg("5")]
    with pytest.raises(InvalidInputError):
        store.append(K, batch)
    assert contents(store) == ["before 1", "before 2"]
    assert store.count(K) == 2
    assert store.append(K, [msg("after")]) == [3]


class FaultyMessage(Mapping[str, Any]):
    """A message whose encoding fails; it records whether a write transaction was open then."""

    def __init__(self, probe: Any) -> None:
        self.probe = probe
        self.in_transaction: bool | None = None

    def __getitem__(self, name: str) -> Any:
        self.in_transaction = self.probe() if self.probe else None
        raise RuntimeError("injected fault")

    def __iter__(self) -> Iterator[str]:
        return iter(["role"])

    def __len__(self) -> int:
        return 1


def _write_probe(backend: Backend) -> Any:
    """For SQL stores: a check, from another connection, that a write transaction is open."""
    if backend.name == "sqlite":
        def sqlite_locked() -> bool:
            other = sqlite3.connect(backend.spec.target, timeout=0, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return True
            finally:
                other.close()
            return False
        return sqlite_locked
    if backend.name == "postgres":
        import psycopg

        def postgres_locked() -> bool:
            with psycopg.connect(backend.spec.target, autocommit=True) as other:
                row = other.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s"
                    " AND c.relname = 'sessions' AND l.mode = 'RowExclusiveLock' AND l.granted",
                    (backend.spec.options["schema"],)).fetchone()
            return bool(row and row[0])
        return postgres_locked
    return None  # memory and Redis encode the whole batch before their one atomic step


def test_fault_inside_the_write_transaction_rolls_back(backend: Backend) -> None:
    store = backend.make()
    store.append(K, [msg("kept")])
    faulty = FaultyMessage(_write_probe(backend))
    with pytest.raises(RuntimeError, match="injected fault"):
        store.append(K, [msg("1"), msg("2"), faulty, msg("4"), msg("5")])
    if backend.name in ("sqlite", "postgres"):
        assert faulty.in_transaction is True
    assert contents(store) == ["kept"]
    assert store.append(K, [msg("next")]) == [2]


# -- state --------------------------------------------------------------------------------------

def test_state_versions_are_optimistic(store: Store) -> None:
    assert store.put_state(K, {"v": 1}, expected_version=None) == 1
    with pytest.raises(ConflictError):
        store.put_state(K, {"v": "again"}, expected_version=None)
    assert store.put_state(K, {"v": 2}, expected_version=1) == 2
    with pytest.raises(ConflictError):
        store.put_state(K, {"v": "stale"}, expected_version=1)
    with pytest.raises(ConflictError):
        store.put_state(SessionKey(user_id="u", session_id="new"), {}, expected_version=1)
    record = store.get_state(K)
    assert record is not None
    assert (record.version, record.data) == (2, {"v": 2})
    assert store.count(K) == 0


def test_concurrent_state_writers_exactly_one_wins(store: Store) -> None:
    store.put_state(K, {"n": 0}, expected_version=None)
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def writer(index: int) -> None:
        barrier.wait()
        try:
            store.put_state(K, {"n": index}, expected_version=1)
            outcomes.append("won")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict"] * 5 + ["won"]
    record = store.get_state(K)
    assert record is not None
    assert record.version == 2


@pytest.mark.parametrize("bad", [0, -1, True, "1", 2**63])
def test_bad_expected_version_is_refused(store: Store, bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        store.put_state(K, {}, expected_version=bad)


# -- retention ----------------------------------------------------------------------------------

def test_expired_session_reads_as_absent_before_purge(backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(ttl_seconds=backend.ttl, clock=clock)
    other = SessionKey(user_id="U002", session_id="S")
    store.append(K, [msg("old")])
    store.put_state(K, {"mode": "x"}, expected_version=None)
    backend.elapse(clock, backend.ttl * 0.5)
    store.append(other, [msg("fresh")])
    backend.elapse(clock, backend.ttl * 0.55)
    assert (store.read(K), store.count(K), store.get_state(K)) == ([], 0, None)
    assert [i.key for i in store.list_sessions()] == [other]
    assert store.list_sessions(K.user_id) == []
    assert contents(store, other) == ["fresh"]
    assert store.purge_expired() == 1
    assert store.purge_expired() == 0
    assert contents(store, other) == ["fresh"]


def test_every_write_refreshes_retention(backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(ttl_seconds=backend.ttl, clock=clock)
    store.append(K, [msg("a")])
    backend.elapse(clock, backend.ttl * 0.5)
    store.put_state(K, {"s": 1}, expected_version=None)
    backend.elapse(clock, backend.ttl * 0.5)
    store.append(K, [msg("b")])
    backend.elapse(clock, backend.ttl * 0.5)
    assert contents(store) == ["a", "b"]
    assert store.purge_expired() == 0


def test_writing_to_an_expired_session_starts_it_afresh(backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(ttl_seconds=backend.ttl, clock=clock)
    store.append(K, [msg("old 1"), msg("old 2")])
    store.put_state(K, {"s": "old"}, expected_version=None)
    backend.elapse(clock, backend.ttl * 1.1)
    assert store.erase_session(K) is False
    store.append(SessionKey(user_id="x", session_id="y"), [msg("keep")])
    assert store.append(K, [msg("new")]) == [1]
    assert store.put_state(K, {"s": "new"}, expected_version=None) == 1
    assert contents(store) == ["new"]


def test_without_ttl_nothing_expires(backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(clock=clock)
    store.append(K, [msg("a")])
    clock.advance(10 * 365 * 86400)
    assert store.purge_expired() == 0
    assert contents(store) == ["a"]


@pytest.mark.parametrize("ttl", [0, -1, math.inf, math.nan])
def test_bad_ttl_is_refused(backend: Backend, ttl: float) -> None:
    with pytest.raises(InvalidInputError):
        backend.make(ttl_seconds=ttl)


# -- corruption and outages ---------------------------------------------------------------------

def _corrupt_first_message(backend: Backend, store: Store) -> None:
    if backend.name == "memory":
        session = store._sessions[K]  # type: ignore[attr-defined]
        session.messages[0] = (session.messages[0][0], "{not json")
    elif backend.name == "sqlite":
        with sqlite3.connect(backend.spec.target) as db:
            db.execute("UPDATE messages SET body = '[1, 2]' WHERE seq = 1")
    elif backend.name == "redis":
        import redis

        prefix = backend.spec.options["prefix"]
        name = f"{prefix}:msgs:{len(K.user_id)}:{K.user_id}:{K.session_id}"
        redis.Redis.from_url(backend.spec.target).lset(name, 0, "not-a-time {")
    else:
        import psycopg

        with psycopg.connect(backend.spec.target, autocommit=True) as db:
            db.execute(f'UPDATE "{backend.spec.options["schema"]}".messages'
                       " SET body = '{' WHERE seq = 1")


def test_undecodable_rows_raise_corrupt_record(backend: Backend) -> None:
    store = backend.make()
    store.append(K, [msg("a"), msg("b")])
    _corrupt_first_message(backend, store)
    with pytest.raises(CorruptRecordError) as caught:
        store.read(K)
    assert "U001" not in str(caught.value)
    assert [m.message["content"] for m in store.read(K, after=1)] == ["b"]


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0",
                                 "postgresql://postgres@127.0.0.1:1/test",
                                 "sqlite:////nonexistent-dir/for/sure/x.db"])
def test_unreachable_store_raises_store_unavailable(url: str) -> None:
    with pytest.raises(StoreUnavailable):
        open_store(url)


# -- many writers -------------------------------------------------------------------------------

WRITERS, PER_WRITER = 4, 500


def _assert_all_writers_landed(store: Store) -> None:
    messages = store.read(K)
    assert [m.seq for m in messages] == list(range(1, WRITERS * PER_WRITER + 1))
    for writer in range(WRITERS):
        order = [m.message["index"] for m in messages if m.message["writer"] == writer]
        assert order == list(range(PER_WRITER))
    assert store.count(K) == WRITERS * PER_WRITER


def test_concurrent_appends_lose_nothing(backend: Backend) -> None:
    """4 OS processes (spawn) × 500 appends; the in-process memory store uses 4 threads."""
    if backend.name == "memory":
        store = backend.make()
        barrier = threading.Barrier(WRITERS)
        threads = [threading.Thread(target=_thread_writer, args=(store, w, barrier))
                   for w in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        _assert_all_writers_landed(store)
        return
    backend.make()  # creates the schema once, before the writers race
    context = multiprocessing.get_context("spawn")
    process_barrier = context.Barrier(WRITERS)
    processes = [context.Process(target=append_worker,
                                 args=(backend.spec, K, w, PER_WRITER, process_barrier))
                 for w in range(WRITERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    assert [p.exitcode for p in processes] == [0] * WRITERS
    _assert_all_writers_landed(backend.make())


def test_concurrent_appends_from_threads_share_one_store(backend: Backend) -> None:
    """One store object, 4 threads (per-thread connections in SQLite and PostgreSQL)."""
    store = backend.make()
    barrier = threading.Barrier(WRITERS)
    threads = [threading.Thread(target=_thread_writer, args=(store, w, barrier, 100))
               for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = store.read(K)
    assert [m.seq for m in messages] == list(range(1, WRITERS * 100 + 1))
    for writer in range(WRITERS):
        assert [m.message["index"] for m in messages
                if m.message["writer"] == writer] == list(range(100))


def _thread_writer(store: Store, writer: int, barrier: threading.Barrier,
                   count: int = PER_WRITER) -> None:
    barrier.wait()
    for index in range(count):
        store.append(K, [{"role": "user", "content": f"w{writer}-{index}",
                          "writer": writer, "index": index}])


# -- open_store ---------------------------------------------------------------------------------

def test_open_store_understands_each_scheme(backend: Backend, tmp_path: Any) -> None:
    if backend.name == "memory":
        url = "memory://"
    elif backend.name == "sqlite":
        url = f"sqlite:///{tmp_path}/via-url.db"
    elif backend.name == "redis":
        url = f"{backend.spec.target}?prefix={backend.spec.options['prefix']}"
    else:
        url = f"{backend.spec.target}?schema={backend.spec.options['schema']}"
    store = open_store(url, ttl_seconds=60)
    backend.opened.append(store)
    assert type(store).__name__.lower().startswith(backend.name)
    key = SessionKey(user_id=f"open-store-{backend.name}", session_id="s")
    store.append(key, [msg("via url")])
    assert contents(store, key) == ["via url"]
    if backend.name in ("redis", "postgres"):  # the URL's prefix / schema was honoured
        assert [info.key for info in backend.make().list_sessions()] == [key]


@pytest.mark.parametrize("url", ["", "nope", "mysql://x", "sqlite://", "sqlite:///"])
def test_open_store_refuses_unknown_urls(url: str) -> None:
    with pytest.raises(InvalidInputError):
        open_store(url)


def test_session_package_exports_the_store_api() -> None:
    import contextwright.session as session

    for name in ("Store", "SessionKey", "StoredMessage", "StateRecord", "SessionInfo",
                 "MemoryStore", "SqliteStore", "RedisStore", "PostgresStore", "open_store"):
        assert name in session.__all__
        assert getattr(session, name) is not None
