"""The async manager under load, cancellation, shutdown and dropped connections.

The CPU work of ``aprepare`` / ``arecord`` (a mode hand-off, structured-mode zone updates, the
check whether a summary is due) runs on worker threads, so the event loop keeps ticking while it
runs; ``aclose`` lets the calls it admitted finish and leaves no summary task behind; a cancelled
recall-index write leaves no hole in the stored index; a PostgreSQL server that dropped the pooled
connections answers the next call. Redis and PostgreSQL are the real servers on this machine,
each test in its own namespace (a random key prefix, a random schema) removed afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from itertools import pairwise
from typing import Any, TypeVar

import pytest

from contextwright.manager import ContextManager
from contextwright.manager import flows as manager_flows
from contextwright.session import AsyncMemoryStore, AsyncStore

T = TypeVar("T")

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
ORDERS = {"type": "function", "function": {"name": "lookup_orders", "parameters": {
    "type": "object", "properties": {"batch": {"type": "string"}}}}}
TICKS_WHILE_WORKING = 3
"""Ticks of the loop's ticker that the watched work waits to see while it runs."""
GIVE_UP_SECONDS = 5.0
"""How long the watched work waits for those ticks: only a loop that is blocked runs out."""


# ----- stores, each in a namespace of its own -----


def _service_or_fail(name: str, probe: Callable[[], object]) -> None:
    try:
        probe()
    except Exception as exc:
        if os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1":
            pytest.skip(f"{name} unreachable and CONTEXTWRIGHT_SKIP_SERVICES=1")
        pytest.fail(f"{name} unreachable ({type(exc).__name__}: {exc})", pytrace=False)


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    _service_or_fail("Redis", client.ping)
    prefix = f"cwtest-{uuid.uuid4().hex}"
    yield prefix
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()


@pytest.fixture
def postgres_schema() -> Iterator[str]:
    import psycopg

    holder: list[psycopg.Connection[Any]] = []
    _service_or_fail("PostgreSQL", lambda: holder.append(
        psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3)))
    schema = f"cwtest_{uuid.uuid4().hex}"
    yield schema
    with holder[0] as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["memory", "redis", "postgres"])
def make_store(request: pytest.FixtureRequest) -> Callable[[], AsyncStore]:
    """Makes the async store of the parameter's kind (call it on the loop that uses it)."""
    if request.param == "memory":
        return AsyncMemoryStore
    if request.param == "redis":
        from contextwright.session import AsyncRedisStore

        prefix = request.getfixturevalue("redis_prefix")
        return lambda: AsyncRedisStore(REDIS_URL, prefix=prefix)
    from contextwright.session import AsyncPostgresStore

    schema = request.getfixturevalue("postgres_schema")
    return lambda: AsyncPostgresStore(POSTGRES_DSN, schema=schema)


async def _close(store: AsyncStore) -> None:
    await store.aclose()  # type: ignore[attr-defined]


# ----- the event loop keeps ticking while the CPU work runs -----


class _Ticker:
    """Counts the turns the event loop gives a task that only yields."""

    def __init__(self) -> None:
        self.ticks = 0
        self.running = False
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0)

    def start(self) -> None:
        self.running = True
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self.running = False
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class _LoopWatch:
    """Wraps a function of the manager: each call waits until the loop's ticker has ticked.

    Run off the loop, the wrapped call sees the ticker go on; run on the loop, the ticker cannot
    move until it returns, so it gives up (after ``GIVE_UP_SECONDS``) and counts as blocking.
    """

    def __init__(self, ticker: _Ticker) -> None:
        self.ticker = ticker
        self.calls = 0
        self.blocked = 0

    def wrap(self, work: Callable[..., T]) -> Callable[..., T]:
        def watched(*args: Any, **kwargs: Any) -> T:
            start = self.ticker.ticks
            result = work(*args, **kwargs)
            if not self.ticker.running:
                return result
            self.calls += 1
            seen = threading.Event()
            for _ in range(int(GIVE_UP_SECONDS / 0.001)):
                if self.ticker.ticks - start >= TICKS_WHILE_WORKING:
                    seen.set()
                    break
                seen.wait(0.001)
            if not seen.is_set():
                self.blocked += 1
            return result
        return watched


def _orders(batch: int, rows: int = 200) -> str:
    rng = random.Random(batch)
    return json.dumps([{"id": f"ORD-{rng.randrange(10**6)}", "city": rng.choice(["Paris", "Oslo"]),
                        "status": rng.choice(["shipped", "late", "packed"])} for _ in range(rows)])


def _call(batch: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{batch}", "type": "function",
         "function": {"name": "lookup_orders", "arguments": json.dumps({"batch": str(batch)})}}]}


def test_a_mode_switch_and_structured_records_never_block_the_event_loop(
        make_store: Callable[[], AsyncStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-off, the zone update of a record and the summary check run off the loop."""
    ticker = _Ticker()
    watches = {name: _LoopWatch(ticker)
               for name in ("hand_off", "record_turn_in_zones", "rounds_due")}
    for name, watch in watches.items():
        monkeypatch.setattr(manager_flows, name, watch.wrap(getattr(manager_flows, name)))

    async def main() -> str:
        store = make_store()
        cm = ContextManager(store, tokenizer="estimate", background=False)
        for batch in range(3):
            await cm.aprepare("u", "s", f"Look up the orders of batch {batch}", tools=[ORDERS])
            await cm.arecord("u", "s", assistant=_call(batch), tool_results=[
                {"tool_call_id": f"c{batch}", "content": _orders(batch)}])
            await cm.aprepare("u", "s", None, tools=[ORDERS])
            await cm.arecord("u", "s", assistant=f"Batch {batch} listed.")
        ticker.start()
        switched = await cm.aprepare("u", "s", "First check order ORD-123, then book the courier.",
                                     tools=[ORDERS])
        assert switched.switch is not None
        await cm.arecord("u", "s", assistant=_call(9), tool_results=[
            {"tool_call_id": "c9", "content": _orders(9)}])
        await ticker.stop()
        await cm.aclose()
        await _close(store)
        return switched.mode

    assert asyncio.run(main()) == "structured"
    assert all(watch.calls > 0 for watch in watches.values())
    blocked = {name: watch.blocked for name, watch in watches.items()}
    assert blocked == dict.fromkeys(watches, 0)  # calls that ran on the event loop


# ----- closing while calls run -----


def _manager_tasks() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task is not asyncio.current_task()
            and "context_manager" in repr(task.get_coro())]


def test_aclose_lets_the_calls_under_way_finish_with_their_summaries(
        make_store: Callable[[], AsyncStore], caplog: pytest.LogCaptureFixture) -> None:
    """Nothing fails or is left running: the calls it found end well, later calls are refused."""
    sessions = 12

    async def main() -> tuple[list[object], list[int], object, list[asyncio.Task[Any]]]:
        store = make_store()
        cm = ContextManager(store, tokenizer="estimate")
        for index in range(sessions):
            await cm.aprepare("u", f"s{index}", f"Where is order {index}?")
        calls = [asyncio.ensure_future(cm.aprepare("u", f"s{index}", f"And order {index}b?"))
                 for index in range(sessions)]
        calls += [asyncio.ensure_future(cm.arecord("u", f"s{index}", assistant=f"Shipped {index}."))
                  for index in range(sessions)]
        for _ in range(3):
            await asyncio.sleep(0)  # the calls are under way: some stored, none done
        await cm.aclose()
        left = _manager_tasks()
        results = await asyncio.gather(*calls, return_exceptions=True)
        late = await asyncio.gather(cm.aprepare("u", "late", "Too late?"),
                                    return_exceptions=True)
        counts = [await store.count(_key(f"s{index}")) for index in range(sessions)]
        counts.append(await store.count(_key("late")))
        await _close(store)
        return results, counts, late[0], left

    with caplog.at_level("WARNING", logger="contextwright.session"):
        results, counts, late, left = asyncio.run(main())
    failures = [type(result).__name__ for result in results if isinstance(result, BaseException)]
    assert failures == []
    assert counts == [3] * sessions + [0]  # two questions and an answer; "late": none
    assert type(late).__name__ == "ManagerClosed"
    assert left == []
    events = [getattr(record, "contextwright", {}).get("event") for record in caplog.records]
    assert "summary_failed" not in events


class _GatedStore(AsyncMemoryStore):
    """Holds each ``append_if`` after it stored, until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.stored = asyncio.Event()
        self.gate = asyncio.Event()

    async def append_if(self, *args: Any, **kwargs: Any) -> Any:
        appended = await super().append_if(*args, **kwargs)
        self.stored.set()
        await self.gate.wait()
        return appended


def test_a_prepare_cut_short_by_close_is_manager_closed_with_its_stored_seq() -> None:
    """``close`` from another thread stops the build threads under a running ``aprepare``."""

    async def main() -> BaseException | None:
        store = _GatedStore()
        cm = ContextManager(store, tokenizer="estimate")
        call = asyncio.ensure_future(cm.aprepare("u", "s", "Where is order 7?"))
        await store.stored.wait()
        await asyncio.to_thread(cm.close)
        store.gate.set()
        try:
            await call
        except BaseException as error:
            return error
        return None

    error = asyncio.run(main())
    assert type(error).__name__ == "ManagerClosed"
    assert getattr(error, "stored_seq", None) == 1


def _key(session_id: str) -> Any:
    from contextwright.session import SessionKey

    return SessionKey(user_id="u", session_id=session_id)


# ----- a cancelled recall-index write -----


def _part_ranges(parts: list[str]) -> list[tuple[int, int]]:
    ranges = []
    for part in parts:
        body = json.loads(part.split(" ", 1)[1])
        ranges.append((body["begin"], body["end"]))
    return ranges


def test_a_call_cancelled_while_it_writes_an_index_part_leaves_no_hole(
        make_store: Callable[[], AsyncStore]) -> None:
    """The next part replaces the stored ones, so they still cover the session from its start."""
    rounds, arm_at = 30, 8

    async def main() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        store = make_store()
        cm = ContextManager(store, tokenizer="estimate", background=False)
        write_part = store.append_index  # type: ignore[attr-defined]
        cut: list[tuple[int, int]] = []  # the range of the part whose write was cut short
        writing = asyncio.Event()

        async def held_write(key: Any, part: str, **kwargs: Any) -> bool:
            cut.extend(_part_ranges([part]))
            writing.set()
            await asyncio.Event().wait()  # the deadline comes first
            return bool(await write_part(key, part, **kwargs))

        async def with_deadline(make_call: Callable[[], Any]) -> None:
            """The call, cancelled once while it writes a part, then retried with its key."""
            if not cut:
                call = asyncio.ensure_future(make_call())
                waiting = asyncio.ensure_future(writing.wait())
                await asyncio.wait([call, waiting], return_when=asyncio.FIRST_COMPLETED)
                store.append_index = write_part  # type: ignore[attr-defined]
                if not writing.is_set():
                    waiting.cancel()
                    store.append_index = held_write  # type: ignore[attr-defined]
                    await call
                    return
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)
            await make_call()

        for turn in range(rounds):
            if turn == arm_at:
                store.append_index = held_write  # type: ignore[attr-defined]
            text = f"Tell me something nice about topic number {turn}, like the weather on Mars"
            await with_deadline(partial(cm.aprepare, "u", "s", text, idempotency_key=f"p{turn}"))
            await with_deadline(partial(cm.arecord, "u", "s", idempotency_key=f"r{turn}",
                                        assistant=f"Topic {turn} is lovely."))
        await cm.aclose()
        index = await store.read_index(_key("s"))  # type: ignore[attr-defined]
        await _close(store)
        return cut, _part_ranges(index.parts if index else [])

    cut, ranges = asyncio.run(main())
    assert cut, "no write was cut short; the check says nothing"
    assert ranges and ranges[0][0] == 0, ranges
    holes = [(end, begin) for (_, end), (begin, _) in pairwise(ranges)
             if begin != end]
    assert holes == []
    assert ranges[-1][1] > cut[0][1], (cut, ranges)  # later parts were written too


# ----- pooled connections the server dropped -----


def _terminate_backends(application: str) -> int:
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        pids = [row[0] for row in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            (application,)).fetchall()]
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # Terminating only signals the backends: wait until they are gone, as after a restart.
        for _ in range(500):
            left = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                 (pids,)).fetchone()
            if not left or not left[0]:
                break
            admin.execute("SELECT pg_sleep(0.01)")
    return len(pids)


def _dsn_named(application: str) -> str:
    separator = "&" if "?" in POSTGRES_DSN else "?"
    return f"{POSTGRES_DSN}{separator}application_name={application}"


def test_postgres_stores_answer_at_once_after_the_server_dropped_their_pool(
        postgres_schema: str) -> None:
    """A restart or failover closes every pooled connection; no later call pays for it."""
    from contextwright.session import AsyncPostgresStore, PostgresStore

    application = f"cwtest-{uuid.uuid4().hex[:12]}"
    key = _key("s")
    store = PostgresStore(_dsn_named(application), schema=postgres_schema)
    store.append(key, [{"role": "user", "content": "hi"}])
    workers = [threading.Thread(target=lambda: [store.read(key) for _ in range(5)])
               for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    sync_dropped = _terminate_backends(application)
    sync_reads = [len(store.read(key)) for _ in range(12)]
    store.close()

    async def main() -> tuple[int, list[int]]:
        pooled = AsyncPostgresStore(_dsn_named(application), schema=postgres_schema)
        await asyncio.gather(*(pooled.read(key) for _ in range(20)))
        dropped = _terminate_backends(application)
        reads = [len(await pooled.read(key)) for _ in range(12)]
        await pooled.aclose()
        return dropped, reads

    async_dropped, async_reads = asyncio.run(main())
    assert sync_dropped >= 2 and async_dropped >= 1  # the pools held connections to drop
    assert sync_reads == [1] * 12
    assert async_reads == [1] * 12
