"""Several workers serving one session keep one usable stored recall index.

Each worker appends a part for the range it indexed, so workers taking turns on a session store
some ranges more than once, or in overlapping parts. A fresh worker still loads the parts (the
run from the session's start that reaches furthest; a part that only repeats what it holds is
passed over), and a worker that has read parts reaching past its own index continues them
instead of writing their range again.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest

from contextwright import ContextManager
from contextwright.manager.recall import SessionTurns, _digest, encode_part
from contextwright.recall import clear_recall_caches
from contextwright.recall.bm25 import TurnPostings
from contextwright.session.store import IndexStore, SessionKey, Store
from contextwright.sources.recall import LexicalTurnRecaller

KEY = SessionKey(user_id="u", session_id="s")
FACT = "My locker combination is 4-19-27 and my locker is number 812 in the west gym."
QUESTION = "What was my locker combination again?"
TOPICS = ["pasta recipes", "the weather in Oslo", "jazz albums", "python decorators",
          "hiking boots", "chess openings", "tea brewing", "bicycle repair", "houseplants"]


def _worker(store: Store, max_read_messages: int = 12) -> ContextManager:
    return ContextManager(store=store, background=False, cache=False,
                          max_read_messages=max_read_messages, recaller=LexicalTurnRecaller())


def _round(cm: ContextManager, i: int) -> None:
    if i == 0:
        cm.prepare("u", "s", FACT)
        cm.record("u", "s", assistant="Noted: locker 812, combination 4-19-27.")
        return
    topic = TOPICS[i % len(TOPICS)]
    cm.prepare("u", "s", f"Round {i}: tell me something about {topic}.")
    cm.record("u", "s", assistant=f"Here is a thought on {topic} for round {i}.")


def _indexing(store: Store) -> IndexStore:
    assert isinstance(store, IndexStore)
    return store


def _parts(store: Store) -> list[str]:
    stored = _indexing(store).read_index(KEY)
    assert stored is not None
    return stored.parts


def _span(part: str) -> tuple[int, int]:
    body = json.loads(part.partition(" ")[2])
    return body["begin"], body["end"]


def _turns(cm: ContextManager) -> SessionTurns:
    return cm._recall_indexes._entries[KEY]


def _same_index(loaded: SessionTurns, built: SessionTurns) -> None:
    a, b = loaded.index, built.index
    assert a.turns == b.turns and a.ends == b.ends and a.tokens == b.tokens
    assert a.calls_after == b.calls_after and a.calls == b.calls
    assert len(loaded.messages) == len(built.messages) and loaded.tag == built.tag
    p, q = getattr(a.turns, "postings", None), getattr(b.turns, "postings", None)
    assert isinstance(p, TurnPostings) and isinstance(q, TurnPostings)
    assert {t: list(c) for t, c in p.postings.items() if c} == {
        t: list(c) for t, c in q.postings.items() if c}
    assert list(p.lengths) == list(q.lengths) and p.big_counts == q.big_counts


def _rebuilt(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [getattr(r, "contextwright", {}).get("reason") for r in caplog.records
            if getattr(r, "contextwright", {}).get("event") == "recall_index_rebuilt"]


def _loads_without_rebuilding(store: Store, built: ContextManager,
                              caplog: pytest.LogCaptureFixture, max_read_messages: int = 12
                              ) -> ContextManager:
    """A fresh worker's prepare of ``QUESTION``: it must load the stored parts as they are."""
    expected = built.prepare("u", "s", QUESTION, idempotency_key="question")
    clear_recall_caches()
    fresh = _worker(store, max_read_messages)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="contextwright.session"):
        loaded = fresh.prepare("u", "s", QUESTION, idempotency_key="question")
    assert not _rebuilt(caplog)
    turns = _turns(fresh)
    assert turns.messages.unread and turns.persisted == len(turns.messages), (
        "it loaded the stored parts rather than indexing the session's messages")
    _same_index(turns, _turns(built))
    assert loaded.to_messages("openai") == expected.to_messages("openai")
    assert any("4-19-27" in str(m.get("content")) for m in loaded.to_messages("openai"))
    return fresh


@pytest.mark.parametrize("max_read_messages", [12, 400], ids=["overlapping", "repeated"])
def test_two_workers_taking_turns_leave_parts_a_fresh_worker_loads(
        store: Store, caplog: pytest.LogCaptureFixture, max_read_messages: int) -> None:
    workers = (_worker(store, max_read_messages), _worker(store, max_read_messages))
    for i in range(40):  # round-robin, as behind a load balancer
        _round(workers[i % 2], i)
    spans = [_span(part) for part in _parts(store)]
    assert any(begin < end for (_, end), (begin, _) in itertools.pairwise(spans)), (
        "the workers' parts overlap")
    _loads_without_rebuilding(store, workers[0], caplog, max_read_messages)


def test_parts_that_repeat_or_overlap_in_any_order_are_loaded(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    cm = _worker(store)
    for i in range(30):
        _round(cm, i)
    fine = _parts(store)
    assert len(fine) >= 4
    turns = _turns(cm)
    with turns.lock:  # parts from two boundaries to the index's end, as another worker's
        kept = turns.persisted
        wide = []
        for begin in (0, _span(fine[1])[0]):
            turns.persisted = begin
            encoded = encode_part(turns)
            assert encoded is not None
            wide.append(encoded[0])
        turns.persisted = kept
    orders = [
        [fine[0], *fine[:2], fine[1], *fine[2:]],  # each range twice
        [fine[0], fine[1], wide[1], *fine[2:]],  # a wider part from the second boundary on
        [*fine[:3], wide[0], *fine[3:]],  # one part for everything, after the first parts
    ]
    epoch = store.epoch(KEY) or ""
    for parts in orders:
        assert _indexing(store).append_index(KEY, parts[0], epoch=epoch, replace=True)
        for part in parts[1:]:
            assert _indexing(store).append_index(KEY, part, epoch=epoch)
        _loads_without_rebuilding(store, cm, caplog)


def test_a_repeated_part_that_disagrees_is_rebuilt_and_reported(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    cm = _worker(store)
    for i in range(30):
        _round(cm, i)
    fine = _parts(store)
    body = json.loads(fine[2].partition(" ")[2])
    body["first"] += 1  # the same messages, split into turns otherwise
    text = json.dumps(body, separators=(",", ":"))
    assert _indexing(store).append_index(KEY, f"{_digest(text)} {text}",
                                         epoch=store.epoch(KEY) or "")
    clear_recall_caches()
    with caplog.at_level(logging.WARNING, logger="contextwright.session"):
        _worker(store).prepare("u", "s", QUESTION)
    assert _rebuilt(caplog) == ["two stored parts disagree on the session's turns"]


def test_a_worker_behind_the_stored_parts_continues_them(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    ahead = _worker(store, max_read_messages=12)
    for i in range(40):
        _round(ahead, i)
    reach = max(end for _, end in map(_span, _parts(store)))
    clear_recall_caches()
    behind = _worker(store, max_read_messages=20)  # its window starts further back
    behind.prepare("u", "s", QUESTION)
    turns = _turns(behind)
    assert len(turns.messages) < reach, "it loaded fewer parts than the store holds"
    known = len(_parts(store))
    for i in range(40, 60):  # it alone serves the session now
        _round(behind, i)
        if len(_parts(store)) > known and len(turns.messages) > reach:
            break
    written = [_span(part) for part in _parts(store)[known:]]
    assert written and len(turns.messages) > reach
    assert all(begin >= reach for begin, _ in written), (
        f"parts {written} repeat what the store held up to message {reach}")
    _loads_without_rebuilding(store, behind, caplog, max_read_messages=20)
