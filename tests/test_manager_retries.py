"""Retries and duplicates meet the session as the first call left it.

A ``prepare`` retried with its idempotency key (after ``OutcomeUnknown``, or a request delivered
twice) builds from the state the first call routed, and changes none of it: no kept turn counted
again, no mode released early, no task planned afresh over the steps recorded since. A
``record`` whose messages are stored never fails for its summary update, inline or not: the
failure is logged as ``summary_failed``, so the natural retry does not store the answer twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright import ContextManager
from contextwright.errors import OutcomeUnknown, StoreUnavailable
from contextwright.session import (
    AsyncMemoryStore,
    AsyncSqliteStore,
    MemoryStore,
    SessionKey,
    SqliteStore,
    Store,
)

KEY = SessionKey(user_id="u", session_id="s")
PLAN = "First check the stock of SKU-1, then call the supplier API to update order 55."


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(
        tmp_path / "sessions.db")
    yield made
    made.close()


def _version(store: Store) -> int | None:
    record = store.get_state(KEY)
    return record.version if record else None


def _check_stock(cm: ContextManager) -> None:
    cm.record("u", "s", assistant={"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "check_stock", "arguments": '{"sku": "SKU-1"}'}}]},
        tool_results=[{"role": "tool", "tool_call_id": "c1", "content": "12 in stock"}])


# ----- prepare replayed -----


def test_a_replayed_prepare_changes_no_state_and_builds_the_same_context(store: Store) -> None:
    cm = ContextManager(store=store, background=False)
    cm.prepare("u", "s", "Where is order 20241001? Check the order database.",
               idempotency_key="q1")
    cm.record("u", "s", assistant="It shipped yesterday.")
    first = cm.prepare("u", "s", "thanks", idempotency_key="q2")
    state, version = cm.state("u", "s"), _version(store)
    assert state.kept_turns == 1
    for _ in range(4):  # more retries than the mode keeps unmatched turns
        again = cm.prepare("u", "s", "thanks", idempotency_key="q2")
        assert again.to_messages() == first.to_messages()
        assert (again.mode, again.user_seq, again.switch) == (
            first.mode, first.user_seq, first.switch)
        assert again.route is None, "the message was routed when it was first stored"
    assert cm.state("u", "s") == state and _version(store) == version
    assert store.count(KEY) == 3


def test_a_duplicate_plan_keeps_the_progress_recorded_since(store: Store) -> None:
    cm = ContextManager(store=store, background=False)
    cm.prepare("u", "s", PLAN, idempotency_key="p1")
    _check_stock(cm)
    before = cm.state("u", "s")
    assert before.zones.task.done, "the step is recorded"
    cm.prepare("u", "s", PLAN, idempotency_key="p1")  # the first request delivered again
    assert cm.state("u", "s") == before


def test_a_replay_answers_with_the_switch_its_message_caused(store: Store) -> None:
    cm = ContextManager(store=store, background=False)
    first = cm.prepare("u", "s", PLAN, idempotency_key="p1")
    assert first.switch is not None
    again = cm.prepare("u", "s", PLAN, idempotency_key="p1")
    assert again.switch == first.switch and again.mode == first.mode
    assert again.to_messages() == first.to_messages()


def test_a_replay_of_an_older_message_leaves_the_newest_layout() -> None:
    store = MemoryStore()
    cm = ContextManager(store=store, background=False)
    cm.prepare("u", "s", "Where is order 20241001?", idempotency_key="q1")
    cm.record("u", "s", assistant="It shipped yesterday.")
    cm.prepare("u", "s", "And order 20241002?", idempotency_key="q2")
    state, version = cm.state("u", "s"), _version(store)
    old = cm.prepare("u", "s", "Where is order 20241001?", idempotency_key="q1")
    assert old.user_seq == 1
    assert cm.state("u", "s") == state and _version(store) == version, (
        "the next build continues the newest build's cached prefix, not the replay's")


class _LostAnswer(MemoryStore):
    """Stores the first user message, then loses the answer (``OutcomeUnknown``)."""

    lost = False

    def append_if(self, key: SessionKey, messages: Any, **kwargs: Any) -> Any:
        appended = super().append_if(key, messages, **kwargs)
        if not self.lost:
            self.lost = True
            raise OutcomeUnknown("the write's answer was lost")
        return appended


def test_a_retry_after_a_lost_answer_routes_a_message_never_routed() -> None:
    store = _LostAnswer()
    cm = ContextManager(store=store, background=False)
    with pytest.raises(OutcomeUnknown):
        cm.prepare("u", "s", PLAN, idempotency_key="p1")
    assert cm.state("u", "s").mode is None, "stored, not routed"
    retried = cm.prepare("u", "s", PLAN, idempotency_key="p1")
    assert retried.route is not None and retried.mode == "structured"
    assert cm.state("u", "s").zones.task.next, "the plan is the session's task"
    assert store.count(KEY) == 1


class _LosesTheAnswerTo(MemoryStore):
    """Stores every message, but loses the answer to the write holding ``text``, once."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.lost = text, False

    def append_if(self, key: SessionKey, messages: Any, **kwargs: Any) -> Any:
        appended = super().append_if(key, messages, **kwargs)
        if not self.lost and any(m.get("content") == self.text for m in messages):
            self.lost = True
            raise OutcomeUnknown("the write's answer was lost")
        return appended


def test_a_retry_after_a_lost_answer_routes_a_later_message_never_routed() -> None:
    store = _LosesTheAnswerTo(PLAN)
    cm = ContextManager(store=store, background=False)
    cm.prepare("u", "s", "Hello there", idempotency_key="h1")
    cm.record("u", "s", assistant="Hi! How can I help?")
    assert cm.state("u", "s").mode != "structured"
    with pytest.raises(OutcomeUnknown):
        cm.prepare("u", "s", PLAN, idempotency_key="p1")
    retried = cm.prepare("u", "s", PLAN, idempotency_key="p1")
    assert retried.route is not None, "the first call stored the plan but never routed it"
    assert retried.mode == "structured" and cm.state("u", "s").zones.task.next
    # Once routed, a further retry changes nothing.
    state, version = cm.state("u", "s"), _version(store)
    again = cm.prepare("u", "s", PLAN, idempotency_key="p1")
    assert again.route is None and cm.state("u", "s") == state and _version(store) == version
    assert store.count(KEY) == 3


def test_a_state_stored_before_routed_upto_existed_still_loads() -> None:
    from contextwright.session.state import SessionState

    old = SessionState(mode="sliding_window", kept_turns=2).to_dict()
    del old["routed_upto"]
    assert SessionState.from_dict(old).routed_upto == 0


@pytest.mark.parametrize("kind", ["async-memory", "async-sqlite"])
def test_an_async_replayed_prepare_changes_no_state(kind: str, tmp_path: Path) -> None:
    async def run() -> None:
        store = (AsyncMemoryStore() if kind == "async-memory"
                 else AsyncSqliteStore(tmp_path / "sessions.db"))
        cm = ContextManager(store=store, background=False)
        try:
            await cm.aprepare("u", "s", PLAN, idempotency_key="p1")
            await cm.arecord("u", "s", assistant={
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {
                        "name": "check_stock", "arguments": '{"sku": "SKU-1"}'}}]},
                tool_results=[{"role": "tool", "tool_call_id": "c1", "content": "12"}])
            first = await cm.aprepare("u", "s", "thanks", idempotency_key="q2")
            before = await cm.astate("u", "s")
            for _ in range(4):
                again = await cm.aprepare("u", "s", "thanks", idempotency_key="q2")
                assert again.to_messages() == first.to_messages() and again.route is None
            await cm.aprepare("u", "s", PLAN, idempotency_key="p1")
            assert await cm.astate("u", "s") == before
        finally:
            await cm.aclose()
            await store.aclose()

    asyncio.run(run())


# ----- record: the summary update fails after the messages are stored -----


class _FlakyEpoch(MemoryStore):
    """Fails the first ``epoch`` read after an assistant message is stored: ``StoreUnavailable``."""

    armed = False
    failed = False

    def epoch(self, key: SessionKey) -> str | None:
        if self.armed and not self.failed:
            self.failed = True
            raise StoreUnavailable("transient")
        return super().epoch(key)

    def append_if(self, key: SessionKey, messages: Any, **kwargs: Any) -> Any:
        appended = super().append_if(key, messages, **kwargs)
        if messages and messages[0].get("role") == "assistant":
            self.armed = True
        return appended


def _summary_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if getattr(r, "contextwright", {}).get("event") == "summary_failed"]


def _answers(store: Store) -> list[Any]:
    return [m.message["content"] for m in store.read(KEY) if m.message["role"] == "assistant"]


def test_record_without_background_stores_once_and_reports_a_failed_summary(
        caplog: pytest.LogCaptureFixture) -> None:
    store = _FlakyEpoch()
    ContextManager(store=store, background=False).prepare("u", "s", "Capital of France?")
    cm = ContextManager(store=store, background=False)  # another worker answers
    with caplog.at_level(logging.ERROR, logger="contextwright.session"):
        seqs = cm.record("u", "s", assistant="Paris.")
    assert store.failed and seqs == [2]
    assert _answers(store) == ["Paris."]
    failures = _summary_failures(caplog)
    assert len(failures) == 1 and failures[0].exc_info is not None, "logged with its error"
    assert failures[0].contextwright["session_id"] == "s"  # type: ignore[attr-defined]


@pytest.mark.parametrize("native", [True, False], ids=["async-store", "sync-store"])
def test_arecord_without_background_stores_once_and_reports_a_failed_summary(
        native: bool, caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> list[int]:
        flaky = _FlakyEpoch()
        store: Any = AsyncMemoryStore(store=flaky) if native else flaky
        await ContextManager(store=store, background=False).aprepare(
            "u", "s", "Capital of France?")
        cm = ContextManager(store=store, background=False)
        try:
            return await cm.arecord("u", "s", assistant="Paris.")
        finally:
            await cm.aclose()
            assert flaky.failed and _answers(flaky) == ["Paris."]

    with caplog.at_level(logging.ERROR, logger="contextwright.session"):
        assert asyncio.run(run()) == [2]
    assert len(_summary_failures(caplog)) == 1
