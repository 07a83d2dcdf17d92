"""An erase wins over the answer racing it, on every store, sync and async.

A model answers while its session is erased (a privacy request served by another worker, a
TTL expiry, the user starting over). ``record`` must then raise ``SessionGone`` and store
nothing: not a new session made of the answer, nor the answer inside the user's next
conversation. An agent loop cut off by an erase gets ``SessionGone`` too, not an error that
blames the caller.
"""

from __future__ import annotations

import asyncio

import pytest
from store_workers import Backend, FakeClock, make_async_store

from contextwright.errors import SessionGone
from contextwright.manager import ContextManager
from contextwright.session import SessionKey

KEY = SessionKey(user_id="alice", session_id="s1")
QUESTION = "Card 4111 1111 1111 1111 was charged twice, order 20241001, 12 Main St"
ANSWER = "Refunded card 4111 1111 1111 1111 for order 20241001 to 12 Main St."
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "get_order",
                                                  "arguments": '{"id": "20241001"}'}}]}


def test_an_answer_to_an_erased_session_is_not_stored(backend: Backend) -> None:
    store = backend.make()
    worker = ContextManager(store=store, background=False)
    privacy = ContextManager(store=store, background=False)  # another worker
    worker.prepare("alice", "s1", QUESTION)
    privacy.erase_session("alice", "s1")
    with pytest.raises(SessionGone):
        worker.record("alice", "s1", assistant=ANSWER)
    assert store.count(KEY) == 0 and store.epoch(KEY) is None


def test_an_answer_is_not_filed_into_the_conversation_begun_after_the_erase(
        backend: Backend) -> None:
    store = backend.make()
    worker = ContextManager(store=store, background=False)
    other = ContextManager(store=store, background=False)
    ctx = worker.prepare("alice", "s1", QUESTION)
    other.erase_session("alice", "s1")
    other.prepare("alice", "s1", "Hi, new topic: what are your opening hours?")
    with pytest.raises(SessionGone):  # the answer names the context it answers
        other.record("alice", "s1", assistant=ANSWER, context=ctx)
    with pytest.raises(SessionGone):  # or the manager remembers the prepare it answers
        worker.record("alice", "s1", assistant=ANSWER)
    assert [m.message["content"] for m in store.read(KEY)] == [
        "Hi, new topic: what are your opening hours?"]


def test_an_answer_after_expiry_does_not_start_the_retention_clock_again(
        backend: Backend) -> None:
    clock = FakeClock()
    store = backend.make(ttl_seconds=backend.ttl, clock=clock)
    cm = ContextManager(store=store, background=False)
    cm.prepare("alice", "s1", QUESTION)
    backend.elapse(clock, backend.ttl + 0.5)
    with pytest.raises(SessionGone):
        cm.record("alice", "s1", assistant=ANSWER)
    assert store.epoch(KEY) is None


def test_an_agent_loop_cut_off_by_an_erase_gets_session_gone(backend: Backend) -> None:
    store = backend.make()
    cm = ContextManager(store=store, background=False)
    cm.prepare("alice", "s1", "look up order 20241001")
    cm.record("alice", "s1", assistant=CALL)
    ContextManager(store=store).erase_session("alice", "s1")
    with pytest.raises(SessionGone):
        cm.record("alice", "s1", tool_results=[{"tool_call_id": "c1", "content": "shipped"}])
    with pytest.raises(SessionGone):
        cm.prepare("alice", "s1")  # continuing the turn
    assert store.epoch(KEY) is None


def test_a_greeting_may_begin_a_session_again_after_its_erase(backend: Backend) -> None:
    store = backend.make()
    cm = ContextManager(store=store, background=False)
    cm.prepare("alice", "s1", QUESTION)
    cm.record("alice", "s1", assistant=ANSWER)
    cm.erase_session("alice", "s1")  # "clear chat": the answered turn is not pending
    assert cm.record("alice", "s1", assistant="Hello! How can I help?") == [1]
    ctx = cm.prepare("alice", "s1", "what are your opening hours?")
    assert cm.record("alice", "s1", assistant="9 to 5.", context=ctx) == [3]


def test_the_async_answer_to_an_erased_session_is_not_stored(backend: Backend) -> None:
    async def main() -> None:
        store = make_async_store(backend.spec)
        cm = ContextManager(store=store, background=False)
        try:
            ctx = await cm.aprepare("alice", "s1", QUESTION)
            await cm.aerase_session("alice", "s1")
            with pytest.raises(SessionGone):
                await cm.arecord("alice", "s1", assistant=ANSWER)
            with pytest.raises(SessionGone):
                await cm.arecord("alice", "s1", assistant=ANSWER, context=ctx)
            assert await store.count(KEY) == 0
        finally:
            await cm.aclose()
            await store.aclose()

    asyncio.run(main())
