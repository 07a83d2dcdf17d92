"""Every store takes the same ids and idempotency keys, and refuses the same ones alike.

PostgreSQL keys its tables by the ids: a key past its btree row limit (2,704 bytes) cannot be
stored. Ids are limited in UTF-8 bytes as well as characters, so what one store takes every
store takes (random CJK or emoji, which do not compress, included), and a longer id is an
``InvalidInputError`` everywhere, never a "server unavailable" error a retry loop would repeat.
"""

from __future__ import annotations

import random

import pytest
from store_workers import Backend

from contextwright.errors import InvalidInputError
from contextwright.manager import ContextManager
from contextwright.session import SessionKey


def _random_text(count: int, low: int, high: int, seed: int) -> str:
    chooser = random.Random(seed)
    return "".join(chr(chooser.randint(low, high)) for _ in range(count))


def _cjk(count: int, seed: int) -> str:
    return _random_text(count, 0x4E00, 0x9FFF, seed)  # 3 bytes each


def _emoji(count: int, seed: int) -> str:
    return _random_text(count, 0x1F300, 0x1F5FF, seed)  # 4 bytes each


def test_the_longest_ids_and_keys_are_stored_with_and_without_keys(backend: Backend) -> None:
    store = backend.make()
    for user, session, key in ((_cjk(341, 1), _cjk(341, 2), _cjk(170, 3)),
                               (_emoji(256, 4), _emoji(256, 5), _emoji(128, 6))):
        session_key = SessionKey(user_id=user, session_id=session)
        assert store.append(session_key, [{"role": "user", "content": "hi"}]) == [1]
        written = store.append_if(session_key, [{"role": "assistant", "content": "hello"}],
                                  idempotency_key=key)
        assert written.seqs == [2]
        assert store.find_write(session_key, key) == [2]
        cm = ContextManager(store=store, background=False)
        turn = key[::-1]  # another key as long
        cm.prepare(user, session, "and now?", idempotency_key=turn)
        assert cm.record(user, session, assistant="now this.", idempotency_key=turn) == [4]
        assert cm.erase_session(user, session)


def test_longer_ids_and_keys_are_refused_alike_as_invalid_input(backend: Backend) -> None:
    store = backend.make()
    ok = _cjk(10, 7)
    for user, session, key in ((_cjk(342, 8), ok, None), (ok, _emoji(257, 9), None),
                               (ok, ok, _cjk(171, 10))):
        with pytest.raises(InvalidInputError, match="bytes"):
            store.append_if(SessionKey(user_id=user, session_id=session),
                            [{"role": "user", "content": "hi"}], idempotency_key=key)
    cm = ContextManager(store=store, background=False)
    with pytest.raises(InvalidInputError, match="bytes"):
        cm.prepare(ok, ok, "hi", idempotency_key=_cjk(171, 11))
    assert store.list_sessions() == []
