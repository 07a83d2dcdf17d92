"""What of a question the lexical recaller searches for: auxiliary verbs are not topics."""

from __future__ import annotations

from contextwright.recall.lexical import QUESTION_STOPWORDS
from contextwright.sources.recall import LexicalTurnRecaller, RecallTurn


def turns_of(texts: list[str]) -> list[RecallTurn]:
    return [RecallTurn(index=2 * n, text=text, key=f"k{n}") for n, text in enumerate(texts)]


def test_auxiliary_verbs_of_a_question_rank_nothing() -> None:
    # "has" is in few turns here, so as a query term it would weigh as much as "cooked"
    texts = ["Ada: the plumber has fixed the sink", "Ada: my sister has a new bike",
             "Ada: I cooked a lentil curry on Sunday", "Ada: the weather was grey all week",
             "Ada: we watched a film about bees", "Ada: the train was late again",
             "Ada: the garden needs water", "Ada: work was quiet today"]
    ranked = LexicalTurnRecaller(min_score=0.1).rank("What has Ada cooked?", turns_of(texts),
                                                     limit=8)
    assert [position for position, _ in ranked] == [2]


def test_a_question_of_auxiliaries_only_recalls_nothing() -> None:
    texts = ["Ada: she has been having a rough week", "Ada: I have had enough", "Ada: fine"]
    recaller = LexicalTurnRecaller(min_score=0.0)
    assert recaller.rank("has had have having", turns_of(texts), limit=3) == []


def test_question_stopwords_are_analysed_forms() -> None:
    # the set is matched against analysed query terms, so it must hold the analyser's forms
    assert {"has", "have", "had", "am"} <= QUESTION_STOPWORDS
    assert "having" not in QUESTION_STOPWORDS  # stemmed to "have"
