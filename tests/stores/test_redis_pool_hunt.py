"""A Redis store's connection pool at its limit: calls wait, or fail as never sent.

``AsyncRedisStore(max_connections=…)`` promises that calls beyond the limit wait for a
connection; redis-py's plain pool refuses them instead ("Too many connections"), before sending
anything, so such a refusal is never ``OutcomeUnknown``: retrying it cannot store twice.
"""

from __future__ import annotations

import asyncio
import os
import threading

from contextwright.errors import OutcomeUnknown, StoreUnavailable
from contextwright.session import AsyncRedisStore, RedisStore, SessionKey

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")



def test_async_calls_beyond_max_connections_wait_for_one(prefix: str) -> None:
    keys = [SessionKey(user_id="pool", session_id=f"s{index}") for index in range(12)]
    big = {"role": "tool", "content": "x" * 200_000}  # slow enough to overlap

    async def main() -> tuple[list[object], list[int]]:
        store = AsyncRedisStore(REDIS_URL, prefix=prefix, max_connections=2)
        try:
            results = await asyncio.gather(*(store.append(key, [big]) for key in keys),
                                           return_exceptions=True)
            return list(results), [await store.count(key) for key in keys]
        finally:
            await store.aclose()

    results, counts = asyncio.run(main())
    assert results == [[1]] * len(keys)
    assert counts == [1] * len(keys)


def test_a_full_pool_is_store_unavailable_not_outcome_unknown(prefix: str) -> None:
    store = RedisStore(f"{REDIS_URL}?max_connections=1", prefix=prefix)
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def writer(index: int) -> None:
        start.wait()
        for turn in range(20):
            try:
                store.append(SessionKey(user_id="pool", session_id=f"t{index}"),
                             [{"role": "user", "content": "y" * 50_000, "turn": turn}])
            except (OutcomeUnknown, StoreUnavailable) as exc:
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        store.close()
    assert errors, "the pool of one connection was never exhausted"
    assert not [error for error in errors if isinstance(error, OutcomeUnknown)]
