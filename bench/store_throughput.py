"""Session store throughput: appends/s and reads of the last N, for every backend.

For memory (the reference), SQLite (a file in a temp dir, WAL, ``synchronous=NORMAL`` — the
default — and ``FULL``), Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432, db ``test``),
one process, one thread:

- append x1: single-message appends (one transaction each), appends per second;
- append x10: batches of 10 messages, messages per second;
- read last 50: ``read(key, last=50)`` on a 10,000-message session, median and p95 latency.

Messages are ~60-token chat messages (English and Chinese). Each backend runs in a throw-away
namespace (temp file, random Redis prefix, random PostgreSQL schema) that is removed afterwards.

Run: ``.venv/bin/python bench/store_throughput.py [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from contextwright.session import (
    MemoryStore,
    PostgresStore,
    RedisStore,
    SessionKey,
    SqliteStore,
    Store,
)

REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
SESSION_SIZE = 10_000
LAST = 50


ENGLISH = "Could you check the weather in Shanghai tomorrow and remind me to bring an umbrella "
CHINESE = "帮我查一下订单号 20241001 的物流状态，顺便把收货地址改成上海市浦东新区 "


def message(index: int) -> dict[str, Any]:
    text = ENGLISH if index % 2 else CHINESE
    return {"role": "user" if index % 2 else "assistant", "content": f"{text}#{index}",
            "id": f"m{index}", "timestamp": 1_700_000_000 + index}


@contextmanager
def memory_store() -> Iterator[Store]:
    store = MemoryStore()
    yield store
    store.close()


def sqlite_store(synchronous: str) -> Callable[[], Any]:
    @contextmanager
    def opened() -> Iterator[Store]:
        with tempfile.TemporaryDirectory() as folder:
            store = SqliteStore(Path(folder) / "bench.db", synchronous=synchronous)
            yield store
            store.close()
    return opened


@contextmanager
def redis_store() -> Iterator[Store]:
    import redis

    prefix = f"cwbench-{uuid.uuid4().hex}"
    store = RedisStore(REDIS_URL, prefix=prefix)
    yield store
    store.close()
    client = redis.Redis.from_url(REDIS_URL)
    for name in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(name)
    client.close()


@contextmanager
def postgres_store() -> Iterator[Store]:
    import psycopg

    schema = f"cwbench_{uuid.uuid4().hex}"
    store = PostgresStore(POSTGRES_DSN, schema=schema)
    yield store
    store.close()
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


BACKENDS: dict[str, Callable[[], Any]] = {
    "memory": memory_store,
    "sqlite (FULL)": sqlite_store("FULL"),
    "sqlite (NORMAL)": sqlite_store("NORMAL"),
    "redis": redis_store,
    "postgres": postgres_store,
}


def appends_per_second(store: Store, count: int, batch: int) -> float:
    key = SessionKey(user_id="bench", session_id=f"append-{batch}")
    batches = [[message(i * batch + j) for j in range(batch)] for i in range(count)]
    start = time.perf_counter()
    for messages in batches:
        store.append(key, messages)
    return count * batch / (time.perf_counter() - start)


def read_last_latency(store: Store, reads: int) -> tuple[float, float]:
    key = SessionKey(user_id="bench", session_id="read")
    for first in range(0, SESSION_SIZE, 1000):
        store.append(key, [message(i) for i in range(first, first + 1000)])
    assert store.count(key) == SESSION_SIZE
    times = []
    for _ in range(reads):
        start = time.perf_counter()
        got = store.read(key, last=LAST)
        times.append(time.perf_counter() - start)
        assert [m.seq for m in got] == list(range(SESSION_SIZE - LAST + 1, SESSION_SIZE + 1))
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def run(name: str, quick: bool) -> dict[str, Any]:
    singles, batches, reads = (200, 50, 50) if quick else (2000, 500, 500)
    with BACKENDS[name]() as store:
        single = appends_per_second(store, singles, 1)
        batched = appends_per_second(store, batches, 10)
        median, p95 = read_last_latency(store, reads)
    return {"backend": name, "append_x1_per_s": single, "append_x10_msgs_per_s": batched,
            "read_last50_median_ms": 1000 * median, "read_last50_p95_ms": 1000 * p95}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer operations (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated subset of: " + ", ".join(BACKENDS))
    args = parser.parse_args()
    rows = [run(name.strip(), args.quick) for name in args.backends.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'backend':<16} {'append x1 /s':>13} {'append x10 msg/s':>17} "
          f"{'read last 50 median':>20} {'p95':>9}")
    for row in rows:
        print(f"{row['backend']:<16} {row['append_x1_per_s']:>13,.0f} "
              f"{row['append_x10_msgs_per_s']:>17,.0f} "
              f"{row['read_last50_median_ms']:>17.3f} ms {row['read_last50_p95_ms']:>6.3f} ms")


if __name__ == "__main__":
    main()
