"""Idempotency keys of the two calls stay apart; a closed store stays closed; summary updates
of an event loop that ends after each call are caught up, not lost quietly."""

from __future__ import annotations

import asyncio
import logging

import pytest
from store_workers import Backend, make_async_store

from contextwright.errors import StoreError
from contextwright.manager import ContextManager
from contextwright.session import AsyncMemoryStore, SessionKey

KEY = SessionKey(user_id="u", session_id="s")


def test_a_prepare_key_that_looks_like_a_record_key_is_another_write(backend: Backend) -> None:
    store = backend.make()
    cm = ContextManager(store=store, background=False)
    for turn in ("7", "record:7", "prepare:record:7"):
        cm.prepare("u", "s", f"question {turn}", idempotency_key=f"record:{turn}")
        cm.record("u", "s", assistant=f"answer {turn}", idempotency_key=turn)
    long_turn = "record:" + "x" * 249  # the longest key: prefixed, it is hashed
    cm.prepare("u", "s", "long question", idempotency_key=long_turn)
    cm.record("u", "s", assistant="long answer", idempotency_key=long_turn)
    assert [m.message["content"] for m in store.read(KEY)] == [
        "question 7", "answer 7", "question record:7", "answer record:7",
        "question prepare:record:7", "answer prepare:record:7", "long question", "long answer"]
    # Retries still name their first writes.
    assert cm.prepare("u", "s", "question 7", idempotency_key="record:7").user_seq == 1
    assert cm.record("u", "s", assistant="answer record:7", idempotency_key="record:7") == [4]
    assert store.count(KEY) == 8


def test_a_closed_store_refuses_every_call(backend: Backend) -> None:
    store = backend.make()
    store.append(KEY, [{"role": "user", "content": "hi"}])
    store.close()
    for call in (lambda: store.append(KEY, [{"role": "user", "content": "again"}]),
                 lambda: store.read(KEY), lambda: store.epoch(KEY), lambda: store.count(KEY),
                 lambda: store.get_state(KEY), lambda: store.find_write(KEY, "k"),
                 lambda: store.list_sessions(), lambda: store.erase_session(KEY),
                 lambda: store.erase_user("u")):
        with pytest.raises(StoreError, match="closed"):
            call()


async def _turn(cm: ContextManager, index: int) -> None:
    """One request of a service that runs an event loop per request."""
    await cm.aprepare("u", "s", f"Tell me about widget W-{index:04d}")
    await cm.arecord("u", "s", assistant=f"Widget W-{index:04d} costs ${index}.99")


def _turns_on_a_loop_each(cm: ContextManager, turns: int) -> None:
    for index in range(turns):
        asyncio.run(_turn(cm, index))


def test_summaries_are_made_when_each_call_has_a_loop_of_its_own(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    reference = ContextManager(store=backend.make(), background=False)
    for index in range(25):
        reference.prepare("u", "s", f"Tell me about widget W-{index:04d}")
        reference.record("u", "s", assistant=f"Widget W-{index:04d} costs ${index}.99")
    expected = reference.state("u", "s").summary_upto
    assert expected > 0

    # Over a sync store the summary thread makes them, whatever becomes of the loop.
    other = SessionKey(user_id="u", session_id="s2")
    sync_manager = ContextManager(store=backend.make())
    for index in range(25):
        asyncio.run(sync_manager.aprepare("u", other.session_id, f"widget W-{index:04d}?"))
        asyncio.run(sync_manager.arecord("u", other.session_id,
                                         assistant=f"Widget W-{index:04d} costs ${index}.99"))
    sync_manager.flush()
    assert sync_manager.state("u", other.session_id).summary_upto >= expected - 2
    sync_manager.close()

    # Over an async store a task the loop cancels is logged, and the next call catches up.
    if backend.name in ("memory", "sqlite"):  # the stores that may serve a loop per call
        store = (AsyncMemoryStore() if backend.name == "memory"
                 else make_async_store(backend.spec))
        cm = ContextManager(store=store)
        with caplog.at_level(logging.WARNING, logger="contextwright.session"):
            _turns_on_a_loop_each(cm, 25)
        state = asyncio.run(cm.astate("u", "s"))
        assert state.summary_upto >= expected - 4
        assert any(getattr(r, "contextwright", {}).get("event") == "summary_skipped"
                   for r in caplog.records)
