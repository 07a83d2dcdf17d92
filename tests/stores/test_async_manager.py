"""The async manager over native async stores: the same results as the sync one, on every store.

``aprepare`` / ``arecord`` over ``AsyncMemoryStore``, ``AsyncSqliteStore``, ``AsyncRedisStore`` and
``AsyncPostgresStore`` (the ``backend`` fixture's real servers) give what ``prepare`` / ``record``
give over the sync store of the same backend: the same requests, reports and stored state. Sync
and async workers share sessions; erasure wins over async calls racing it; the event loop is never
made to wait for a build, a summary or recall indexing; a blocking call on an async store, or an
async store on a second loop, is a ``StoreUsageError``.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from store_workers import Backend, FakeClock, make_async_store

from contextwright.compress.summarize import ExtractiveSummarizer, Summary
from contextwright.core.final import FinalContext
from contextwright.core.items import Message
from contextwright.errors import ContextwrightError, SessionGone, StoreUsageError
from contextwright.manager import ContextManager
from contextwright.manager import recall as session_recall
from contextwright.modes import SLIDING_WINDOW, ModesConfig
from contextwright.session import (
    AsyncMemoryStore,
    AsyncStore,
    MemoryStore,
    SessionKey,
    Store,
    open_async_store,
)
from contextwright.tokens import Tokenizer

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}
START = 1_700_000_000.0


def script(turns: int = 14) -> list[tuple[str, dict[str, Any]]]:
    """A conversation long enough to be summarised: tool calls, results, a structured turn."""
    steps: list[tuple[str, dict[str, Any]]] = []
    for index in range(turns):
        call = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{index}", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "上海"}'}}]}
        text = (f"第 {index} 个问题：订单 {20241000 + index} 到了吗？上海天气？" if index % 3
                else f"First check order {20241000 + index}, then book the courier.")
        steps.append(("prepare", {"text": text, "tools": [WEATHER]}))
        steps.append(("record", {"assistant": call, "tool_results": [
            {"tool_call_id": f"c{index}", "content": '{"weather": "多云", "temp": 21}'}]}))
        steps.append(("prepare", {"text": None, "tools": [WEATHER]}))
        steps.append(("record", {"assistant": f"订单 {20241000 + index} 已发货，多云。"}))
    return steps


def manager(store: Store | AsyncStore, clock: FakeClock) -> ContextManager:
    return ContextManager(store, background=False, tokenizer="estimate", clock=clock)


def outcome(kind: str, result: Any) -> str:
    """One step's result as text: the request and report of a prepare, the seqs of a record."""
    if kind == "record":
        return json.dumps(result)
    body = result.to_request("openai")
    assert isinstance(body.pop("prompt_cache_key"), str)  # names the session: ids differ
    return json.dumps([body, result.report.to_dict(), result.mode, result.user_seq],
                      ensure_ascii=False, sort_keys=True, default=str)


def stored(messages: Sequence[Any], state: Any) -> str:
    log = [(m.seq, m.created_at, m.message) for m in messages]
    return json.dumps([log, state.data if state else None], ensure_ascii=False, sort_keys=True)


def run_sync(store: Store, key: SessionKey) -> tuple[list[str], str]:
    clock = FakeClock(START)
    cm = manager(store, clock)
    results = []
    for kind, args in script():
        clock.advance(1)
        call = cm.prepare if kind == "prepare" else cm.record
        results.append(outcome(kind, call(key.user_id, key.session_id, **args)))
    cm.close()
    return results, stored(store.read(key), store.get_state(key))


async def run_async(store: AsyncStore, key: SessionKey) -> tuple[list[str], str]:
    clock = FakeClock(START)
    cm = manager(store, clock)
    results = []
    for kind, args in script():
        clock.advance(1)
        call = cm.aprepare if kind == "prepare" else cm.arecord
        results.append(outcome(kind, await call(key.user_id, key.session_id, **args)))
    await cm.aclose()
    return results, stored(await store.read(key), await store.get_state(key))


def test_sync_and_async_give_identical_requests_reports_and_stored_state(
        backend: Backend) -> None:
    # Both stores on one clock pattern, in one namespace: the async one must read and write
    # the sync one's layout too.
    sync_store = backend.make(clock=FakeClock(START))
    expected = run_sync(sync_store, SessionKey(user_id="sync", session_id="s"))

    async def main() -> tuple[list[str], str]:
        store = make_async_store(backend.spec, clock=FakeClock(START))
        try:
            return await run_async(store, SessionKey(user_id="async", session_id="s"))
        finally:
            await store.aclose()

    got = asyncio.run(main())
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    assert '"summary_upto": 0' not in got[1], "the script is long enough to be summarised"


def test_async_store_methods_are_native_coroutines(backend: Backend) -> None:
    store = make_async_store(backend.spec)
    assert isinstance(store, AsyncStore)
    for name in ("append", "append_if", "read", "epoch", "find_write", "count", "get_state",
                 "put_state", "list_sessions", "erase_session", "erase_user", "purge_expired",
                 "aclose"):
        assert asyncio.iscoroutinefunction(getattr(store, name)), name
    asyncio.run(store.aclose())


# ----- the event loop never waits -----


class _Watched(ContextManager):
    """Records the thread of every build, and the CPU time builds took."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.build_threads: set[int] = set()
        self.build_cpu = 0.0

    def _build(self, *args: Any, **kwargs: Any) -> FinalContext:
        began = time.thread_time()
        try:
            return super()._build(*args, **kwargs)
        finally:
            self.build_threads.add(threading.get_ident())
            self.build_cpu += time.thread_time() - began


class _WatchedSummarizer(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        self.threads.add(threading.get_ident())
        return super().summarize(previous, messages, language=language, max_tokens=max_tokens,
                                 tokenizer=tokenizer)


def test_builds_and_summaries_never_run_on_the_event_loop(backend: Backend) -> None:
    summarizer = _WatchedSummarizer()
    watched: list[_Watched] = []

    async def main() -> int:
        store = make_async_store(backend.spec)
        cm = _Watched(store, summarizer=summarizer, tokenizer="estimate")
        watched.append(cm)
        for kind, args in script():
            call = cm.aprepare if kind == "prepare" else cm.arecord
            await call("u", "s", **args)
        await cm.aclose()
        assert (await cm.astate("u", "s")).summary_upto > 0
        await store.aclose()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert summarizer.threads and watched[0].build_threads
    assert loop_thread not in summarizer.threads | watched[0].build_threads


def only_sliding_window() -> ModesConfig:
    base = ModesConfig.default()
    return ModesConfig(modes=base.modes, rules=(), default_mode=SLIDING_WINDOW)


def test_many_concurrent_prepares_of_long_sessions_leave_the_loop_idle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop thread spends a small fraction of the CPU time the builds it awaited took.

    Each session's first prepare indexes and ranks 20,000 messages for recall (hundreds of
    milliseconds of CPU; the indexing is a computation of its own, counted with the builds). Run
    on the loop, the builds alone would cost the loop thread that CPU time; awaited, they cost
    it a few store calls and thread hops. CPU time, not wall time, is compared, so a loaded
    machine (or a garbage collection pause) cannot make it fail; the loop's longest pause is
    what ``bench/async_prepare.py`` reports.
    """
    sessions, size = 4, 20_000

    async def main() -> tuple[float, _Watched, int]:
        store = AsyncMemoryStore()
        for index in range(sessions):
            key = SessionKey(user_id="u", session_id=f"s{index}")
            await store.append(key, [
                {"role": "user" if i % 2 == 0 else "assistant",
                 "content": f"order {100000 + i} ships to 12 Park Lane, parcel SF{i}88"}
                for i in range(size)])
        cm = _Watched(store, modes=only_sliding_window(), tokenizer="estimate",
                      background=False)
        catch_up = session_recall._catch_up

        def watched_catch_up(*args: Any) -> Any:
            began = time.thread_time()
            try:
                return catch_up(*args)
            finally:
                cm.build_threads.add(threading.get_ident())
                cm.build_cpu += time.thread_time() - began

        monkeypatch.setattr(session_recall, "_catch_up", watched_catch_up)
        for index in range(sessions):
            await cm.asummarize_now("u", f"s{index}")
        cm.build_cpu = 0.0
        began = time.thread_time()
        await asyncio.gather(*(cm.aprepare("u", f"s{index}", f"where is order {100007 + i}?")
                               for index in range(sessions) for i in range(3)))
        loop_cpu = time.thread_time() - began
        await cm.aclose()
        return loop_cpu, cm, threading.get_ident()

    loop_cpu, cm, loop_thread = asyncio.run(main())
    assert loop_thread not in cm.build_threads
    assert cm.build_cpu > 0.1, "the builds were meant to be heavy; the check says nothing"
    assert loop_cpu < cm.build_cpu / 4


# ----- sync and async workers on one session -----


def test_sync_and_async_workers_interleave_on_one_session(backend: Backend) -> None:
    if backend.name == "memory":
        memory = MemoryStore()
        sync_store: Store = memory
        make: Callable[[], AsyncStore] = lambda: AsyncMemoryStore(store=memory)  # noqa: E731
    else:
        sync_store = backend.make()
        make = lambda: make_async_store(backend.spec)  # noqa: E731
    key = SessionKey(user_id="u", session_id="shared")
    sync_cm = ContextManager(sync_store, background=False, tokenizer="estimate")
    turns = 6

    async def main() -> None:
        store = make()
        async_cm = ContextManager(store, background=False, tokenizer="estimate")
        for turn in range(turns):  # the workers take turns: each sees the other's last answer
            worker = "sync" if turn % 2 == 0 else "async"
            text = f"{worker} question {turn}: order {20241000 + turn}?"
            if worker == "sync":
                ctx = await asyncio.to_thread(sync_cm.prepare, "u", "shared", text)
                await asyncio.to_thread(sync_cm.record, "u", "shared",
                                        assistant=f"answer {turn} from sync")
            else:
                ctx = await async_cm.aprepare("u", "shared", text)
                await async_cm.arecord("u", "shared", assistant=f"answer {turn} from async")
            if turn:
                shown = json.dumps(ctx.to_messages(), ensure_ascii=False)
                other = "async" if worker == "sync" else "sync"
                assert f"answer {turn - 1} from {other}" in shown
        # Then both at once: a thread and tasks append to the same session.
        writer = threading.Thread(target=lambda: [sync_cm.record(
            "u", "shared", messages=[{"role": "user", "content": f"sync note {i}"}])
            for i in range(30)])
        writer.start()
        await asyncio.gather(*(async_cm.arecord(
            "u", "shared", messages=[{"role": "user", "content": f"async note {i}"}])
            for i in range(30)))
        await asyncio.to_thread(writer.join)
        log = await store.read(key)
        assert [m.seq for m in log] == list(range(1, 2 * turns + 60 + 1))
        for worker in ("sync", "async"):
            notes = [m.message["content"] for m in log
                     if str(m.message["content"]).startswith(f"{worker} note")]
            assert sorted(notes) == sorted(f"{worker} note {i}" for i in range(30))
        assert (await async_cm.astate("u", "shared")) == sync_cm.state("u", "shared")
        await store.aclose()

    asyncio.run(main())


# ----- erasure wins; retries store once -----


def test_erase_racing_aprepare_never_brings_back_state(backend: Backend) -> None:
    secret = "first check card 4111 1111 1111 1111, then call the bank api"
    rng = random.Random(5)

    async def main() -> None:
        store = make_async_store(backend.spec)
        cm = ContextManager(store, background=False, tokenizer="estimate")
        for round_ in range(20):
            user = f"u{round_}"
            key = SessionKey(user_id=user, session_id="s")
            await cm.aprepare(user, "s", "hello, my name is Ada")
            errors: list[ContextwrightError] = []

            async def prepare(u: str = user, caught: list[ContextwrightError] = errors
                              ) -> None:
                try:
                    await cm.aprepare(u, "s", secret)
                except ContextwrightError as exc:
                    caught.append(exc)

            async def erase(u: str = user) -> None:
                await asyncio.sleep(rng.random() * 0.004)
                await cm.aerase_user(u)

            await asyncio.gather(prepare(), erase())
            assert all(isinstance(error, SessionGone) for error in errors), errors
            left = [m.message["content"] for m in await store.read(key)]
            if left:  # the message came after the erase: a new session of its own
                assert left == [secret] and not errors
            else:
                assert await store.get_state(key) is None, "state came back after the erase"
                assert not [k for k in cm._messages if k[0] == user]
        await store.aclose()

    asyncio.run(main())


def test_retried_arecord_and_aprepare_store_once(backend: Backend) -> None:
    async def main() -> None:
        store = make_async_store(backend.spec)
        cm = ContextManager(store, background=False, tokenizer="estimate")
        first = await cm.aprepare("u", "s", "check order 7", idempotency_key="m1")
        again = await cm.aprepare("u", "s", "check order 7", idempotency_key="m1")
        assert first.user_seq == again.user_seq == 1
        assert await cm.arecord("u", "s", assistant="shipped", idempotency_key="r1") == [2]
        assert await cm.arecord("u", "s", assistant="shipped", idempotency_key="r1") == [2]
        assert await store.count(SessionKey(user_id="u", session_id="s")) == 2
        await store.aclose()

    asyncio.run(main())


# ----- background summaries, misuse -----


def test_aflush_waits_for_the_summary_tasks() -> None:
    async def main() -> None:
        cm = ContextManager(AsyncMemoryStore(), tokenizer="estimate")  # background summaries
        for kind, args in script(12):
            call = cm.aprepare if kind == "prepare" else cm.arecord
            await call("u", "s", **args)
        await cm.aflush()
        assert not cm._atasks
        assert (await cm.astate("u", "s")).summary_upto > 0
        await cm.aclose()

    asyncio.run(main())


def test_a_blocking_call_on_an_async_store_is_a_store_usage_error() -> None:
    cm = ContextManager(AsyncMemoryStore())
    for call in (lambda: cm.prepare("u", "s", "hi"), lambda: cm.record("u", "s", assistant="x"),
                 lambda: cm.state("u", "s"), lambda: cm.erase_user("u")):
        with pytest.raises(StoreUsageError, match="aprepare"):
            call()


def test_an_async_store_serves_one_event_loop(backend: Backend) -> None:
    if backend.name in ("memory", "sqlite"):
        pytest.skip("the in-process stores hold no connection bound to a loop")
    store = make_async_store(backend.spec)
    key = SessionKey(user_id="u", session_id="s")
    with asyncio.Runner() as first:
        first.run(store.append(key, [{"role": "user", "content": "hi"}]))
        with pytest.raises(StoreUsageError, match="another event loop"):
            asyncio.run(store.count(key))
        first.run(store.aclose())


def test_aprepare_over_a_sync_store_runs_on_a_thread_and_matches_prepare() -> None:
    cm = ContextManager(MemoryStore(), background=False, tokenizer="estimate")
    expected = cm.prepare("u", "a", "hello there").to_request("openai")
    got = asyncio.run(cm.aprepare("u", "b", "hello there")).to_request("openai")
    assert got.pop("prompt_cache_key") != expected.pop("prompt_cache_key")
    assert got == expected


# ----- opening by URL -----


def test_open_async_store_understands_each_scheme(backend: Backend, tmp_path: Any) -> None:
    if backend.name == "memory":
        url = "memory://"
    elif backend.name == "sqlite":
        url = f"sqlite:///{tmp_path}/via-url.db"
    elif backend.name == "redis":
        url = f"{backend.spec.target}?prefix={backend.spec.options['prefix']}"
    else:
        url = f"{backend.spec.target}?schema={backend.spec.options['schema']}"

    async def main() -> None:
        store = open_async_store(url, ttl_seconds=60)
        assert type(store).__name__.lower().startswith(f"async{backend.name}")
        key = SessionKey(user_id="via-url", session_id="s")
        await store.append(key, [{"role": "user", "content": "via url"}])
        assert [m.message["content"] for m in await store.read(key)] == ["via url"]
        await store.aclose()

    asyncio.run(main())
    if backend.name in ("redis", "postgres"):  # the URL's prefix / schema was honoured
        listed = [info.key.user_id for info in backend.make().list_sessions()]
        assert listed == ["via-url"]


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0",
                                 "postgresql://postgres@127.0.0.1:1/test",
                                 "sqlite:////nonexistent-dir/for/sure/x.db"])
def test_unreachable_async_store_raises_store_unavailable_on_first_use(url: str) -> None:
    from contextwright.errors import StoreUnavailable

    async def main() -> None:
        store = open_async_store(url)
        with pytest.raises(StoreUnavailable):
            await store.count(SessionKey(user_id="u", session_id="s"))
        await store.aclose()

    asyncio.run(main())


# ----- one sans-I/O core -----

FLOW_MODULES = ("manager/flows.py", "manager/summaries.py", "manager/recall.py",
                "session/state.py", "session/postgres_common.py", "session/redis_common.py")
IO_MODULES = {"asyncio", "sqlite3", "redis", "psycopg", "psycopg_pool", "socket", "httpx",
              "concurrent"}


def test_the_shared_logic_imports_no_driver_and_no_event_loop() -> None:
    """The flows and the shared SQL / Lua layer run under both drivers: neither kind's I/O."""
    import ast
    from pathlib import Path

    import contextwright

    root = Path(contextwright.__file__).parent
    for module in FLOW_MODULES:
        tree = ast.parse((root / module).read_text("utf-8"))
        top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        names = {alias.name.split(".")[0] for node in top if isinstance(node, ast.Import)
                 for alias in node.names}
        names |= {(node.module or "").split(".")[0] for node in top
                  if isinstance(node, ast.ImportFrom)}
        assert not names & IO_MODULES, (module, names & IO_MODULES)


def test_the_session_package_exports_the_async_store_api() -> None:
    import contextwright.session as session

    for name in ("AsyncStore", "AsyncMemoryStore", "AsyncSqliteStore", "AsyncRedisStore",
                 "AsyncPostgresStore", "open_async_store"):
        assert name in session.__all__
        assert getattr(session, name) is not None
