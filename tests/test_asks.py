"""Whether an input asks something (``analysis.asks``)."""

from __future__ import annotations

import pytest

from contextwright.analysis import asks


@pytest.mark.parametrize("text", [
    "When did Mel adopt the puppy?",
    "what did I say about the trip",
    "Tell me the tracking number.",
    "Great news. Did the invoice go out",
    "Remind me of the address",
    "订单到了吗",
    "你还记得上次说的酒店",
    "上海明天天气怎么样",
    "Is it done？",
])
def test_questions_and_requests_to_tell_ask(text: str) -> None:
    assert asks(text)


@pytest.mark.parametrize("text", [
    "Thanks, Mel! It really motivated me for sure.",
    "I know who did it.",
    "That's great, I loved the trip!",
    "我很喜欢那次旅行。",
    "",
    "Showroom visit done; shipping next week.",
])
def test_statements_ask_nothing(text: str) -> None:
    assert not asks(text)
