"""A message stored by a ``prepare`` that then failed is routed by the build the error advises.

Under contention (a group chat, parallel sub-agents) a ``prepare`` may store the user's message
and then lose the race for the session's state every time (``ConflictError`` with
``stored_seq``). Its note says to build again with ``text=None``: that build routes the message,
so a multi-step request still gets its structured mode and its task.
"""

from __future__ import annotations

import pytest
from store_workers import Backend

from contextwright.errors import ConflictError
from contextwright.manager import ContextManager
from contextwright.modes.router import Classification
from contextwright.session import SessionKey, Store

KEY = SessionKey(user_id="u", session_id="s")
REQUEST = "what about 20241001?"
"""No rule names a mode for it: the classifier does (structured)."""


class _BusySession:
    """A classifier of structured requests, while another worker writes the session's state.

    It runs between the routing's read of the state and its write, as a summary commit or
    another message's routing on another worker would: each write of this call then conflicts.
    """

    name = "busy"

    def __init__(self, store: Store, writes: int) -> None:
        self.store = store
        self.writes = writes

    def classify(self, text: str) -> Classification | None:
        if self.writes:
            self.writes -= 1
            stored = self.store.get_state(KEY)
            assert stored is not None
            self.store.put_state(KEY, stored.data, expected_version=stored.version)
        return Classification(mode="structured", confidence=1.0) if "20241001" in text else None


def test_a_message_whose_routing_lost_every_race_is_routed_by_the_next_build(
        backend: Backend) -> None:
    store = backend.make()
    busy = _BusySession(store, writes=0)
    cm = ContextManager(store=store, background=False, classifier=busy)
    cm.prepare("u", "s", "hi")
    cm.record("u", "s", assistant="Hello! How can I help?")
    busy.writes = 1_000
    with pytest.raises(ConflictError) as lost:
        cm.prepare("u", "s", REQUEST)
    assert lost.value.stored_seq == 3
    assert cm.state("u", "s").mode != "structured"
    busy.writes = 0
    ctx = cm.prepare("u", "s")  # as the error says: build again with text=None
    state = cm.state("u", "s")
    assert ctx.mode == state.mode == "structured" and ctx.route is not None
    assert "20241001" in state.zones.task.goal
    assert state.routed_upto == 3
    # Routed once: building again, or continuing the turn, does not route it again.
    assert cm.prepare("u", "s").route is None
    cm.record("u", "s", assistant="Looking it up.")
    assert cm.prepare("u", "s").route is None
    assert [m.message["role"] for m in store.read(KEY)] == [
        "user", "assistant", "user", "assistant"]
