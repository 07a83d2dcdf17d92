"""A long message (over the 20,000 characters whose facts are remembered by text) is read for
facts once per summary merge, not once per rule that asks: the merge, its check and the user's
statements each read it again (a 161,000-character log eight times)."""

from __future__ import annotations

from collections import Counter

import pytest

from contextwright import clear_caches
from contextwright.compress import facts
from contextwright.compress.summarize import ExtractiveSummarizer, verified
from contextwright.core.items import Message
from contextwright.tokens import get_tokenizer


def test_a_long_message_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_caches()
    reads: Counter[str] = Counter()
    extract = facts._extract

    def counting(text: str) -> tuple[str, ...]:
        if len(text) > 20_000:
            reads[text] += 1
        return extract(text)

    monkeypatch.setattr(facts, "_extract", counting)
    log = " ".join(f"line {n}: order ORD-{10_000 + n} shipped, call +44 20 7946 {n % 10_000:04d}."
                   for n in range(600))
    messages = [Message(role="user", content="Why did these orders ship late? " + log),
                Message(role="assistant", content="Checking."),
                Message(role="tool", name="logs", content=log)]
    verified(ExtractiveSummarizer(), None, messages, language="auto", max_tokens=300,
             tokenizer=get_tokenizer("o200k_base"))
    assert reads and max(reads.values()) == 1
