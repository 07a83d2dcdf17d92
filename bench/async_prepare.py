"""Concurrent ``aprepare`` throughput: native async store drivers against the thread path.

N sessions, each filled with M messages, are served at once from one event loop: every round
runs ``aprepare`` (a new user message) and then ``arecord`` (the answer) for every session
concurrently. Two managers do the same work on the same backend:

- ``thread``: ``ContextManager(<sync store>)`` — each call runs on the loop's default executor
  (``asyncio.to_thread``), as ``aprepare`` did before the async drivers;
- ``native``: ``ContextManager(<async store>)`` — store calls awaited on the loop
  (redis.asyncio, psycopg's async pool; SQLite on its store thread; memory inline), builds on
  the manager's build thread.

Reported per backend: calls per second for each (a call is one aprepare + one arecord), the
ratio native / thread, the 99th percentile of the event loop's pauses while they ran (a ticker
every 2 ms; wall time, so a loaded machine shows in it; the heap left by filling the sessions is
frozen first, so collecting it does not), and the loop thread's CPU time per call (what of each
call runs on the loop itself). Both managers run without
background summaries and prompt caching as configured by default. Redis and PostgreSQL are the
local servers (``CONTEXTWRIGHT_TEST_REDIS_URL``, ``CONTEXTWRIGHT_TEST_POSTGRES_DSN``); their keys /
schema are removed afterwards.

    .venv/bin/python bench/async_prepare.py [--sessions 32] [--messages 400] [--rounds 6]
        [--backends memory,sqlite,redis,postgres] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from contextwright.manager import ContextManager
from contextwright.session import (
    AsyncMemoryStore,
    AsyncPostgresStore,
    AsyncRedisStore,
    AsyncSqliteStore,
    AsyncStore,
    MemoryStore,
    PostgresStore,
    RedisStore,
    SqliteStore,
    Store,
)
from contextwright.session.store import SessionKey

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
USER = ("Can you check order {n} for me? It should arrive on Tuesday at 12 Park Lane.",
        "帮我看一下订单 {n} 的物流，应该周二送到北京市朝阳区建国路88号。")
REPLY = "Order {n} is with the courier; tracking SF{n}88, expected Tuesday before 18:00."


def history(size: int) -> list[dict[str, str]]:
    messages = []
    for i in range(size // 2):
        messages += [{"role": "user", "content": USER[i % 2].format(n=100000 + i)},
                     {"role": "assistant", "content": REPLY.format(n=100000 + i)}]
    return messages


class Backend:
    """One backend's sync and async store over one namespace (sync and async share data)."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.tag = uuid.uuid4().hex[:12]
        self._path = folder / f"{self.tag}.db"
        self._memory = MemoryStore()

    def sync(self) -> Store:
        if self.name == "memory":
            return self._memory
        if self.name == "sqlite":
            return SqliteStore(self._path)
        if self.name == "redis":
            return RedisStore(REDIS_URL, prefix=f"cwbench-{self.tag}")
        return PostgresStore(POSTGRES_DSN, schema=f"cwbench_{self.tag}")

    def native(self) -> AsyncStore:
        if self.name == "memory":
            return AsyncMemoryStore(store=self._memory)
        if self.name == "sqlite":
            return AsyncSqliteStore(self._path)
        if self.name == "redis":
            return AsyncRedisStore(REDIS_URL, prefix=f"cwbench-{self.tag}")
        return AsyncPostgresStore(POSTGRES_DSN, schema=f"cwbench_{self.tag}",
                                  max_connections=16)

    def clean(self) -> None:
        if self.name == "redis":
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            for key in client.scan_iter(match=f"cwbench-{self.tag}:*", count=1000):
                client.delete(key)
            client.close()
        elif self.name == "postgres":
            import psycopg

            with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
                admin.execute(f'DROP SCHEMA IF EXISTS "cwbench_{self.tag}" CASCADE')


async def serve(cm: ContextManager, user: str, sessions: int, rounds: int
                ) -> tuple[float, float, float]:
    """Calls per second over ``rounds`` concurrent rounds, the loop's p99 pause, its CPU/call."""
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async def turn(session: int, step: int) -> None:
        n = 900000 + step * 1000 + session
        await cm.aprepare(user, f"s{session}", USER[step % 2].format(n=n))
        await cm.arecord(user, f"s{session}", assistant=REPLY.format(n=n))

    await asyncio.gather(*(turn(s, 0) for s in range(sessions)))  # warm: indexes, caches
    # What the filling and warming left on the heap is frozen, so that collecting it (for
    # either manager alike) does not show up as a pause of the loop.
    gc.collect()
    gc.freeze()
    ticks = asyncio.create_task(ticker())
    began, cpu = time.perf_counter(), time.thread_time()
    for step in range(1, rounds + 1):
        await asyncio.gather(*(turn(s, step) for s in range(sessions)))
    elapsed, cpu = time.perf_counter() - began, time.thread_time() - cpu
    stop.set()
    await ticks
    gc.unfreeze()
    calls = sessions * rounds
    return calls / elapsed, statistics.quantiles(gaps, n=100)[98], cpu / calls


async def fill(store: Store, user: str, sessions: int, size: int) -> None:
    messages = history(size)
    for session in range(sessions):
        await asyncio.to_thread(store.append, SessionKey(user_id=user, session_id=f"s{session}"),
                                messages)


async def one_backend(backend: Backend, args: argparse.Namespace) -> dict[str, Any]:
    sync_store = backend.sync()
    results: dict[str, list[tuple[float, float, float]]] = {"thread": [], "native": []}
    for attempt in range(args.repeat):
        for kind in ("thread", "native"):  # alternated, so drift on a shared box hits both
            user = f"{kind}-{attempt}"
            await fill(sync_store, user, args.sessions, args.messages)
            if kind == "thread":
                cm = ContextManager(sync_store, background=False)
                results[kind].append(await serve(cm, user, args.sessions, args.rounds))
                cm.close()
            else:
                store = backend.native()
                cm = ContextManager(store, background=False)
                results[kind].append(await serve(cm, user, args.sessions, args.rounds))
                await cm.aclose()
                await store.aclose()
    if backend.name != "memory":
        sync_store.close()
    row: dict[str, Any] = {"backend": backend.name}
    for kind, runs in results.items():
        row[kind] = statistics.median(rate for rate, _, _ in runs)
        row[f"pause_{kind}"] = statistics.median(pause for _, pause, _ in runs)
        row[f"loop_{kind}"] = statistics.median(cpu for _, _, cpu in runs)
    row["ratio"] = row["native"] / row["thread"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backends", default="memory,sqlite,redis,postgres")
    args = parser.parse_args()
    print(f"{args.sessions} sessions × {args.messages} messages, {args.rounds} concurrent "
          f"rounds (aprepare + arecord per session), median of {args.repeat}")
    print(f"{'backend':<10}{'thread calls/s':>15}{'native calls/s':>15}{'native/thread':>14}"
          f"{'p99 pause thread':>17}{'p99 pause native':>17}{'loop CPU/call thread':>21}"
          f"{'loop CPU/call native':>21}")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.backends.split(","):
            backend = Backend(name, Path(folder))
            try:
                row = asyncio.run(one_backend(backend, args))
            finally:
                backend.clean()
            print(f"{row['backend']:<10}{row['thread']:>15.1f}{row['native']:>15.1f}"
                  f"{row['ratio']:>13.2f}×{row['pause_thread'] * 1000:>14.1f} ms"
                  f"{row['pause_native'] * 1000:>14.1f} ms{row['loop_thread'] * 1000:>18.2f} ms"
                  f"{row['loop_native'] * 1000:>18.2f} ms")


if __name__ == "__main__":
    main()
