"""The recall index kept beside a session: in every store, per epoch, erased with the session.

A fresh worker loads it instead of indexing the session's messages again, and what it loads is
what indexing them builds; a part that does not decode, has another format, or holds messages
that do not decode when a build recalls them is rebuilt and reported, never used.
"""

from __future__ import annotations

import asyncio
import json
import logging
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
    assert loaded.messages == built.messages and loaded.tag == built.tag
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

    def read(self, key: SessionKey, *, after: int = 0, last: int | None = None) -> Any:
        read = self._store.read(key, after=after, last=last)
        self.messages_read += len(read)
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
        "the recalled turn's messages come from the stored index")
    assert counting.messages_read <= 12 < total, (
        f"read {counting.messages_read} of {total} messages: the older ones are in the index")
    _same_index(_turns(fresh), _turns(first))


def test_a_loaded_index_decodes_only_the_turns_it_recalls(store: Store) -> None:
    first = ContextManager(store=store, background=False, cache=False, max_read_messages=12,
                           recaller=LexicalTurnRecaller())
    _fill(first, rounds=40)
    clear_recall_caches()
    fresh = ContextManager(store=store, background=False, cache=False, max_read_messages=12,
                           recaller=LexicalTurnRecaller())
    fresh.prepare("u", "s", QUESTION)
    messages = _turns(fresh).messages
    decoded = [at for at in range(len(messages)) if messages._items[at] is not None]
    assert decoded and len(decoded) < len(messages) / 4, decoded
    assert messages[decoded[0]] is messages[decoded[0]], "a decoded message stays one object"
    assert list(messages) == [stored.message for stored in store.read(KEY)[:len(messages)]]


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


@pytest.mark.parametrize("damage", ["garbage", "flipped", "version", "older", "postings",
                                    "messages"])
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
    elif damage == "postings":
        bad = _signed({**part, "postings": {**part["postings"], "codes": "AAAA"}})
    else:  # passes every check a load makes: only decoding the recalled turn tells
        assert "4-19-27" in part["bodies"][1], "the first turn holds the fact"
        bad = _signed({**part, "bodies": [part["bodies"][0], "[not json", *part["bodies"][2:]]})
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


# ----- the messages a loaded part holds -----


def test_session_messages_decode_a_span_once_and_read_like_a_list() -> None:
    from contextwright.manager.recall import SessionMessages, encode_messages

    turns = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
             [{"role": "user", "content": "机票"}, {"role": "assistant", "content": "好的"}]]
    messages = SessionMessages()
    messages.add_encoded([encode_messages([]), *map(encode_messages, turns)], [0, 0, 2, 4])
    messages.append({"role": "user", "content": "fed from the store"})
    plain = [*turns[0], *turns[1], {"role": "user", "content": "fed from the store"}]
    assert len(messages) == 5 and messages._items[:4] == [None] * 4, "nothing decoded yet"
    assert messages[-3] == plain[2] and messages._items[:2] == [None, None], "one span decoded"
    assert messages[2] is messages[2] and messages[3] is messages[-2], "decoded once, one object"
    assert messages[1:4] == plain[1:4] and list(messages) == plain and messages == plain
    assert messages != plain[:4] and messages != "not a list"
    assert messages.encoded(2, 4) == encode_messages(turns[1]), "a loaded span is reused as is"
    assert messages.encoded(1, 3) == encode_messages(plain[1:3])
    with pytest.raises(IndexError):
        messages[5]
    with pytest.raises(ValueError, match="must follow the messages held"):
        messages.add_encoded(["[]"], [0, 1])


def test_a_span_that_does_not_hold_its_messages_fails_loudly() -> None:
    from contextwright.errors import StoreError
    from contextwright.manager.recall import SessionMessages

    messages = SessionMessages()
    messages.add_encoded(["[]", '[{"role": "user", "content": "one"}]', "not json"],
                         [0, 0, 2, 3])
    with pytest.raises(StoreError, match="do not fit its turns"):
        messages[0]
    with pytest.raises(StoreError, match="do not decode"):
        messages[2]


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


def test_an_async_manager_rebuilds_a_part_whose_messages_do_not_decode(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    def manager(store: Any) -> ContextManager:
        return ContextManager(store=store, background=False, cache=False,
                              recaller=LexicalTurnRecaller())

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
            stored = await store.read_index(KEY)
            body = stored.parts[0].partition(" ")[2]
            part = json.loads(body)
            bad = _signed({**part, "bodies": [part["bodies"][0], "[not json",
                                              *part["bodies"][2:]]})
            assert await store.append_index(KEY, bad, epoch=stored.epoch, replace=True)
            clear_recall_caches()
            with caplog.at_level(logging.WARNING, logger="contextwright.session"):
                loaded = (await manager(store).aprepare("u", "s", QUESTION)).to_messages(
                    "openai")
            assert loaded == built
            assert any("4-19-27" in str(m.get("content")) for m in loaded)
            assert [r for r in caplog.records if getattr(r, "contextwright", {}).get(
                "event") == "recall_index_rebuilt"]
            assert bad not in (await store.read_index(KEY)).parts
        finally:
            await store.aclose()

    asyncio.run(run())
