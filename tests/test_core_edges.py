"""Small edges of the core: each wrong input gets a true, typed message; each report number
compares like with like."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, InvalidInputError, Request


def _chat_context() -> Any:
    return ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="hi"))


@pytest.mark.parametrize("call", [
    lambda ctx: ctx.to_request("claude"),
    lambda ctx: ctx.to_messages("claude"),
    lambda ctx: ctx.rendering_notes("claude"),
])
def test_unknown_format_is_an_invalid_input_error_listing_the_formats(call: Any) -> None:
    with pytest.raises(InvalidInputError, match="choose one of openai, openai-responses, "
                                                "anthropic"):
        call(_chat_context())


def test_misspelt_format_names_the_closest_one() -> None:
    with pytest.raises(InvalidInputError, match="did you mean 'openai-responses'"):
        _chat_context().to_request("openai_responses")
