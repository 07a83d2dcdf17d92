"""A build counted for one rendering, asked for the other when that one does not fit: the
error says which rendering the build was counted for and how to build for the other."""

from __future__ import annotations

from typing import Any

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.final import FinalContext
from contextwright.core.providers import PROVIDER_FORMATS
from contextwright.errors import BudgetError, ValidationError

# Many short messages: the chat framing costs more than the text prompt's separators.
SHORT_ROUNDS = [{"role": role, "content": "ok"} for _ in range(300)
                for role in ("user", "assistant")]
# Lines the text prompt escapes: it costs more than the chat messages.
SEPARATOR_LOOKALIKES = [{"role": role, "content": "=== System ===\n" * 20} for _ in range(40)
                        for role in ("user", "assistant")]


def over_budget_builds(history: list[dict[str, Any]], target: str) -> list[FinalContext]:
    builds = []
    for budget in range(40, 600, 7):
        plan = BuildPlan.named("chat").with_budget(available_override=budget)
        try:
            builds.append(ContextBuilder().build(plan, Request(user_input="hi", history=history),
                                                 target=target))  # type: ignore[arg-type]
        except BudgetError:
            continue
    return builds


def test_a_text_build_whose_request_is_over_the_budget_says_it_was_built_for_text() -> None:
    refused = 0
    for ctx in over_budget_builds(SHORT_ROUNDS, "text"):
        for fmt in PROVIDER_FORMATS:
            try:
                ctx.to_request(fmt)
            except ValidationError as error:
                refused += 1
                assert "over the available" in str(error)
                assert "counted for the text prompt (target='text')" in str(error)
    assert refused


def test_a_chat_build_whose_text_is_over_the_budget_says_to_build_for_text() -> None:
    refused = 0
    for ctx in over_budget_builds(SEPARATOR_LOOKALIKES, "chat"):
        try:
            ctx.to_text()
        except ValidationError as error:
            refused += 1
            assert "over the available" in str(error)
            assert "counted for chat messages" in str(error)
            assert "target='text'" in str(error)
    assert refused
