"""Steady-state ``ContextManager.prepare`` latency on a SQLite session, per mode.

A session is filled with N messages (English and Chinese, ~60 tokens each), its old rounds are
summarised once, then each step is: prepare(text) — timed — and record(reply), with summary
updates running in the background as in production, back to back (``--settle``: each update
finishes before the next ``prepare``, as when a user reads the reply and types; back to back,
the update of the last round contends with the ``prepare`` for the interpreter). Target: ≤ 3 ms
median at 10,000 messages and flat as the session grows (100,000 within 1.2× of 1,000).

The sliding window recalls summarised turns relevant to the input (session-wide recall, on by
default for that mode); three more cases isolate it: the same mode with recall off, questions
about one old order each (a summarised turn the recaller must find), and the same five such
questions asked again and again (``recall_repeat``: their turns pile up in the cached layout,
so the cost grows until the budget is full; ``--trend`` shows it). A manager's first
``prepare`` of a session indexes the turns before the messages it reads; it is reported apart
(``first``: the first case of a run also pays for the process's cold caches), the median is of
the steady state.

    .venv/bin/python bench/prepare_speed.py [--sizes 1000,10000,100000] [--steps 200]
        [--synchronous NORMAL|FULL] [--cases sliding_window,recall_off,recall_old,...]
        [--no-cache] [--settle] [--trend] [--profile]

``--trend`` also prints each case's median per fifth of its steps: a cost that grows with the
session (recalled turns piling up in the cached layout) shows there, not in the median.
``--profile`` prints, instead of the table, where each case's steady prepares spend their time
(cProfile): the function calls per ``prepare`` are exact, so two commits compare by them on a
machine too loaded to compare milliseconds.

``--fresh-worker memory,sqlite,redis,postgresql`` measures instead what a fresh worker's first
``prepare`` of a long stored session costs on each store: one worker prepares the session
(indexing it and storing the index beside it), then, with every process cache cleared, a new
manager prepares it again: once loading the stored index (``stored index``), once over the same
store without its index methods, so it indexes every message as before (``no stored index``).
Redis and PostgreSQL are the servers on 127.0.0.1 (``--redis``, ``--postgres``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from contextwright import clear_caches
from contextwright.manager import ContextManager
from contextwright.modes import RAG_ENHANCED, SLIDING_WINDOW, STRUCTURED, ModesConfig
from contextwright.modes.config import RecallSettings
from contextwright.recall import clear_recall_caches
from contextwright.session import SqliteStore
from contextwright.session.store import SessionKey

USER_LINES = [
    "Can you check order {n} for me? It was supposed to arrive on Tuesday at 12 Park Lane.",
    "帮我看一下订单 {n} 的物流，应该周二送到北京市朝阳区建国路88号。",
    "I also need the invoice for order {n}, addressed to the company, with the tax number.",
    "这个订单 {n} 能不能改成周末配送？平时家里没人，快递放门口不太放心。",
]
REPLY = ("Order {n} left the warehouse yesterday and is with the courier; tracking number "
         "SF{n}88, expected delivery Tuesday before 18:00. 预计周二18点前送达。")
TOOLS = [{"type": "function", "function": {
    "name": f"tool_{i}", "description": f"Tool number {i} that looks things up.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    for i in range(6)]
DOCS = [{"id": f"policy-{i}", "text": f"Refund policy section {i}: refunds within 15 days. " * 8}
        for i in range(5)]


def fill(store: Any, key: SessionKey, size: int) -> None:
    batch: list[dict[str, str]] = []
    for i in range(size // 2):
        batch.append({"role": "user", "content": USER_LINES[i % 4].format(n=100000 + i)})
        batch.append({"role": "assistant", "content": REPLY.format(n=100000 + i)})
        if len(batch) >= 2000:
            store.append(key, batch)
            batch = []
    if batch:
        store.append(key, batch)


def only(mode: str, recall: RecallSettings | None = None) -> ModesConfig:
    base = ModesConfig.default()
    modes = dict(base.modes)
    if recall is not None:
        modes[mode] = replace(modes[mode], recall=recall)
    return ModesConfig(modes=MappingProxyType(modes), rules=(), default_mode=mode)


def usual_line(step: int, size: int) -> str:
    return USER_LINES[step % 4].format(n=900000 + step)


def old_order_question(step: int, size: int) -> str:
    # An order from the summarised part of the session: one turn names it.
    order = 100000 + (step * 7919) % max(size // 2 - 200, 1)
    return f"What was the tracking number for order {order} again?"


def repeated_question(step: int, size: int) -> str:
    # The same five questions about old orders, asked again and again: their recalled turns
    # stay in the cached layout, so what each prepare shows grows until the budget is full.
    return old_order_question(step % 5, size)


@dataclass(frozen=True)
class Case:
    mode: str
    text: Callable[[int, int], str] = usual_line
    recall: RecallSettings | None = None
    """None: the mode's default."""


CASES = {
    SLIDING_WINDOW: Case(SLIDING_WINDOW),
    "recall_off": Case(SLIDING_WINDOW, recall=RecallSettings(share=0)),
    "recall_old": Case(SLIDING_WINDOW, text=old_order_question),
    "recall_repeat": Case(SLIDING_WINDOW, text=repeated_question),
    RAG_ENHANCED: Case(RAG_ENHANCED),
    STRUCTURED: Case(STRUCTURED),
}


def measure(name: str, size: int, steps: int, folder: Path, synchronous: str,
            profiler: cProfile.Profile | None = None) -> tuple[float, float, list[float]]:
    """(median steady-state prepare, the manager's first prepare of the session, the median
    of each fifth of the steps), in ms. ``profiler`` is on for the prepares the median is
    of (the steps after the first fifth), and only for them."""
    case = CASES[name]
    store = SqliteStore(folder / f"{name}-{size}.db", synchronous=synchronous)
    key = SessionKey(user_id="bench", session_id=f"{name}-{size}")
    fill(store, key, size)
    cm = ContextManager(store=store, modes=only(case.mode, case.recall), background=True,
                        cache=CACHE)
    extra = {"tools": TOOLS} if case.mode == STRUCTURED else {}
    extra_docs = {"documents": DOCS} if case.mode == RAG_ENHANCED else {}
    start = time.perf_counter()  # a cold start: with recall, the session's turns are indexed
    cm.prepare(key.user_id, key.session_id, "hello", **extra, **extra_docs)  # type: ignore[arg-type]
    first = time.perf_counter() - start
    cm.record(key.user_id, key.session_id, assistant="hi")
    cm.summarize_now(key.user_id, key.session_id)  # the old rounds, once
    timings = []
    for step in range(steps):
        text = case.text(step, size)
        profiling = profiler is not None and step >= steps // 5
        if profiling:
            profiler.enable()
        start = time.perf_counter()
        cm.prepare(key.user_id, key.session_id, text, **extra, **extra_docs)  # type: ignore[arg-type]
        timings.append(time.perf_counter() - start)
        if profiling:
            profiler.disable()
        cm.record(key.user_id, key.session_id, assistant=REPLY.format(n=900000 + step))
        if SETTLE:  # untimed: the user reads the reply and types while the update runs
            cm.flush()
    cm.flush()
    cm.close()
    store.close()
    fifths = [statistics.median(timings[at * steps // 5:(at + 1) * steps // 5] or [0.0]) * 1000
              for at in range(5)]
    return statistics.median(timings[steps // 5:]) * 1000, first * 1000, fifths


def profile_case(name: str, size: int, steps: int, folder: Path, synchronous: str,
                 top: int = 25) -> str:
    """Where ``name``'s steady prepares spend their time, as pstats text.

    The profiler slows small calls more than large ones: the shares are a guide, the call
    counts exact (the same code and steps make the same calls, however loaded the machine).
    """
    profiler = cProfile.Profile()
    measure(name, size, steps, folder, synchronous, profiler)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    profiled = steps - steps // 5
    out.write(f"## {name}, {size:,} messages: {stats.total_calls / profiled:,.0f} function "
              f"calls per prepare ({profiled} prepares)\n")
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


CACHE = True
"""Whether the manager keeps a stable prefix (``--no-cache``: off)."""
SETTLE = False
"""Whether each record's summary update finishes before the next prepare (``--settle``)."""


class WithoutIndex:
    """A store as one that keeps no recall index: every method but the index ones."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("read_index", "append_index"):
            raise AttributeError(name)
        return getattr(self._store, name)


def open_store(kind: str, folder: Path, redis: str, postgres: str) -> tuple[Any, Any]:
    """A store of ``kind`` in a namespace of its own, and what removes that namespace."""
    name = uuid.uuid4().hex[:12]
    if kind == "memory":
        from contextwright.session import MemoryStore
        store: Any = MemoryStore()
        return store, store.close
    if kind == "sqlite":
        store = SqliteStore(folder / f"fresh-{name}.db")
        return store, store.close
    if kind == "redis":
        from contextwright.session.redis import RedisStore
        store = RedisStore(redis, prefix=f"cwbench-{name}")
    else:
        from contextwright.session.postgres import PostgresStore
        store = PostgresStore(postgres, schema=f"cwbench_{name}")

    def drop() -> None:
        for info in store.list_sessions():
            store.erase_session(info.key)
        if kind == "postgresql":
            import psycopg
            with psycopg.connect(postgres, autocommit=True) as admin:
                admin.execute(f'DROP SCHEMA IF EXISTS "cwbench_{name}" CASCADE')
        store.close()
    return store, drop


def fresh_worker(kind: str, size: int, repeats: int, folder: Path, redis: str,
                 postgres: str) -> tuple[float, float]:
    """(first prepare with the stored index, without it), medians in ms, cold caches each."""
    store, drop = open_store(kind, folder, redis, postgres)
    key = SessionKey(user_id="bench", session_id=f"fresh-{size}")
    try:
        fill(store, key, size)
        worker = ContextManager(store=store, modes=only(SLIDING_WINDOW), background=False,
                                cache=CACHE)
        worker.prepare(key.user_id, key.session_id, "hello")  # indexes and stores the index
        worker.close()
        timings: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for stored in (True, False):  # alternated: the machine's load hits both alike
                clear_caches()
                clear_recall_caches()
                cm = ContextManager(store=store if stored else WithoutIndex(store),
                                    modes=only(SLIDING_WINDOW), background=False, cache=CACHE)
                start = time.perf_counter()
                cm.prepare(key.user_id, key.session_id, old_order_question(1, size))
                timings[stored].append(time.perf_counter() - start)
                cm.close()
        return (statistics.median(timings[True]) * 1000,
                statistics.median(timings[False]) * 1000)
    finally:
        drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--synchronous", default="NORMAL", choices=["NORMAL", "FULL"],
                        help="SQLite durability: NORMAL (default) or FULL (fsync per write)")
    parser.add_argument("--no-cache", action="store_true",
                        help="build without the stable prefix (and its fingerprint write)")
    parser.add_argument("--settle", action="store_true",
                        help="let the summary update each record schedules finish before the "
                             "next prepare (as when a user reads and replies); by default they "
                             "run back to back, and the update contends with the prepare")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--fresh-worker", default="",
                        help="comma-separated stores (memory,sqlite,redis,postgresql): a fresh "
                             "worker's first prepare with and without the stored index")
    parser.add_argument("--repeats", type=int, default=3, help="with --fresh-worker")
    parser.add_argument("--trend", action="store_true",
                        help="also print each case's median per fifth of the steps (a cost "
                             "that grows as the session does shows there)")
    parser.add_argument("--profile", action="store_true",
                        help="instead of the table: each case's steady prepares under cProfile "
                             "(function calls per prepare, where the time goes)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    global CACHE, SETTLE
    CACHE = not args.no_cache
    SETTLE = args.settle
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.fresh_worker:
        kinds = [kind for kind in args.fresh_worker.split(",") if kind]
        unknown_kinds = sorted(set(kinds) - {"memory", "sqlite", "redis", "postgresql"})
        if unknown_kinds:
            parser.error(f"unknown stores: {', '.join(unknown_kinds)}")
        print("| store | messages | first prepare, stored index | no stored index | ratio |")
        print("| --- | --- | --- | --- | --- |")
        with tempfile.TemporaryDirectory() as tmp:
            for kind in kinds:
                for size in sizes:
                    stored, rebuilt = fresh_worker(kind, size, args.repeats, Path(tmp),
                                                   args.redis, args.postgres)
                    print(f"| {kind} | {size:,} | {stored:.0f} ms | {rebuilt:.0f} ms | "
                          f"{rebuilt / stored:.1f}× |", flush=True)
        return
    cases = [name for name in args.cases.split(",") if name]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}")
    if args.profile:
        with tempfile.TemporaryDirectory() as tmp:
            for name in cases:
                for size in sizes:
                    print(profile_case(name, size, args.steps, Path(tmp), args.synchronous))
        return
    print("| case | " + " | ".join(f"{s:,} msgs (first)" for s in sizes)
          + " | largest / smallest |")
    print("| --- |" + " --- |" * (len(sizes) + 1))
    with tempfile.TemporaryDirectory() as tmp:
        for name in cases:
            results = [measure(name, size, args.steps, Path(tmp), args.synchronous)
                       for size in sizes]
            cells = " | ".join(f"{m:.2f} ms ({first:.0f} ms)" for m, first, _ in results)
            ratio = results[-1][0] / results[0][0]
            print(f"| {name} | {cells} | {ratio:.2f}× |", flush=True)
            if args.trend:
                for size, (_, _, fifths) in zip(sizes, results, strict=True):
                    print(f"  {name} at {size:,}: per fifth of the steps "
                          + " / ".join(f"{m:.2f}" for m in fifths) + " ms", flush=True)


if __name__ == "__main__":
    main()
