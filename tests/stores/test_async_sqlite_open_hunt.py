"""``AsyncSqliteStore`` tries to open its file again after a failed first attempt.

It opened the file once, when made, and kept that outcome: a store made before its directory
existed (a volume mounted later, a directory a deploy step creates) raised the same
``StoreUnavailable`` on every call for good, where the Redis and PostgreSQL stores connect
again on the next call. It now opens the file on the next call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from contextwright.errors import StoreUnavailable
from contextwright.session import AsyncSqliteStore, SessionKey

KEY = SessionKey(user_id="u", session_id="s")


def test_the_next_call_opens_the_file_once_it_can(tmp_path: Path) -> None:
    directory = tmp_path / "not-yet"
    store = AsyncSqliteStore(directory / "sessions.db")

    async def main() -> list[int]:
        try:
            with pytest.raises(StoreUnavailable):
                await store.count(KEY)
            directory.mkdir()
            return await store.append(KEY, [{"role": "user", "content": "hi"}])
        finally:
            await store.aclose()

    assert asyncio.run(main()) == [1]
    assert (directory / "sessions.db").is_file()
