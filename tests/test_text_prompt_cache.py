"""The prompt cache of text builds (``target="text"``), and the cache report's edge cases.

A text prompt is one string: its cached prefix is the leading text it shares with the previous
prompt. The report compares the text rendering part by part (the system part, then each
message), counts those parts' tokens, and never compares prompts of different targets.
"""

from __future__ import annotations

from contextwright.core.cache import PRICE_MODELS, PriceModel


def test_an_input_of_no_tokens_is_not_priced_as_free() -> None:
    for prices in (*PRICE_MODELS, PriceModel("x", 0.5, 1.0, 0)):
        assert prices.relative_cost(0, 0) == 1.0
