"""Routing and zone edge cases: clause openers, pasted text full of blanks, odd classifiers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import pytest

from contextwright.errors import ClassifierError, ConfigurationError, PlanError
from contextwright.manager import ContextManager
from contextwright.modes import (
    RAG_ENHANCED,
    SLIDING_WINDOW,
    STRUCTURED,
    Classification,
    ModesConfig,
    Router,
)
from contextwright.modes.centroid import CentroidClassifier


@pytest.mark.parametrize("text", [
    "OK, I'll look at it first, then decide",
    "OK. I'll look at it first, then decide",
    "OK, let me try it first, then decide",
    "Thanks! We will read the docs first, then choose a plan",
    "Sure, I'll call them and then decide",
    "Sure,   I'll call them and then decide",
])
def test_the_users_own_steps_after_an_opening_word_are_no_plan(text: str) -> None:
    # The same steps at the start of the message are no plan; an "OK," before them must not
    # turn them into one.
    assert Router().route(text).mode == SLIDING_WINDOW


@pytest.mark.parametrize("text", [
    "OK, first look up order 20241001, then refund it",
    "Hi,\n\n   first check the stock, then email the supplier",
    "Thanks. Please look up my order and then cancel it",
])
def test_a_plan_after_an_opening_word_is_still_a_plan(text: str) -> None:
    assert Router().route(text).mode == STRUCTURED


def test_a_paste_with_runs_of_blank_lines_routes_as_its_words_say() -> None:
    # Blank lines and indentation are read once each (they had cost a pass per line over the
    # rest of the message: minutes for a pasted file of 20,000 lines).
    paste = ("def handler(event):\n" + " " * 60 + "return event\n" + "\n" * 40) * 200
    assert Router().route(paste).mode == SLIDING_WINDOW
    plan = paste + "\n\n    first back up the database, then run the migration"
    assert Router().route(plan).mode == STRUCTURED


class _Answers:
    """A classifier that returns what it is given, whatever its shape."""

    name = "fixed"

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def classify(self, text: str) -> object:
        return self.answer


@pytest.mark.parametrize("answer", [
    Classification(mode=STRUCTURED, confidence=float("nan")),
    Classification(mode=STRUCTURED, confidence=7.0),
    Classification(mode=STRUCTURED, confidence=-0.5),
    Classification(mode=STRUCTURED, confidence="0.9"),  # type: ignore[arg-type]
    Classification(mode=[STRUCTURED], confidence=0.9),  # type: ignore[arg-type]
    (STRUCTURED, 0.9),
    STRUCTURED,
])
def test_a_classifier_answer_of_the_wrong_shape_is_a_classifier_error(answer: object) -> None:
    router = Router(classifier=_Answers(answer))  # type: ignore[arg-type]
    with pytest.raises(ClassifierError, match="fixed"):
        router.route("hello there")


def test_a_bad_classifier_answer_in_prepare_says_the_message_is_stored() -> None:
    manager = ContextManager(classifier=_Answers(  # type: ignore[arg-type]
        Classification(mode=STRUCTURED, confidence=float("nan"))), background=False)
    with pytest.raises(ClassifierError) as raised:
        manager.prepare("u", "s", "hello there")
    assert raised.value.stored_seq == 1
    assert manager.state("u", "s").mode is None  # not switched as if the answer were sure


def test_a_classifier_confidence_may_be_any_real_number_type() -> None:
    answer = Classification(mode=STRUCTURED, confidence=Fraction(3, 4))  # type: ignore[arg-type]
    decision = Router(classifier=_Answers(answer)).route("hello")  # type: ignore[arg-type]
    assert (decision.mode, decision.confidence) == (STRUCTURED, 0.75)


class _NoEmbedder:
    """An embedder the classifier must not reach for examples it refuses."""

    def embed_queries(self, texts: Sequence[str]) -> Any:
        raise AssertionError("not reached")

    def embed_passages(self, texts: Sequence[str]) -> Any:
        raise AssertionError("not reached")


@pytest.mark.parametrize("examples", [
    {SLIDING_WINDOW: "hello there", STRUCTURED: ["first this, then that"]},
    {SLIDING_WINDOW: ["hello", ""], STRUCTURED: ["first this, then that"]},
    {SLIDING_WINDOW: ["hello", 5], STRUCTURED: ["first this, then that"]},
])
def test_centroid_examples_must_be_lists_of_texts(examples: Mapping[str, Any]) -> None:
    # One string would be embedded character by character, a centroid of letters.
    pytest.importorskip("numpy")
    with pytest.raises(PlanError, match="examples of mode"):
        CentroidClassifier(_NoEmbedder(), examples)


class _Nameless:
    def classify(self, text: str) -> Classification | None:
        return None


@pytest.mark.parametrize("classifier", [_Nameless(), lambda text: None, "centroid"])
def test_a_classifier_without_classify_or_name_is_refused_when_made(classifier: Any) -> None:
    # Found out in prepare, it failed after storing the message, with an AttributeError.
    with pytest.raises(ConfigurationError, match="classifier must have"):
        Router(classifier=classifier)
    with pytest.raises(ConfigurationError, match="classifier must have"):
        ContextManager(classifier=classifier)


@pytest.mark.parametrize("router", ["keywords", object(), ModesConfig.default()])
def test_a_router_that_is_not_one_is_refused_when_made(router: Any) -> None:
    with pytest.raises(ConfigurationError, match="router must be a Router"):
        ContextManager(router=router)


_STOCK_TASK = ("Please check the stock first, then email the supplier\ncheck the stock\n"
               "email the supplier")


@pytest.mark.parametrize(("text", "mode"), [
    # A request verb any request has ties the message to no task ...
    ("Can you check the refund policy?", RAG_ENHANCED),
    ("I need to know your shipping times, I have a trip", RAG_ENHANCED),
    # ... the task's own words still do.
    ("please also check the price of the stock item", STRUCTURED),
    ("OK, email the supplier about the order now", STRUCTURED),
])
def test_a_request_verb_alone_does_not_tie_a_message_to_the_open_task(text: str,
                                                                     mode: str) -> None:
    decision = Router().route(text, STRUCTURED, open_task=_STOCK_TASK)
    assert decision.mode == mode
