"""Sessions under races, on every store: erasure always wins, and no race poisons a session.

Real threads (and, for the record-vs-prepare race, real OS processes) race ``ContextManager``
calls against each other on memory, SQLite, Redis and PostgreSQL. The properties: after an erase
overlapping a ``prepare`` or ``record``, no message, state, zone or in-process index of the erased
session is left (a session that exists afterwards was started by a call that came after the
erase); a tool result is stored only right after the call it answers, so every later ``prepare``
of the session still builds; a retried call with its idempotency key stores once.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from store_workers import Backend, racing_manager_worker

from contextwright.errors import ContextwrightError, InvalidInputError, SessionGone
from contextwright.manager import ContextManager
from contextwright.session import MemoryStore, SessionKey, Store

ROUNDS = 30
SECRET = "first check card 4111 1111 1111 1111, then call the bank api"
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "stock", "arguments": "{}"}}]}
RESULT = {"tool_call_id": "c1", "content": "card 4111 1111 1111 1111 is valid"}


def manager(store: Store) -> ContextManager:
    return ContextManager(store, background=False, tokenizer="estimate")


def race(first: Callable[[], None], second: Callable[[], None], rng: random.Random) -> None:
    """Run both at once from a barrier, the second after a random few milliseconds."""
    barrier = threading.Barrier(2)
    delay = rng.random() * 0.004

    def go(call: Callable[[], None], wait: float) -> None:
        barrier.wait(timeout=30)
        time.sleep(wait)
        call()

    threads = [threading.Thread(target=go, args=(first, 0.0)),
               threading.Thread(target=go, args=(second, delay))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def caught(call: Callable[[], Any], errors: list[ContextwrightError]) -> Callable[[], None]:
    def run() -> None:
        try:
            call()
        except ContextwrightError as error:
            errors.append(error)
    return run


def contents(store: Store, key: SessionKey) -> list[Any]:
    return [m.message.get("content") for m in store.read(key)]


def assert_nothing_cached(cm: ContextManager, user_id: str) -> None:
    assert not [k for k in cm._messages if k[0] == user_id]
    assert not [k for k in cm._recall_indexes._entries if k.user_id == user_id]


def test_erase_racing_prepare_never_brings_back_state(backend: Backend) -> None:
    store = backend.make()
    cm = manager(store)
    rng = random.Random(7)
    for round_ in range(ROUNDS):
        user = f"u{round_}"
        key = SessionKey(user_id=user, session_id="s")
        cm.prepare(user, "s", "hello, my name is Ada")
        errors: list[ContextwrightError] = []
        first, second = (caught(lambda u=user: cm.prepare(u, "s", SECRET), errors),
                         lambda u=user: cm.erase_user(u))
        race(*((first, second) if round_ % 2 else (second, first)), rng)
        for error in errors:
            assert isinstance(error, SessionGone), error
            assert error.stored_seq is None, "an erased message is reported as stored"
        left = contents(store, key)
        if left:  # the prepare's message came after the erase: a new session, its state its own
            assert left == [SECRET]
            assert not errors
        else:
            assert store.get_state(key) is None, "state came back after the erase"
            assert store.list_sessions(user) == []
            assert_nothing_cached(cm, user)


def test_erase_racing_record_never_brings_back_zones_or_results(backend: Backend) -> None:
    store = backend.make()
    cm = manager(store)
    rng = random.Random(11)
    for round_ in range(ROUNDS):
        user = f"u{round_}"
        key = SessionKey(user_id=user, session_id="s")
        assert cm.prepare(user, "s", "first check the stock of SKU-1, then call the supplier"
                          ).mode == "structured"  # zones on
        cm.record(user, "s", assistant=CALL)
        errors: list[ContextwrightError] = []
        first, second = (caught(lambda u=user: cm.record(u, "s", tool_results=[RESULT]), errors),
                         lambda u=user: cm.erase_user(u))
        race(*((first, second) if round_ % 2 else (second, first)), rng)
        for error in errors:  # erased meanwhile, or found nothing left to answer
            assert isinstance(error, SessionGone | InvalidInputError), error
        assert contents(store, key) == [], "a result outlived the erase of its call"
        assert store.get_state(key) is None, "zones came back after the erase"
        assert_nothing_cached(cm, user)


def test_tool_result_racing_a_user_message_never_poisons_the_session(backend: Backend) -> None:
    """Two OS processes: one records the result of call c1, the other a new user message."""
    sessions = ROUNDS
    setup = manager(backend.make())
    for index in range(sessions):
        setup.prepare("racer", f"s{index}", "check the stock of SKU-1")
        setup.record("racer", f"s{index}", assistant=CALL)
    if backend.name == "memory":
        store = setup.store
        assert isinstance(store, MemoryStore)
        _race_in_threads(store, sessions)
    else:
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(2)
        processes = [context.Process(target=racing_manager_worker,
                                     args=(backend.spec, role, sessions, barrier))
                     for role in ("results", "user")]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=240)
        assert [p.exitcode for p in processes] == [0, 0]
    after = manager(setup.store if backend.name == "memory" else backend.make())
    for index in range(sessions):
        roles = [m.message["role"] for m in after.store.read(
            SessionKey(user_id="racer", session_id=f"s{index}"))]
        assert roles in (["user", "assistant", "tool", "user"], ["user", "assistant", "user"])
        after.prepare("racer", f"s{index}", "still there?")  # builds: no orphan result


def _race_in_threads(store: MemoryStore, sessions: int) -> None:
    barrier = threading.Barrier(2)

    def side(role: str) -> None:
        cm = manager(store)
        for index in range(sessions):
            barrier.wait(timeout=60)
            if role == "results":
                try:
                    cm.record("racer", f"s{index}", tool_results=[RESULT])
                except InvalidInputError:
                    pass
            else:
                cm.prepare("racer", f"s{index}", "and what does the supplier say?")

    threads = [threading.Thread(target=side, args=(role,)) for role in ("results", "user")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)


# -- deterministic interleavings ----------------------------------------------------------------

class ErasingAfterAppend(MemoryStore):
    """A memory store on which an erase lands right after each user message is appended."""

    def append_if(self, key: SessionKey, messages: Any, **conditions: Any) -> Any:
        done = super().append_if(key, messages, **conditions)
        if any(m.get("role") == "user" for m in messages):
            self.erase_session(key)
        return done


def test_prepare_on_a_session_erased_after_its_append_stores_nothing() -> None:
    store = ErasingAfterAppend()
    cm = manager(store)
    with pytest.raises(SessionGone) as error:
        cm.prepare("u", "s", SECRET)
    assert error.value.stored_seq is None
    assert "erased" in " ".join(getattr(error.value, "__notes__", []))
    key = SessionKey(user_id="u", session_id="s")
    assert store.get_state(key) is None
    assert store.count(key) == 0
    assert store.list_sessions() == []


# -- idempotency keys ---------------------------------------------------------------------------

def test_retried_prepare_and_record_store_once(backend: Backend) -> None:
    store = backend.make()
    cm = manager(store)
    key = SessionKey(user_id="u", session_id="s")
    text = "first check the stock of SKU-1, then call the supplier"
    first = cm.prepare("u", "s", text, idempotency_key="m1")
    again = cm.prepare("u", "s", text, idempotency_key="m1")
    assert first.user_seq == again.user_seq == 1
    assert cm.record("u", "s", assistant=CALL, idempotency_key="r1") == [2]
    assert cm.record("u", "s", assistant=CALL, idempotency_key="r1") == [2]
    assert cm.record("u", "s", tool_results=[RESULT], idempotency_key="r2") == [3]
    assert cm.record("u", "s", tool_results=[RESULT], idempotency_key="r2") == [3]
    assert [m.message["role"] for m in store.read(key)] == ["user", "assistant", "tool"]
    assert len(cm.state("u", "s").zones.tools) == 1, "a replayed record changed the zones"
    cm.prepare("u", "s", None)  # the session still builds
