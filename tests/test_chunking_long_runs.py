"""Chunking a long run without sentence ends (base64, minified JSON, Chinese without
punctuation) reads each part of it a bounded number of times: every chunk's prefix had been
cut from the whole rest of the run, so an 800,000-character base64 block took 15 s."""

from __future__ import annotations

import base64
import random

from contextwright.retrieval import SourceDocument, chunk_document
from contextwright.tokens import CountingTokenizer
from contextwright.tokens._openai import OpenAITokenizer


class Reading:
    """o200k_base, remembering how many characters it was given to cut."""

    exact = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.inner = OpenAITokenizer("o200k_base")
        self.cut_chars = 0

    def count(self, text: str) -> int:
        return self.inner.count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        self.cut_chars += len(text)
        return self.inner.truncate(text, max_tokens)


def cut_chars(text: str, name: str) -> tuple[int, CountingTokenizer]:
    reading = Reading(name)
    tokenizer = CountingTokenizer(reading)
    chunks = chunk_document(SourceDocument(id="x", text=text), tokenizer)
    assert "".join(chunk.text for chunk in chunks) == text
    assert all(chunk.tokens <= 200 for chunk in chunks)
    return reading.cut_chars, tokenizer


def test_a_long_base64_run_is_read_a_bounded_number_of_times() -> None:
    text = base64.b64encode(random.Random(1).randbytes(60_000)).decode()
    read, _ = cut_chars(text, "reading-base64")
    assert read <= 20 * len(text)


def test_chinese_without_punctuation_is_read_a_bounded_number_of_times() -> None:
    rng = random.Random(2)
    letters = "退货政策收到商品天内可以无理由运费由买家承担"
    text = "".join(rng.choice(letters) for _ in range(60_000))
    read, _ = cut_chars(text, "reading-chinese")
    assert read <= 20 * len(text)


def test_a_run_of_long_tokens_still_fills_its_chunks() -> None:
    text = "a" * 40_000  # tokens of many characters: the first window fits whole and grows
    _, tokenizer = cut_chars(text, "reading-letters")
    chunks = chunk_document(SourceDocument(id="x", text=text), tokenizer)
    assert all(chunk.tokens == 200 for chunk in chunks[:-1])
