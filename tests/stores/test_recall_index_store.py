"""The recall index kept beside a session: in every store, per epoch, erased with the session.

A fresh worker loads it instead of indexing the session's messages again, and what it loads is
what indexing them builds; the parts hold no messages, so it reads the turns it shows from the
log by seq. A part that does not decode or has another format, or a log that cannot be read as
the parts describe it, is rebuilt and reported, never used.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tracemalloc
from typing import Any

import pytest
from store_workers import Backend, make_async_store

from contextwright import ContextManager
from contextwright.manager.recall import INDEX_FORMAT, SessionTurns, _digest
from contextwright.recall import clear_recall_caches
from contextwright.recall.bm25 import TurnPostings
from contextwright.session.store import IndexStore, SessionKey, Store
from contextwright.sources.recall import LexicalTurnRecaller

KEY = SessionKey(user_id="u", session_id="s")
FACT = "My locker combination is 4-19-27 and my locker is number 812 in the west gym."
QUESTION = "What was my locker combination again?"
TOPICS = ["pasta recipes", "the weather in Oslo", "jazz albums", "python decorators",
          "hiking boots", "chess openings", "tea brewing", "bicycle repair", "houseplants"]


def _indexing(store: Store) -> IndexStore:
    assert isinstance(store, IndexStore), "every shipped store keeps indexes"
    return store


# ----- the store contract -----


def test_parts_are_kept_per_epoch_and_erased_with_the_session(store: Store) -> None:
    indexes = _indexing(store)
    assert indexes.read_index(KEY) is None
    assert not indexes.append_index(KEY, "p0", epoch="nope"), "no session: nothing written"
    store.append(KEY, [{"role": "user", "content": "hi"}])
    epoch = store.epoch(KEY)
    assert epoch is not None
    stored = indexes.read_index(KEY)
    assert stored is not None and (stored.epoch, stored.parts) == (epoch, [])
    assert indexes.append_index(KEY, "p1", epoch=epoch)
    assert indexes.append_index(KEY, "p2", epoch=epoch)
    assert not indexes.append_index(KEY, "stale", epoch="another incarnation")
    assert indexes.read_index(KEY).parts == ["p1", "p2"]  # type: ignore[union-attr]
    assert indexes.append_index(KEY, "p3", epoch=epoch, replace=True)
    assert indexes.read_index(KEY).parts == ["p3"]  # type: ignore[union-attr]
    assert store.erase_session(KEY)
    assert indexes.read_index(KEY) is None
    assert not indexes.append_index(KEY, "late", epoch=epoch), "an erase is never undone"
    store.append(KEY, [{"role": "user", "content": "a new session"}])
    again = indexes.read_index(KEY)
    assert again is not None and again.parts == [] and again.epoch != epoch


def test_erase_user_removes_every_index_of_the_user(store: Store) -> None:
    indexes = _indexing(store)
    for session in ("a", "b"):
        key = SessionKey(user_id="v", session_id=session)
        store.append(key, [{"role": "user", "content": "hi"}])
        assert indexes.append_index(key, f"part {session}", epoch=store.epoch(key) or "")
    assert store.erase_user("v") == 2
    assert all(indexes.read_index(SessionKey(user_id="v", session_id=s)) is None
               for s in ("a", "b"))


def test_async_stores_keep_the_same_parts(backend: Backend) -> None:
    async def run() -> None:
        store: Any = make_async_store(backend.spec)
        try:
            assert await store.read_index(KEY) is None
            await store.append(KEY, [{"role": "user", "content": "hi"}])
            epoch = await store.epoch(KEY)
            assert await store.append_index(KEY, "p1", epoch=epoch)
            assert not await store.append_index(KEY, "p2", epoch="other")
            assert (await store.read_index(KEY)).parts == ["p1"]
            await store.erase_session(KEY)
            assert await store.read_index(KEY) is None
        finally:
            await store.aclose()

    asyncio.run(run())


def test_spans_of_the_log_are_read_by_seq_from_the_live_incarnation_only(store: Store) -> None:
    from contextwright.errors import InvalidInputError

    indexes = _indexing(store)
    assert indexes.read_spans(KEY, [(1, 2)], epoch="none") is None, "no session"
    store.append(KEY, [{"role": "user", "content": f"m{seq}"} for seq in range(1, 9)])
    epoch = store.epoch(KEY) or ""
    read = indexes.read_spans(KEY, [(6, 7), (2, 3), (3, 4), (8, 12)], epoch=epoch)
    assert read is not None
    assert [(m.seq, m.message["content"]) for m in read] == [
        (seq, f"m{seq}") for seq in (2, 3, 4, 6, 7, 8)], "merged, oldest first, none past the end"
    assert read == [m for m in store.read(KEY) if m.seq in (2, 3, 4, 6, 7, 8)]
    assert indexes.read_spans(KEY, [], epoch=epoch) == []
    assert indexes.read_spans(KEY, [(1, 1)], epoch="another incarnation") is None
    for bad in ([(0, 1)], [(3, 2)], [(1, "2")], [(True, 2)], "12", [(1, 2, 3)],
                [(2**63, 2**63)]):
        with pytest.raises(InvalidInputError):
            indexes.read_spans(KEY, bad, epoch=epoch)  # type: ignore[arg-type]
    store.erase_session(KEY)
    assert indexes.read_spans(KEY, [(1, 1)], epoch=epoch) is None, "an erased session"
    store.append(KEY, [{"role": "user", "content": "a new incarnation"}])
    assert indexes.read_spans(KEY, [(1, 1)], epoch=epoch) is None, "nor its successor"


def test_a_wide_span_costs_what_the_session_holds(store: Store) -> None:
    indexes = _indexing(store)
    store.append(KEY, [{"role": "user", "content": f"m{seq}"} for seq in range(1, 4)])
    epoch = store.epoch(KEY) or ""
    indexes.read_spans(KEY, [(1, 1)], epoch=epoch)  # connections and statements made
    tracemalloc.start()
    try:
        read = indexes.read_spans(KEY, [(2, 1_000_000)], epoch=epoch)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read is not None and [m.seq for m in read] == [2, 3]
    # A million seqs, listed one by one, take tens of megabytes; the two messages, kilobytes.
    assert peak < 1_000_000, f"reading 2 messages allocated {peak} bytes"
    widest = indexes.read_spans(KEY, [(1, 1), (3, 2**63 - 1)], epoch=epoch)
    assert widest is not None and [m.seq for m in widest] == [1, 3]
    assert indexes.read_spans(KEY, [(2**63 - 1, 2**63 - 1)], epoch=epoch) == []


def test_async_stores_read_the_same_spans(backend: Backend) -> None:
    async def run() -> None:
        store: Any = make_async_store(backend.spec)
        try:
            assert await store.read_spans(KEY, [(1, 1)], epoch="none") is None
            await store.append(KEY, [{"role": "user", "content": f"m{seq}"}
                                     for seq in range(1, 6)])
            epoch = await store.epoch(KEY)
            read = await store.read_spans(KEY, [(4, 9), (1, 2)], epoch=epoch)
            assert [(m.seq, m.message["content"]) for m in read] == [
                (1, "m1"), (2, "m2"), (4, "m4"), (5, "m5")]
            assert await store.read_spans(KEY, [(1, 1)], epoch="other") is None
            assert await store.read_spans(KEY, [(2**63 - 1, 2**63 - 1)], epoch=epoch) == []
        finally:
            await store.aclose()

    asyncio.run(run())


def test_a_part_must_be_ascii_text(store: Store) -> None:
    from contextwright.errors import InvalidInputError

    store.append(KEY, [{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidInputError, match="ASCII"):
        _indexing(store).append_index(KEY, "天气", epoch=store.epoch(KEY) or "")


# ----- the manager -----


def _manager(store: Store) -> ContextManager:
    return ContextManager(store=store, background=False, cache=False,
                          recaller=LexicalTurnRecaller())


def _fill(cm: ContextManager, rounds: int = 30) -> None:
    cm.prepare("u", "s", FACT)
    cm.record("u", "s", assistant="Noted: locker 812, combination 4-19-27.")
    for i in range(2, rounds):
        topic = TOPICS[i % len(TOPICS)]
        cm.prepare("u", "s", f"Round {i}: tell me something about {topic}.")
        cm.record("u", "s", assistant=f"Here is a thought on {topic} for round {i}.")


def _turns(cm: ContextManager) -> SessionTurns:
    return cm._recall_indexes._entries[KEY]


def _same_index(loaded: SessionTurns, built: SessionTurns) -> None:
    """The loaded index is the built one: turns, positions, estimates, calls and postings."""
    a, b = loaded.index, built.index
    assert a.turns == b.turns and a.ends == b.ends and a.tokens == b.tokens
    assert a.calls_after == b.calls_after and a.calls == b.calls
    assert len(loaded.messages) == len(built.messages) and loaded.tag == built.tag
    assert all(loaded.messages[at] == built.messages[at] for at in range(len(loaded.messages))
               if loaded.messages.is_read(at, at + 1)), "what was read is what was indexed"
    p = getattr(a.turns, "postings", None)
    q = getattr(b.turns, "postings", None)
    assert isinstance(p, TurnPostings) and isinstance(q, TurnPostings)
    assert {t: list(c) for t, c in p.postings.items() if c} == {
        t: list(c) for t, c in q.postings.items() if c}
    assert p.big_counts == q.big_counts and list(p.lengths) == list(q.lengths)
    assert p.total_length == q.total_length


def test_a_fresh_worker_loads_the_stored_index_and_prepares_the_same(store: Store) -> None:
    first = _manager(store)
    _fill(first)
    parts = _indexing(store).read_index(KEY)
    assert parts is not None and len(parts.parts) >= 2, "one part per extension, appended"
    built = first.prepare("u", "s", QUESTION)
    clear_recall_caches()
    fresh = _manager(store)  # another worker: nothing in memory
    loaded = fresh.prepare("u", "s", QUESTION)
    assert loaded.to_messages("openai") == built.to_messages("openai")
    assert any("4-19-27" in str(m.get("content")) for m in loaded.to_messages("openai"))
    _same_index(_turns(fresh), _turns(first))
    assert _turns(fresh).persisted == len(_turns(fresh).messages), "it used the stored parts"
    after = _indexing(store).read_index(KEY)
    assert after is not None and after.parts[:len(parts.parts)] == parts.parts, (
        "the stored parts are extended, never rewritten")


class _CountingReads:
    """A store that counts the messages its reads return (every other method passes through)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.messages_read = 0
        self.span_reads: list[list[tuple[int, int]]] = []

    def read(self, key: SessionKey, *, after: int = 0, last: int | None = None) -> Any:
        read = self._store.read(key, after=after, last=last)
        self.messages_read += len(read)
        return read

    def read_spans(self, key: SessionKey, spans: Any, *, epoch: str) -> Any:
        read = _indexing(self._store).read_spans(key, spans, epoch=epoch)
        self.span_reads.append(list(spans))
        self.messages_read += len(read or [])
        return read

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_fresh_worker_reads_only_the_window_not_the_older_messages(store: Store) -> None:
    first = ContextManager(store=store, background=False, cache=False, max_read_messages=12,
                           recaller=LexicalTurnRecaller())
    _fill(first, rounds=40)
    built = first.prepare("u", "s", QUESTION)
    total = len(store.read(KEY))
    clear_recall_caches()
    counting = _CountingReads(store)
    fresh = ContextManager(store=counting, background=False, cache=False,  # type: ignore[arg-type]
                           max_read_messages=12, recaller=LexicalTurnRecaller())
    loaded = fresh.prepare("u", "s", QUESTION)
    assert loaded.to_messages("openai") == built.to_messages("openai")
    assert any("4-19-27" in str(m.get("content")) for m in loaded.to_messages("openai")), (
        "the recalled turn's messages are read from the log")
    assert len(counting.span_reads) == 1 and [1, 2] in map(list, counting.span_reads[0]), (
        "the turns ranked for the input, the fact's (seqs 1-2) among them, in one read")
    assert counting.messages_read < total / 2, (
        f"read {counting.messages_read} of {total} messages: the window and the recalled turns")
    _same_index(_turns(fresh), _turns(first))


def test_a_loaded_index_reads_only_the_turns_it_recalls(store: Store) -> None:
    first = ContextManager(store=store, background=False, cache=False, max_read_messages=12,
                           recaller=LexicalTurnRecaller())
    _fill(first, rounds=40)
    clear_recall_caches()
    fresh = ContextManager(store=store, background=False, cache=False, max_read_messages=12,
                           recaller=LexicalTurnRecaller())
    fresh.prepare("u", "s", QUESTION)
    messages = _turns(fresh).messages
    read = [at for at in range(len(messages)) if messages.is_read(at, at + 1)]
    assert read and len(read) < len(messages) / 4, read
    assert messages.unread == len(messages) - len(read)
    assert messages[read[0]] is messages[read[0]], "a message read stays one object"
    logged = store.read(KEY)
    assert [messages[at] for at in read] == [logged[at].message for at in read]


def test_a_written_part_takes_its_turns_terms_along(store: Store) -> None:
    cm = _manager(store)
    _fill(cm)
    turns = _turns(cm)
    assert turns.persisted == len(turns.messages)
    assert not turns.fresh_terms and turns.fresh_from == len(turns.index.turns), (
        "the terms kept for the next part are those of the turns written since")


def _signed(part: dict[str, Any]) -> str:
    """A part as the manager writes it: its checksum, then its JSON."""
    body = json.dumps(part)
    return f"{_digest(body)} {body}"


@pytest.mark.parametrize("damage", ["garbage", "flipped", "version", "older", "trailing",
                                    "postings"])
def test_an_unusable_stored_index_is_rebuilt_and_reported(
        store: Store, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    first = _manager(store)
    _fill(first)
    built = first.prepare("u", "s", QUESTION)
    indexes = _indexing(store)
    stored = indexes.read_index(KEY)
    assert stored is not None and stored.parts
    digest, _, body = stored.parts[0].partition(" ")
    part = json.loads(body)
    if damage == "garbage":
        bad = "{not json"
    elif damage == "flipped":  # still JSON, still well formed: only the checksum tells
        bad = f"{digest} {body.replace('locker', 'locket', 1)}"
        assert bad != stored.parts[0]
    elif damage == "version":
        bad = _signed({**part, "format": INDEX_FORMAT + 1})
    elif damage == "older":  # as format 3 wrote it: a 32-digit BLAKE2b, then the JSON
        bad = f"{'0' * 32} {body}"
    elif damage == "trailing":  # checksummed, but more than one JSON value
        trailing = f"{body} {body}"
        bad = f"{_digest(trailing)} {trailing}"
    else:
        bad = _signed({**part, "postings": {**part["postings"], "codes": "AAAA"}})
    assert indexes.append_index(KEY, bad, epoch=stored.epoch, replace=True)
    clear_recall_caches()
    fresh = _manager(store)
    with caplog.at_level(logging.WARNING, logger="contextwright.session"):
        loaded = fresh.prepare("u", "s", QUESTION)
    rebuilt = [r for r in caplog.records
               if getattr(r, "contextwright", {}).get("event") == "recall_index_rebuilt"]
    assert rebuilt
    if damage == "older":
        assert "another version" in rebuilt[0].contextwright["reason"]  # type: ignore[attr-defined]
    assert loaded.to_messages("openai") == built.to_messages("openai")
    _same_index(_turns(fresh), _turns(first))
    replaced = indexes.read_index(KEY)
    assert replaced is not None and bad not in replaced.parts, "the bad parts are replaced"
    clear_recall_caches()
    again = _manager(store)
    with caplog.at_level(logging.WARNING, logger="contextwright.session"):
        caplog.clear()
        assert again.prepare("u", "s", QUESTION).to_messages("openai") == \
            built.to_messages("openai")
    assert not [r for r in caplog.records
                if getattr(r, "contextwright", {}).get("event") == "recall_index_rebuilt"]


def test_erasing_the_session_erases_its_index(store: Store) -> None:
    cm = _manager(store)
    _fill(cm, rounds=20)
    assert _indexing(store).read_index(KEY) is not None
    cm.erase_session("u", "s")
    assert _indexing(store).read_index(KEY) is None
    cm.prepare("u", "s", QUESTION)  # a new incarnation starts without the old index
    stored = _indexing(store).read_index(KEY)
    assert stored is not None and stored.parts == []


# ----- reading the turns a loaded index shows -----


class _SpanTrouble:
    """A store whose span reads misbehave as ``kind`` says (every other method passes through).

    ``missing``: it has no ``read_spans`` (a third-party store that keeps parts only);
    ``erased``: the first read finds the incarnation gone, as when an erase races it (later
    reads pass through); ``short``: the log lacks a message the parts cover.
    """

    def __init__(self, store: Store, kind: str) -> None:
        self._store = store
        self._kind = kind
        self.span_reads = 0

    def __getattr__(self, name: str) -> Any:
        if name == "read_spans" and self._kind == "missing":
            raise AttributeError(name)
        return getattr(self._store, name)

    def read_spans(self, key: SessionKey, spans: Any, *, epoch: str) -> Any:
        if self._kind == "missing":
            raise AttributeError("read_spans")
        self.span_reads += 1
        if self._kind == "erased" and self.span_reads == 1:
            return None
        read = _indexing(self._store).read_spans(key, spans, epoch=epoch)
        return read[1:] if self._kind == "short" and read else read


@pytest.mark.parametrize("kind", ["missing", "erased", "short"])
def test_turns_that_cannot_be_read_as_the_parts_say_are_indexed_or_read_again(
        store: Store, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    first = _manager(store)
    _fill(first)
    built = first.prepare("u", "s", QUESTION).to_messages("openai")
    clear_recall_caches()
    troubled = _SpanTrouble(store, kind)
    fresh = _manager(troubled)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="contextwright.session"):
        loaded = fresh.prepare("u", "s", QUESTION).to_messages("openai")
    assert loaded == built, "the context is whole whatever the reads did"
    assert any("4-19-27" in str(m.get("content")) for m in loaded)
    rebuilt = [r for r in caplog.records
               if getattr(r, "contextwright", {}).get("event") == "recall_index_rebuilt"]
    if kind == "erased":  # the parts are loaded again and the read retried
        assert troubled.span_reads == 2 and not rebuilt
        assert _turns(fresh).messages.unread, "still loaded from the parts"
    elif kind == "short":  # the parts do not fit the log: the messages are indexed
        assert rebuilt and not _turns(fresh).messages.unread
        _same_index(_turns(fresh), _turns(first))
    else:  # parts it cannot use: the messages are indexed, and no parts kept or written
        assert rebuilt and not _turns(fresh).messages.unread and _turns(fresh).epoch is None
        assert _turns(fresh).index.turns == _turns(first).index.turns


def test_a_fresh_worker_reads_the_turns_an_earlier_layout_shows_and_builds_the_same(
        store: Store) -> None:
    def manager(on: Store) -> ContextManager:
        return ContextManager(store=on, background=False, recaller=LexicalTurnRecaller())

    warm = manager(store)
    _fill(warm, rounds=40)
    warm.prepare("u", "s", QUESTION)
    warm.record("u", "s", assistant="That one you told me at the start.")
    # An input that ranks no turn: the cached layout still shows the turns recalled before.
    shown = warm.prepare("u", "s", "fine.")
    recalled = [m for m in shown.to_messages("openai") if "[recalled" in str(m.get("content"))]
    assert recalled and shown.report.cache is not None and not shown.report.cache.advanced
    clear_recall_caches()
    counting = _CountingReads(store)
    fresh = manager(counting)  # type: ignore[arg-type]
    again = fresh.prepare("u", "s", None)  # the same stored input, on a fresh worker
    assert again.to_messages("openai") == shown.to_messages("openai")
    assert again.report.cache is not None and not again.report.cache.advanced, (
        "it continues the layout the stored fingerprint names")
    assert len(counting.span_reads) == 1 and _turns(fresh).messages.unread, (
        "nothing ranked for the input: the layout's turns read after a first build, which "
        "is then made again with them")


def test_session_messages_hold_what_was_read_and_refuse_what_was_not() -> None:
    from contextwright.manager.recall import SessionMessages, UnreadMessage

    messages = SessionMessages()
    messages.add_unread(4)
    messages.append({"role": "user", "content": "fed from the store"})
    assert len(messages) == 5 and messages.unread == 4
    assert messages.is_read(4, 5) and not messages.is_read(0, 2)
    with pytest.raises(UnreadMessage, match=r"message 1 .*not been read") as raised:
        messages[1]
    assert raised.value.position == 1
    with pytest.raises(UnreadMessage):
        messages[-4]
    turn = [{"role": "user", "content": "机票"}, {"role": "assistant", "content": "好的"}]
    assert messages.fill(2, turn) == 2 and messages.unread == 2
    held = messages[2]
    assert messages.fill(2, [dict(turn[0]), dict(turn[1])]) == 0, "read before: kept"
    assert messages[2] is held and messages[2:5] == [*turn, messages[4]]
    assert messages.is_read(2, 4) and not messages.is_read(1, 3)
    messages.fill(0, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    assert messages.unread == 0 and messages.is_read(0, 5)
    assert list(messages) == [messages[at] for at in range(5)] and messages != "not a list"
    with pytest.raises(IndexError):
        messages[5]


def test_a_loaded_turn_is_the_turn_its_constructor_makes() -> None:
    import dataclasses

    from contextwright.manager.recall import _stored_turn
    from contextwright.recall.turns import RecallTurn

    loaded = _stored_turn(4, "user: 机票 ORD-7731", "tag:5", "2023-05-08T13:56:00")
    made = RecallTurn(index=4, text="user: 机票 ORD-7731", key="tag:5",
                      timestamp="2023-05-08T13:56:00")
    assert loaded == made and hash(loaded) == hash(made) and repr(loaded) == repr(made)
    assert [f.name for f in dataclasses.fields(RecallTurn)] == [
        "index", "text", "key", "timestamp"], "a new field must be set by _stored_turn too"
    assert not hasattr(RecallTurn, "__post_init__"), "_stored_turn would skip it"


def test_an_async_fresh_worker_reads_the_recalled_turns_and_prepares_the_same(
        backend: Backend) -> None:
    def manager(store: Any) -> ContextManager:
        return ContextManager(store=store, background=False, cache=False,
                              max_read_messages=12, recaller=LexicalTurnRecaller())

    async def run() -> None:
        store: Any = make_async_store(backend.spec)
        try:
            first = manager(store)
            await first.aprepare("u", "s", FACT)
            await first.arecord("u", "s", assistant="Noted: locker 812, combination 4-19-27.")
            for i in range(2, 30):
                await first.aprepare("u", "s", f"Round {i}: tell me about {TOPICS[i % 9]}.")
                await first.arecord("u", "s", assistant=f"A thought on {TOPICS[i % 9]}.")
            built = (await first.aprepare("u", "s", QUESTION)).to_messages("openai")
            clear_recall_caches()
            fresh = manager(store)
            loaded = (await fresh.aprepare("u", "s", QUESTION)).to_messages("openai")
            assert loaded == built
            assert any("4-19-27" in str(m.get("content")) for m in loaded)
            turns = _turns(fresh)
            assert turns.persisted == len(turns.messages) and turns.messages.unread, (
                "loaded from the parts, the recalled turns read from the log")
        finally:
            await store.aclose()

    asyncio.run(run())


def test_loaded_turns_are_made_when_read_and_read_like_a_list() -> None:
    from bisect import bisect_left

    from contextwright.manager.recall import LoadedTurns
    from contextwright.recall.turns import RecallTurn

    turns = LoadedTurns()
    turns.add_loaded([0, 2, 5], ["a", "b", "c"], ["2023-05-08T13:56:00", None, None], "t")
    turns.add_loaded([7], ["d"], [None], "t")
    turns.append(RecallTurn(index=9, text="e", key="t:10"))
    assert len(turns) == 5 and list.__getitem__(turns, 1) is None, "nothing made yet"
    second = turns[1]
    assert second == RecallTurn(index=2, text="b", key="t:3") and turns[1] is second
    assert list.__getitem__(turns, 0) is None, "only what was read is made"
    assert turns[-2] == RecallTurn(index=7, text="d", key="t:8"), "a later run, from the end"
    assert turns[0].timestamp == "2023-05-08T13:56:00"
    assert [t.key for t in turns[1:4]] == ["t:3", "t:6", "t:8"]
    assert bisect_left(turns, 5, key=lambda t: t.index) == 2
    plain = [RecallTurn(index=i, text=x, key=f"t:{i + 1}") for i, x in
             [(0, "a"), (2, "b"), (5, "c"), (7, "d"), (9, "e")]]
    plain[0] = RecallTurn(index=0, text="a", key="t:1", timestamp="2023-05-08T13:56:00")
    assert list(turns) == plain and turns == plain and not turns != plain
    assert list(reversed(turns)) == plain[::-1] and plain[2] in turns
    assert turns.copy() == plain and type(turns.copy()) is list
    fresh = LoadedTurns()
    fresh.add_loaded([0, 2], ["a", "b"], [None, None], "t")
    assert fresh + [] == [RecallTurn(index=0, text="a", key="t:1"),  # noqa: RUF005 (list +)
                          RecallTurn(index=2, text="b", key="t:3")]
    other = LoadedTurns()
    other.add_loaded([0, 2], ["a", "b"], [None, None], "t")
    assert other.index(RecallTurn(index=2, text="b", key="t:3")) == 1
    assert other.count(RecallTurn(index=0, text="a", key="t:1")) == 1


def test_fresh_workers_threads_read_the_same_turns_and_build_the_same(store: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    warm = _manager(store)
    _fill(warm, rounds=40)
    built = warm.prepare("u", "s", QUESTION).to_messages("openai")
    clear_recall_caches()
    fresh = _manager(store)  # one worker, many threads meeting the session at once
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: fresh.prepare("u", "s", None).to_messages("openai"),
                                range(12)))
    assert all(result == built for result in results)
    turns = _turns(fresh)
    assert turns.messages.unread and turns.persisted == len(turns.messages)
