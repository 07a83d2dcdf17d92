"""Routing and task-zone cases a chat meets every day: story follow-ups, farewells, ordinals.

A follow-up question in a conversation ("And then what happened?", "然后再聊") plans nothing for
the assistant to do; routed as a plan, it tore down the chat's window into a hand-off and built
the next turns as a structured task.
"""

from __future__ import annotations

import pytest

from contextwright.modes import SLIDING_WINDOW, STRUCTURED, Router


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
