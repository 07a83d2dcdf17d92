"""The lexical recaller returns exactly what plain BM25 over every turn returns.

``LexicalTurnRecaller.rank`` scores a query's postings in array passes (``recall.bm25``).
These tests hold it to a reference written the obvious way — every turn scored in a Python
loop, terms added in sorted order, sorted by score then position — and compare positions,
float scores (``==``, not ``isclose``), order and ties, on random, tie-heavy, growing and real
histories.
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright.analysis import ENGLISH_STOPWORDS
from contextwright.errors import InvalidInputError
from contextwright.sources.recall import (
    LexicalTurnRecaller,
    RecallTurn,
    _term_counts,
    _terms,
    stem,
)

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"


# The recallers under test match words only (``dates=False``): the reference is BM25 over the
# analyzer's words, and date terms have tests of their own (``test_recall_dates.py``).


def reference_terms(text: str) -> list[str]:
    """The recaller's tokenizer written plainly: words stemmed, stop words out, CJK bigrams."""
    stop = ENGLISH_STOPWORDS
    terms: list[str] = []
    for match in re.findall(r"[A-Za-z0-9_\-]{2,}|[\u4e00-\u9fff]+", text.lower()):
        if "\u4e00" <= match[0] <= "\u9fff":
            terms += [match[i : i + 2] for i in range(max(len(match) - 1, 1))]
        elif match not in stop:
            terms.append(stem(match))
    return terms


@functools.lru_cache(maxsize=8)
def reference_counts(texts: tuple[str, ...]) -> list[Counter[str]]:
    return [Counter(reference_terms(text)) for text in texts]


def reference_rank(query: str, texts: list[str], *, limit: int, min_score: float = 1.0,
                   k1: float = 1.2, b: float = 0.75) -> list[tuple[int, float]]:
    """Every turn scored, terms added in sorted order; best first, ties by position."""
    # the auxiliaries a question is built on are not searched for (QUESTION_STOPWORDS, restated)
    terms = sorted(set(reference_terms(query)) - {"am", "be", "do", "has", "have", "had"})
    if not terms or not texts or limit <= 0:
        return []
    counts = reference_counts(tuple(texts))
    lengths = [sum(c.values()) for c in counts]
    size = len(texts)
    average = (sum(lengths) / size) or 1.0
    # The constants grouped as the recaller has always grouped them: floats are compared ==.
    base, per_length = k1 * (1 - b), k1 * b / average
    scores = [0.0] * size
    for term in terms:
        df = sum(1 for c in counts if term in c)
        if not df or df > max(size // 5, min(size // 2, 50)):  # common_above, restated
            continue
        weight = math.log(1 + (size - df + 0.5) / (df + 0.5)) * (k1 + 1)
        for position, c in enumerate(counts):
            if term in c:
                tf = c[term]
                scores[position] += weight * tf / (tf + base + per_length * lengths[position])
    ranked = sorted((p for p in range(size) if scores[p] >= min_score),
                    key=lambda p: (-scores[p], p))
    return [(p, scores[p]) for p in ranked[:limit]]


def turns_of(texts: list[str]) -> list[RecallTurn]:
    return [RecallTurn(index=3 * n, text=text, key=f"t{n}") for n, text in enumerate(texts)]


def assert_exactly(recaller: LexicalTurnRecaller, query: str, texts: list[str],
                   limit: int) -> list[tuple[int, float]]:
    got = recaller.rank(query, turns_of(texts), limit=limit)
    expected = reference_rank(query, texts, limit=limit, min_score=recaller.min_score,
                              k1=recaller.k1, b=recaller.b)
    assert got == expected  # positions, order and the very same floats
    return got


WORDS = ["order", "kettle", "ORD-7731", "refund", "pasta", "salt", "上海", "天气", "明天",
         "flight", "book", "blue", "water", "sauce", "Paris", "9am", "the", "painting",
         "painted", "shopping", "上海的天气怎么样"]
_TEXT = st.lists(st.sampled_from(WORDS), min_size=0, max_size=14).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=80), query=_TEXT,
       limit=st.sampled_from([1, 2, 3, 5, 8, 64, 10**6]),
       min_score=st.sampled_from([1.0, 0.1, 0.0, -1.0, 2.5, 6.0]),
       constants=st.sampled_from([(1.2, 0.75), (1.5, 0.75), (0.0, 0.5), (2.0, 1.0), (1.2, 0.0)]))
def test_random_histories_rank_exactly_like_plain_bm25(texts: list[str], query: str, limit: int,
                                                       min_score: float,
                                                       constants: tuple[float, float]
                                                       ) -> None:
    k1, b = constants
    recaller = LexicalTurnRecaller(dates=False, min_score=min_score, k1=k1, b=b)
    assert_exactly(recaller, query, texts, limit)


def realistic_texts(count: int, seed: int) -> list[str]:
    """Chat-like turns: templates in English and Chinese with ids, many near-duplicates."""
    rng = random.Random(seed)
    cities = ["Shanghai", "Beijing", "Paris", "Tokyo", "上海", "北京", "巴黎"]
    templates = [
        "What's the weather in {city} tomorrow? Should I book the {hour}am flight {code}?",
        "明天{city}的天气怎么样？我想订{hour}点的航班 {code}",
        "Order {code} for the blue kettle was refunded on day {n}.",
        "Noted: you prefer window seats and the {hour}am flight to {city}.",
        "I painted the kitchen blue and went shopping for pasta, salt and sauce.",
        "{city} {city} {city} weather weather forecast",
        "ok thanks",
    ]
    texts = []
    for _ in range(count):
        text = rng.choice(templates).format(
            city=rng.choice(cities), hour=rng.randint(6, 11), n=rng.randint(1, 30),
            code=f"ORD-{rng.randint(7700, 7720)}")
        texts.append(text if rng.random() < 0.7 else f"{text} {rng.choice(templates)}")
    return texts


QUERIES = [
    "明天上海的天气怎么样？Should I book the 9am flight?",
    "Where is the blue kettle order ORD-7711?",
    "weather Paris",
    "What did I paint blue, and what pasta sauce did I buy?",
    "ok thanks",
    "ORD-7703 ORD-7704 ORD-7705 refund",
]


@pytest.mark.parametrize("limit", [1, 7, 64, 500])
def test_tie_heavy_sessions_rank_exactly(limit: int) -> None:
    texts = realistic_texts(1500, seed=limit)
    recaller = LexicalTurnRecaller(dates=False)
    for query in QUERIES:
        assert_exactly(recaller, query, texts, limit)


def test_a_tie_cut_by_the_limit_keeps_the_oldest_turns() -> None:
    texts = ["filler text number one"] * 40 + ["kettle ORD-7731 refund"] * 30 + ["pasta"] * 40
    got = assert_exactly(LexicalTurnRecaller(dates=False), "kettle ORD-7731", texts, 5)
    assert [p for p, _ in got] == [40, 41, 42, 43, 44]
    assert len({score for _, score in got}) == 1


@pytest.mark.parametrize("limit", [0, -3])
def test_no_limit_means_nothing(limit: int) -> None:
    assert LexicalTurnRecaller().rank("kettle", turns_of(["kettle", "pasta"]), limit=limit) == []


def test_limits_around_the_number_of_matches() -> None:
    texts = [f"kettle {n}" if n % 4 == 0 else f"pasta salt {n}" for n in range(200)]
    recaller = LexicalTurnRecaller(dates=False, min_score=0.0)
    matches = len(reference_rank("kettle", texts, limit=10**6, min_score=1e-12))
    for limit in (matches - 1, matches, matches + 1, 200, 201):
        got = assert_exactly(recaller, "kettle", texts, limit)
        # min_score 0: turns without the term score 0 and follow, oldest first
        assert len(got) == min(limit, 200)


def test_a_growing_session_stays_exact() -> None:
    recaller = LexicalTurnRecaller(dates=False)
    texts = realistic_texts(600, seed=7)
    turns = turns_of(texts)
    for step, text in enumerate(realistic_texts(60, seed=8)):
        texts.append(text)
        turns.append(RecallTurn(index=10_000 + step, text=text, key=f"new{step}"))
        query = QUERIES[step % len(QUERIES)]
        assert recaller.rank(query, turns, limit=16) == reference_rank(query, texts, limit=16)


def test_long_queries_on_a_zipf_vocabulary() -> None:
    rng = random.Random(11)
    vocabulary = [f"w{n}x" for n in range(400)]
    weights = [1 / (n + 1) for n in range(400)]
    texts = [" ".join(rng.choices(vocabulary, weights, k=rng.randint(3, 40)))
             for _ in range(1500)]
    recaller = LexicalTurnRecaller(dates=False, min_score=0.5)
    for n in range(8):
        query = " ".join(rng.choices(vocabulary, weights, k=3 + n))
        for limit in (1, 10, 64):
            assert_exactly(recaller, query, texts, limit)


@pytest.mark.skipif(not LOCOMO.is_dir(), reason="needs ../shared/data/locomo-dev")
def test_locomo_sessions_rank_exactly() -> None:
    samples = json.loads((LOCOMO / "locomo-dev.json").read_text())
    questions = [json.loads(line)["question"]
                 for line in (LOCOMO / "qa_index.jsonl").read_text().splitlines()]
    texts = [f"{turn['speaker']}: {turn['text']}" for sample in samples
             for n in range(1, 100)
             for turn in sample["conversation"].get(f"session_{n}", [])]
    recaller = LexicalTurnRecaller(dates=False)
    turns = turns_of(texts)
    for question in questions[::8]:
        expected = reference_rank(question, texts, limit=400)  # the chat plan's recall_limit
        assert recaller.rank(question, turns, limit=400) == expected
        assert recaller.rank(question, turns, limit=8) == expected[:8]


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab-_9 Zpaintingsd上海天气的。\n")),
                    max_size=60) | st.sampled_from(WORDS))
def test_term_counting_matches_the_plain_tokenizer(text: str) -> None:
    assert _terms(text) == reference_terms(text)
    assert _term_counts(text) == Counter(reference_terms(text))


@pytest.mark.parametrize("arguments", [{"min_score": math.nan}, {"k1": -0.5}, {"b": 1.5},
                                       {"b": -0.1}, {"k1": math.inf}])
def test_constants_that_break_bm25_are_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError):
        LexicalTurnRecaller(**arguments)


def test_counts_past_a_byte_are_read_exactly() -> None:
    texts = ["kettle " * 300, "kettle " * 255 + "refund", "kettle " * 254, "kettle refund"]
    texts += ["kettle " * n + "refund " * (15 - n) for n in range(5, 11)]  # around 7
    texts += [f"pasta salt {n}" for n in range(40)]
    for limit in (1, 6, 20):
        assert_exactly(LexicalTurnRecaller(dates=False, min_score=0.0), "kettle refund", texts,
                       limit)


def test_an_index_keeps_nothing_per_query() -> None:
    """Many words queried over a growing session: exact, and the index holds only postings.

    A query derives nothing that the index keeps, so its memory is what its turns added,
    whatever was asked: the same as an index of the same turns that was never queried.
    """
    texts = realistic_texts(800, seed=3)
    recaller = LexicalTurnRecaller(dates=False)
    turns = turns_of(texts)
    for round_ in range(3):
        for query in QUERIES:
            assert recaller.rank(query, turns, limit=10) == reference_rank(query, texts, limit=10)
        texts.append(f"round {round_}: the kettle ORD-7711 was refunded in Paris")
        turns.append(RecallTurn(index=9_000 + round_, text=texts[-1], key=f"r{round_}"))
    queried = recaller._postings(turns).index
    never_queried = LexicalTurnRecaller(dates=False)._postings(turns_of(texts)).index
    assert queried.bytes() == never_queried.bytes() > 0

