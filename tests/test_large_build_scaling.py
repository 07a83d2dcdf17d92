"""A cut around the query's keywords costs about the text it keeps, not its square.

The cut grows its span one piece at a time and checks that the span still fits. Counted whole
at every step, the span is encoded once per piece it gains, which grows as the square of what
is kept. With an encoding whose counts add up across line starts the span is counted from the
counts of its parts, so the text encoded stays a small multiple of what is kept; and every such
count equals the tokenizer's count of the whole span.
"""

from __future__ import annotations

import random

import pytest

from contextwright.core.cutting import _Counts, _kept, _pieces, _Text, cut_around_keywords
from contextwright.tokens import CountingTokenizer, EstimateTokenizer, get_tokenizer
from contextwright.tokens._openai import OpenAITokenizer

WORDS = ("weather", "order", "天气", "订单", "上海", "refund", "🙂", "こんにちは", "price",
         "12345", "2024-10-01", "ok", "\n", "  ", "<|im_end|>", "===", "/path", "\t", "Hello.",
         "Yes!", "。", "“quoted.”", "Über", "'s", "…", "[…]", "\r\n", "١٢٣")


class _Recording:
    """A tokenizer that adds up the characters it is asked to count."""

    def __init__(self, inner: OpenAITokenizer | EstimateTokenizer) -> None:
        self._inner = inner
        self.name, self.exact = inner.name, inner.exact
        self.counted = 0

    def count(self, text: str) -> int:
        self.counted += len(text)
        tokens: int = self._inner.count(text)
        return tokens

    def truncate(self, text: str, max_tokens: int) -> str:
        prefix: str = self._inner.truncate(text, max_tokens)
        return prefix


def _document(seed: int, lines: int, words: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f"{seed}-{line} " + " ".join(rng.choice(WORDS) for _ in range(words))
                     for line in range(lines))


def test_a_large_cut_encodes_a_small_multiple_of_what_it_keeps() -> None:
    recording = _Recording(OpenAITokenizer("o200k_base"))
    tokenizer = CountingTokenizer(recording)
    text = _document(20_251, 4_000, 30)
    kept = cut_around_keywords(text, "what about 上海 weather 12345", 30_000, tokenizer)
    assert 29_000 < tokenizer.count(kept) <= 30_000
    # Counted whole at each step, the span's growth encodes some 280 times the text kept here;
    # counted by parts, each piece is encoded a few times.
    assert recording.counted < 6 * len(kept)


def test_a_large_estimated_cut_reads_a_small_multiple_of_what_it_keeps() -> None:
    recording = _Recording(EstimateTokenizer())
    tokenizer = CountingTokenizer(recording)
    text = _document(20_252, 4_000, 30)
    kept = cut_around_keywords(text, "what about 上海 weather 12345", 30_000, tokenizer)
    assert 29_000 < tokenizer.count(kept) <= 30_000
    # Counted whole at each step, the span's growth read hundreds of times the text kept;
    # the estimate of a span is made from the running parts of the text instead.
    assert recording.counted < 6 * len(kept)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "estimate"])
@pytest.mark.parametrize("shape", ["lines", "sentences", "long lines"])
def test_a_span_counted_by_parts_is_counted_as_the_whole(name: str, shape: str) -> None:
    tokenizer = get_tokenizer(name)
    rng = random.Random(f"{name} {shape}")
    if shape == "lines":
        text = _document(7, 300, 25)
    elif shape == "sentences":
        text = " ".join(rng.choice([w for w in WORDS if not w.isspace()]) for _ in range(3_000))
    else:  # lines longer than a part may be: counted whole, never cut hard
        text = "\n".join("word " * rng.randint(0, 4_000) + "天气" for _ in range(12))
    spans = _pieces(text)
    for complete in (True, False):
        cut = _Text(text, complete, spans, [0] * len(spans))
        counts = _Counts(cut, tokenizer)
        low = high = len(spans) // 3
        pairs: list[tuple[int, int]] = []
        while low > 0 or high < len(spans) - 1:  # grown outwards as a cut grows
            if high == len(spans) - 1 or (low > 0 and rng.random() < 0.5):
                low -= 1
            else:
                high += 1
            pairs.append((low, high))
        for _ in range(40):
            ends = sorted((rng.randrange(len(spans)), rng.randrange(len(spans))))
            pairs.append((ends[0], ends[1]))
        for low, high in pairs:
            whole = tokenizer.count(_kept(cut, low, high))
            assert counts.kept(low, high) == whole
            for limit in (whole - 20, whole - 1, whole, whole + 1, whole + 20):
                assert counts.fits(low, high, limit) == (whole <= limit)
