"""A session whose id is past today's byte limit, stored before there was one, can be erased.

Ids were limited to 512 characters before they were also limited to 1,024 UTF-8 bytes, so a
store may hold sessions under 400 CJK characters (1,200 bytes) or 300 emoji. Making a
``SessionKey`` of such an id raised ``InvalidInputError``, so the session could not be read,
erased or even listed (and listing every session failed on it): a user could not have their
data erased. New writes under such an id are still refused, the same way by every store; each
test plants the session straight into the backend's tables or keys, as an older version wrote it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

import psycopg
import pytest
import redis
from store_workers import Backend

from contextwright.errors import InvalidInputError
from contextwright.session import SessionKey, Store
from contextwright.session.memory import _Session
from contextwright.session.store import IndexStore

REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
LONG_SESSION = "会" * 400  # 1,200 bytes
LONG_USER = "\U0001f600" * 300  # 1,200 bytes
LEGACY = [("old-user", LONG_SESSION), (LONG_USER, "s1")]
MESSAGE = {"role": "user", "content": "stored long ago"}


def _plant(backend: Backend, store: Store, user: str, session: str) -> None:
    """Write a session with one message and a state as a store without the byte limit did."""
    now = time.time()
    body = json.dumps(MESSAGE)
    if backend.name == "memory":
        key = object.__new__(SessionKey)  # the key as it was made before the limit
        object.__setattr__(key, "user_id", user)
        object.__setattr__(key, "session_id", session)
        stored = _Session(created_at=now, updated_at=now, messages=[(now, body)],
                          state=(1, "{}", now))
        store._sessions[key] = stored  # type: ignore[attr-defined]
    elif backend.name == "sqlite":
        with sqlite3.connect(backend.spec.target) as db:
            db.execute("INSERT INTO sessions (user_id, session_id, created_at, updated_at,"
                       " last_seq, epoch) VALUES (?, ?, ?, ?, 1, 'e')", (user, session, now, now))
            db.execute("INSERT INTO messages VALUES (?, ?, 1, ?, ?)", (user, session, now, body))
            db.execute("INSERT INTO states VALUES (?, ?, 1, '{}', ?)", (user, session, now))
    elif backend.name == "redis":
        prefix = backend.spec.options["prefix"]
        client = redis.Redis.from_url(REDIS_URL)
        tail = f"{len(user)}:{user}:{session}"
        client.hset(f"{prefix}:meta:{tail}",
                    mapping={"created_at": repr(now), "updated_at": repr(now), "epoch": "e"})
        client.rpush(f"{prefix}:msgs:{tail}", f"{now!r} {body}")
        client.hset(f"{prefix}:state:{tail}",
                    mapping={"version": "1", "data": "{}", "updated_at": repr(now)})
        client.sadd(f"{prefix}:user:{len(user)}:{user}", session)
        client.sadd(f"{prefix}:users", user)
        client.close()
    else:
        schema = backend.spec.options["schema"]
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as db:
            db.execute(f'INSERT INTO "{schema}".sessions (user_id, session_id, created_at,'
                       " updated_at, last_seq, epoch) VALUES (%s, %s, %s, %s, 1, 'e')",
                       (user, session, now, now))
            db.execute(f'INSERT INTO "{schema}".messages VALUES (%s, %s, 1, %s, %s)',
                       (user, session, now, body))
            db.execute(f'INSERT INTO "{schema}".states VALUES (%s, %s, 1, %s, %s)',
                       (user, session, "{}", now))


def _ids(store: Store, user: str | None = None) -> list[tuple[str, str]]:
    return [(info.key.user_id, info.key.session_id) for info in store.list_sessions(user)]


@pytest.mark.parametrize(("user", "session"), LEGACY, ids=["long-session", "long-user"])
def test_a_stored_over_long_id_is_listed_read_and_erased(
        backend: Backend, user: str, session: str) -> None:
    store = backend.make()
    store.append(SessionKey(user_id="today", session_id="s"), [MESSAGE])
    _plant(backend, store, user, session)
    assert _ids(store) == sorted([(user, session), ("today", "s")])
    assert _ids(store, user) == [(user, session)]
    key = SessionKey(user_id=user, session_id=session)
    assert [m.message for m in store.read(key)] == [MESSAGE]
    assert store.count(key) == 1
    assert store.erase_session(key)
    assert store.read(key) == [] and store.get_state(key) is None
    assert _ids(store) == [("today", "s")]


def test_every_session_of_an_over_long_user_is_erased(backend: Backend) -> None:
    store = backend.make()
    _plant(backend, store, LONG_USER, "s1")
    _plant(backend, store, LONG_USER, LONG_SESSION[:100])
    assert store.erase_user(LONG_USER) == 2
    assert _ids(store) == []


@pytest.mark.parametrize(("user", "session"), LEGACY, ids=["long-session", "long-user"])
def test_nothing_new_is_written_under_an_over_long_id(
        backend: Backend, user: str, session: str) -> None:
    store = backend.make()
    key = SessionKey(user_id=user, session_id=session)
    writes: list[Any] = [
        lambda: store.append(key, [MESSAGE]),
        lambda: store.append_if(key, [MESSAGE], last_seq=0),
        lambda: store.put_state(key, {}, expected_version=None),
    ]
    if isinstance(store, IndexStore):  # the sync stores (and the memory store's own)
        writes.append(lambda: store.append_index(key, "part", epoch="e"))
    for write in writes:
        with pytest.raises(InvalidInputError, match="bytes in UTF-8"):
            write()
    assert _ids(store) == []
    _plant(backend, store, user, session)  # nor added to a session stored before the limit
    for write in writes:
        with pytest.raises(InvalidInputError, match="bytes in UTF-8"):
            write()
    assert store.count(key) == 1
