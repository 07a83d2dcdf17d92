"""Routing and task-zone cases a chat meets every day: story follow-ups, farewells, ordinals.

A follow-up question in a conversation ("And then what happened?", "然后再聊") plans nothing for
the assistant to do; routed as a plan, it tore down the chat's window into a hand-off and built
the next turns as a structured task.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextwright.errors import PlanError
from contextwright.manager import ContextManager
from contextwright.modes import RAG_ENHANCED, SLIDING_WINDOW, STRUCTURED, Router
from contextwright.modes.centroid import CentroidClassifier
from contextwright.modes.config import modes_from_mapping
from contextwright.modes.zones import Zones, plan_steps, update_task

PLAN = "先查库存再调用供应商接口更新订单状态"


@pytest.mark.parametrize("text", [
    "And then what happened?",
    "And then?",
    "and then?",
    "What happened after that?",
    "What did she say after that?",
    "Which came first, then?",
    "First time here, then?",
    "Who won the first game? Then who won the second?",
])
def test_a_follow_up_question_is_no_plan(text: str) -> None:
    assert Router().route(text).mode == SLIDING_WINDOW


@pytest.mark.parametrize("text", [
    "First check the stock, then notify the supplier",
    "Look up the weather in Paris and then save a memo",
    "Check the stock. After that, email the supplier.",
    "Could you check the weather first, then tell me what to wear?",
    "Check the weather and then tell me what to wear",
    "Why don't you first check the weather, then save a memo?",
    "How about you first check the weather, then save a memo?",
])
def test_a_plan_that_asks_about_something_is_still_a_plan(text: str) -> None:
    assert Router().route(text).mode == STRUCTURED


@pytest.mark.parametrize("text", [
    "好的，先这样，然后有问题再找你",
    "好的，先这样吧，然后的事情明天说",
    "先这样吧。然后有空再聊",
    "先吃饭吧，然后再聊",
    "今天先到这里，之后再聊吧",
])
def test_a_chinese_farewell_is_no_plan(text: str) -> None:
    # "先这样" (leave it at that) and "然后再聊" (talk later) close a conversation.
    assert Router().route(text).mode == SLIDING_WINDOW


@pytest.mark.parametrize("text", [
    "先这样做，然后把结果发给我",
    "先查库存，然后再说一下价格",
    "先查一下天气，之后再聊聊穿什么",
])
def test_a_chinese_plan_near_those_words_is_still_a_plan(text: str) -> None:
    assert Router().route(text).mode == STRUCTURED


@pytest.mark.parametrize("text", [
    "好的，先这样，然后有问题再找你",
    "好的，先这样吧，然后的事情明天说",
    "先吃饭吧，然后再聊",
])
def test_a_chinese_farewell_starts_no_task(text: str) -> None:
    # In structured mode a farewell must not become the task's goal, its words the next steps.
    zones = update_task(Zones(), PLAN)
    assert update_task(zones, text) == zones


def test_qici_is_a_later_step() -> None:
    text = "首先查询订单，其次申请退款，最后发邮件通知我"
    assert Router().route(text).mode == STRUCTURED
    assert plan_steps(text) == ["查询订单", "申请退款", "发邮件通知我"]
    assert Router().route("退而求其次，我想问一下退款政策").mode == RAG_ENHANCED



@pytest.mark.parametrize(("text", "steps"), [
    ("First check the stock of SKU-77, then notify the supplier, and finally update the order.",
     ["check the stock of SKU-77", "notify the supplier", "update the order"]),
    ("Check the stock, then email the supplier, and after that update the order",
     ["Check the stock", "email the supplier", "update the order"]),
])
def test_a_step_does_not_end_with_the_and_of_the_next(text: str, steps: list[str]) -> None:
    assert plan_steps(text) == steps


class _CountingEmbedder:
    """Vectors of letter counts: enough to tell the examples apart, offline."""

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(text.count(letter)) + 0.1 for letter in "aeiou"] for text in texts]

    embed_queries = embed_passages


def test_a_centroid_classifier_for_an_unknown_mode_is_refused_when_made() -> None:
    # A misspelt mode among its examples failed the first prepare the classifier sent there,
    # after that user's message was stored.
    classifier = CentroidClassifier(_CountingEmbedder(), {
        SLIDING_WINDOW: ["hello there"], "structred": ["book a hotel then a flight"]})
    with pytest.raises(PlanError, match=r"'structred'.*did you mean 'structured'"):
        Router(classifier=classifier)
    with pytest.raises(PlanError, match="'structred'"):
        ContextManager(classifier=classifier)
    assert classifier.modes == (SLIDING_WINDOW, "structred")


@pytest.mark.parametrize(("keyword", "text", "matches"), [
    ("заказ", "Где мой заказ?", True),
    ("заказ", "Я заказчик этого проекта", False),   # "customer", not "order"
    ("thé", "Je voudrais du thé vert", True),
    ("thé", "Parlons de la théorie des cordes", False),
    ("Größe", "Welche Größe hat das?", True),
    ("Größe", "Die Größenordnung ist unklar", False),
    ("refund", "帮我refund一下", True),              # next to Chinese, still a word
    ("退款", "我想申请退款了", True),                   # Chinese has no spaces: a substring
])
def test_a_keyword_in_any_spaced_script_matches_whole_words(keyword: str, text: str,
                                                            matches: bool) -> None:
    config = modes_from_mapping({"rules": [{"mode": STRUCTURED, "keywords": [keyword]}]})
    assert (Router(config).route(text).mode == STRUCTURED) is matches
