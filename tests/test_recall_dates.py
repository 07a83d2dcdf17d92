"""Date terms: turns are found by the day they were said and the days they speak of."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, ContextManager, MemoryStore, Request
from contextwright.core.items import parse_message
from contextwright.recall import LexicalTurnRecaller, RecallTurn, TurnIndex
from contextwright.recall.dates import WHEN, query_date_terms, timestamp_date, turn_date_terms
from contextwright.recall.turns import rank_turns
from contextwright.sources.conversation import HistorySource

SAID = "2023-05-08T13:56:00"  # a Monday


@pytest.mark.parametrize(("text", "expected"), [
    ("I went to a support group yesterday.", {"@d2023-05-07", "@m2023-05", WHEN}),
    ("We moved here two years ago.", {"@y2021", WHEN}),
    ("Last month I started pottery.", {"@m2023-04", "@mon04", WHEN}),
    ("I ran a race last Saturday!", {"@d2023-05-06", WHEN}),
    ("It was so much fun last week", {"@m2023-05", WHEN}),
    ("On 3 June, 2022 we married; in July 2021 we met.",
     {"@d2022-06-03", "@m2022-06", "@m2021-07", "@y2021", "@mon07", WHEN}),
    ("我上个月去了上海，昨天刚回来。", {"@m2023-04", "@d2023-05-07", WHEN}),
    ("Sounds lovely, send me a photo!", {"@d2023-05-08", "@m2023-05", "@y2023", "@mon05"}),
])
def test_a_turn_is_dated_by_its_timestamp_and_its_time_words(text: str,
                                                             expected: set[str]) -> None:
    terms = turn_date_terms(text, SAID)
    assert expected <= set(terms)
    assert terms[:4] == ["@d2023-05-08", "@m2023-05", "@y2023", "@mon05"], "its own date first"
    assert len(terms) == len(set(terms))


def test_without_a_timestamp_only_written_out_dates_count() -> None:
    assert turn_date_terms("See you tomorrow", None) == [WHEN], "a time word, but no date"
    assert set(turn_date_terms("The deadline is 2024-02-29.", None)) == {
        "@d2024-02-29", "@m2024-02", "@y2024", "@mon02", WHEN}
    assert turn_date_terms("Nothing about time here.", None) == []


@pytest.mark.parametrize("stamp", ["last Tuesday", "08/05/2023", "", "2023-13-40", None])
def test_a_timestamp_that_is_not_iso_8601_dates_nothing(stamp: str | None) -> None:
    assert timestamp_date(stamp) is None
    assert turn_date_terms("we met yesterday", stamp) == [WHEN]


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00", "9999-12-31"])
def test_time_words_at_the_ends_of_the_calendar_date_nothing_outside_it(stamp: str) -> None:
    terms = turn_date_terms("yesterday, tomorrow, last Monday, 3 years ago, next month", stamp)
    assert terms[:4] == turn_date_terms("", stamp)[:4]
    assert all(term.startswith(("@d0", "@m0", "@y0", "@mon", "@d9", "@m9", "@y9", WHEN))
               for term in terms)


_TIMESTAMPS = st.one_of(st.none(), st.text(max_size=30),
                        st.datetimes(min_value=datetime(1, 1, 1)).map(datetime.isoformat))


_DATE_WORDS = ["May", "may", "3", "31", "13th", "of", "2023", "0001", "9999", "2023-02-30",
               "2024-02-29", "yesterday", "before", "ago", "two", "weeks", "a", "few", "days",
               "last", "next", "Monday", "month", "year", "in", "June", ",", ".", "上个月",
               "5月", "7号", "2023年", "去年", "昨天", "on"]
_TEXTS = st.one_of(st.text(max_size=200),
                   st.lists(st.sampled_from(_DATE_WORDS), max_size=12).map(" ".join),
                   st.lists(st.sampled_from(_DATE_WORDS), max_size=12).map("".join))


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS, stamp=_TIMESTAMPS)
def test_any_text_and_timestamp_give_terms_and_never_fail(text: str, stamp: str | None) -> None:
    terms = turn_date_terms(text, stamp)
    assert all(term.startswith("@") for term in terms) and len(terms) == len(set(terms))
    assert all(term.startswith("@") for term in query_date_terms(text))


def test_impossible_dates_are_no_dates() -> None:
    terms = query_date_terms("What happened on 31 February 2023?")
    assert not [term for term in terms if term.startswith("@d")], "no such day"
    assert "@m2023-02" in terms, "the month is still named"
    assert query_date_terms("What happened on 29 February 2024?")[0] == "@d2024-02-29"


@pytest.mark.parametrize(("query", "expected"), [
    ("What did Maria donate in December 2023?", ["@m2023-12", "@y2023", "@mon12"]),
    ("What painting did she show on October 13, 2023?",
     ["@d2023-10-13", "@m2023-10", "@y2023", "@mon10"]),
    ("When did Melanie go camping in June?", ["@mon06", WHEN]),
    ("What year did they move?", [WHEN]),
    ("我什么时候去的上海？", [WHEN]),
    ("2023年5月7日那天我做了什么？", ["@d2023-05-07", "@m2023-05", "@y2023", "@mon05"]),
    ("You may go now.", []),
    ("Tell me about the pottery class.", []),
])
def test_a_query_asks_for_the_dates_it_names(query: str, expected: list[str]) -> None:
    assert query_date_terms(query) == expected


def _dated_turns() -> list[RecallTurn]:
    days = ["2023-11-20", "2023-12-04", "2024-01-15"]
    texts = ["I gave my old coats to the shelter yesterday.", "The shelter needs volunteers.",
             "We painted the kitchen blue.", "The shelter was full again.",
             "I read a novel about whales.", "We cooked soup for the shelter."]
    return [RecallTurn(index=i, text=text, key=f"k{i}", timestamp=f"{days[i // 2]}T10:00:00")
            for i, text in enumerate(texts)]


def test_the_turn_said_in_the_month_asked_about_ranks_first() -> None:
    turns = _dated_turns()
    query = "What did I do for the shelter in December 2023?"
    dated = LexicalTurnRecaller().rank(query, turns, limit=3)
    assert dated[0][0] in (2, 3), "said in December 2023"
    undated = LexicalTurnRecaller(dates=False).rank(query, turns, limit=3)
    assert not undated or undated[0][0] not in (2, 3), "words alone do not tell the month"


def test_a_when_question_prefers_the_turn_that_dates_the_event() -> None:
    turns = [RecallTurn(index=i, text=text, key=f"k{i}") for i, text in enumerate([
        "The pottery class is fun.", "I love my pottery class.", "Any news?",
        "I signed up for the pottery class two weeks ago.", "Nice weather.",
        "The pottery class teacher is kind.", "Dinner was great.", "Good night."])]
    ranked = LexicalTurnRecaller().rank("When did you sign up for the pottery class?", turns,
                                        limit=2)
    assert ranked[0][0] == 3


def test_a_turn_takes_the_first_timestamp_of_its_messages() -> None:
    index = TurnIndex()
    for position, raw in enumerate([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "timestamp": "2023-05-08T10:00:00"},
            {"role": "user", "content": "again", "timestamp": "2023-05-09T10:00:00"},
            {"role": "assistant", "content": "yes", "timestamp": "2023-05-10T10:00:00"}]):
        index.add(parse_message(raw, "h"), position)
    index.close(4)
    assert [turn.timestamp for turn in index.turns] == ["2023-05-08T10:00:00",
                                                        "2023-05-09T10:00:00"]


def _history() -> list[dict[str, str]]:
    history = []
    for day in range(1, 29):
        stamp = f"2023-02-{day:02d}T09:00:00"
        said = ("I finally adopted a puppy named Coco!" if day == 14
                else f"Another ordinary day at work, number {day}.")
        history += [{"role": "user", "content": said, "timestamp": stamp},
                    {"role": "assistant", "content": "Good to hear.", "timestamp": stamp}]
    return history


def test_a_build_recalls_the_turn_of_the_day_asked_about() -> None:
    plan = (BuildPlan.builder("dates").add("history", 1.0, max_tokens=120, options={
        "recall_share": 0.9, "recall_limit": 4, "recent_rounds": 1}).add("user", 0.2).build())
    builder = ContextBuilder(sources=[HistorySource()])
    ctx = builder.build(plan, Request(user_input="What happened on 14 February 2023?",
                                      history=_history()))
    text = "\n".join(m.content for m in ctx.messages)
    assert "[recalled 2023-02-14]\nI finally adopted a puppy named Coco!" in text
    plain = ContextBuilder(sources=[HistorySource(LexicalTurnRecaller(dates=False))]).build(
        plan, Request(user_input="What happened on 14 February 2023?", history=_history()))
    assert "Coco" not in "\n".join(m.content for m in plain.messages)


def test_the_manager_recalls_by_the_dates_it_stamped() -> None:
    # The manager stamps each message with its clock; a question about a day finds that day,
    # long after the turn left the verbatim window.
    now = [1_675_414_800.0]  # 2023-02-03 09:00 UTC
    manager = ContextManager(store=MemoryStore(), background=False, cache=False,
                             clock=lambda: now[0])
    for day in range(40):
        manager.prepare("u", "s", "I adopted a puppy named Coco!" if day == 4
                        else f"Round {day}: tell me something about tea brewing.")
        manager.record("u", "s", assistant="Here is a thought on that.")
        now[0] += 86_400
    text = "\n".join(str(m.get("content")) for m in manager.prepare(
        "u", "s", "What did I do on 7 February 2023?").to_messages("openai"))
    assert "[recalled 2023-02-07]\nI adopted a puppy named Coco!" in text


def test_a_query_asked_at_a_time_dates_its_own_time_words() -> None:
    asked = "2023-05-08T10:00:00+00:00"
    assert query_date_terms("What did I tell you yesterday?") == []
    assert query_date_terms("What did I tell you yesterday?", asked)[:2] == [
        "@d2023-05-07", "@m2023-05"]
    assert "@m2023-04" in query_date_terms("What did we plan last month?", asked)
    assert query_date_terms("When is it?", "not a time") == [WHEN]


def _manager_over_days() -> ContextManager:
    """40 days of small talk, one round a day, and on the last day (14 March 2023) a puppy
    first, then a dozen more rounds: the puppy is out of the verbatim window."""
    now = [1_675_414_800.0]  # 2023-02-03 09:00 UTC
    manager = ContextManager(store=MemoryStore(), background=False, cache=False,
                             clock=lambda: now[0])
    for day in range(40):
        said = ["I adopted a puppy named Coco!", *(f"Round {day}.{n}: more about tea brewing."
                                                   for n in range(12))] if day == 39 else [
            f"Round {day}: tell me something about tea brewing."]
        for text in said:
            manager.prepare("u", "s", text)
            manager.record("u", "s", assistant="Here is a thought on that.")
        now[0] += 86_400
    return manager


def test_the_manager_recalls_what_was_said_yesterday() -> None:
    # Asked on 15 March: "yesterday" is 14 March, the day the puppy was named.
    manager = _manager_over_days()
    text = "\n".join(str(m.get("content")) for m in manager.prepare(
        "u", "s", "What did I tell you yesterday?").to_messages("openai"))
    assert "[recalled 2023-03-14]\nI adopted a puppy named Coco!" in text
    manager = _manager_over_days()
    plain = "\n".join(str(m.get("content")) for m in manager.prepare(
        "u", "s", "What did I tell you?").to_messages("openai"))
    assert "Coco" not in plain, "without a time word nothing points to that day"


class _WordsOnly:
    """A user's recaller that knows nothing of ``now``."""

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int
             ) -> list[tuple[int, float]]:
        return [(position, 1.0) for position, turn in enumerate(turns)
                if "Coco" in turn.text][:limit]


def test_a_recaller_without_now_is_asked_without_it() -> None:
    history = _history()
    plan = (BuildPlan.builder("dates").add("history", 1.0, max_tokens=120, options={
        "recall_share": 0.9, "recall_limit": 4, "recent_rounds": 1}).add("user", 0.2).build())
    ctx = ContextBuilder(sources=[HistorySource(_WordsOnly())]).build(
        plan, Request(user_input="What happened yesterday?", history=history))
    assert "Coco" in "\n".join(m.content for m in ctx.messages)
    asked = ContextBuilder(sources=[HistorySource()]).build(plan, Request(
        user_input="What happened 14 days ago?", history=history))
    assert "[recalled 2023-02-14]\nI finally adopted a puppy named Coco!" in "\n".join(
        m.content for m in asked.messages), "asked on 28 February (the last message's date)"


class _Subclassed(LexicalTurnRecaller):
    """A subclass whose ``rank`` has the protocol's signature (no ``now``)."""

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int
             ) -> list[tuple[int, float]]:
        return super().rank(query, turns, limit=limit)


class _Keywords:
    def __init__(self) -> None:
        self.seen: dict[str, object] = {}

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int, **more: object
             ) -> list[tuple[int, float]]:
        self.seen = dict(more)
        return []


def test_now_goes_only_to_a_rank_that_takes_it() -> None:
    turns = _dated_turns()
    now = "2023-12-05T10:00:00"
    assert rank_turns(_Subclassed(), "shelter yesterday", turns, limit=2, now=now) == (
        LexicalTurnRecaller().rank("shelter yesterday", turns, limit=2))
    assert rank_turns(LexicalTurnRecaller(), "What did I do yesterday?", turns, limit=1,
                      now=now)[0][0] in (2, 3), "4 December: the turns said that day"
    keywords = _Keywords()
    rank_turns(keywords, "q", turns, limit=1, now=now)
    assert keywords.seen == {"now": now}
    rank_turns(keywords, "q", turns, limit=1, now=None)
    assert keywords.seen == {}
