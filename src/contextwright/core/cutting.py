"""Cutting one long text to a token limit, keeping what the query is about.

``cut_around_keywords`` splits the text into paragraphs (or sentences when it is one paragraph),
keeps the paragraph with the most query keywords and grows the kept span around it while it fits;
gaps are marked with ``[…]``. Without keyword hits it keeps the head. Pure functions.

A cut never takes the line an item must open with: a recalled turn's marker, or the
``(tool error)`` mark of a failed tool result (without it the result would read, and be sent,
as a success).
"""

from __future__ import annotations

import re
from dataclasses import replace

from contextwright.analysis import analyzer
from contextwright.core.gather import Costing, Unit, render_candidate
from contextwright.core.items import TOOL_ERROR_MARK, ContextItem
from contextwright.core.select import MIN_CUT_TOKENS, Cutter
from contextwright.tokens import CountingTokenizer

GAP = "[…]"
_PARAGRAPHS = re.compile(r"\n\s*\n|\n")
_SENTENCES = re.compile(r"(?<=[.!?。！？；;])\s*")
_KEYWORDS = analyzer("cutting")


def query_keywords(query: str) -> frozenset[str]:
    """Lower-cased words of the query without stop words; CJK runs become character bigrams."""
    return frozenset(_KEYWORDS.term_set(query))


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs, or sentences when the text has a single paragraph."""
    parts = [part for part in _PARAGRAPHS.split(text) if part.strip()]
    if len(parts) <= 1:
        parts = [part for part in _SENTENCES.split(text) if part.strip()]
    return parts or [text]


def _hits(paragraph: str, keywords: frozenset[str]) -> int:
    lowered = paragraph.lower()
    return sum(1 for word in keywords if word in lowered)


def cut_around_keywords(text: str, query: str, max_tokens: int,
                        tokenizer: CountingTokenizer) -> str:
    """The best span of ``text`` within ``max_tokens``, centred on the query's keywords."""
    if max_tokens <= 0:
        return ""
    paragraphs = split_paragraphs(text[: max_tokens * 64])
    keywords = query_keywords(query)
    scores = [_hits(p, keywords) for p in paragraphs]
    best = max(range(len(paragraphs)), key=lambda i: (scores[i], -i))
    if scores[best] == 0:
        return tokenizer.truncate(text, max_tokens)
    chosen = {best}
    low = high = best
    while True:
        grown = _grow(paragraphs, scores, chosen, low, high, max_tokens, tokenizer)
        if grown is None:
            break
        low, high = min(chosen | {grown}), max(chosen | {grown})
        chosen.add(grown)
    result = _join(paragraphs, sorted(chosen))
    if tokenizer.count(result) > max_tokens:
        return tokenizer.truncate(result, max_tokens)
    return result


def _grow(paragraphs: list[str], scores: list[int], chosen: set[int], low: int, high: int,
          max_tokens: int, tokenizer: CountingTokenizer) -> int | None:
    """Next paragraph to add (the better-scoring neighbour first) if the result still fits."""
    options = [i for i in (low - 1, high + 1) if 0 <= i < len(paragraphs)]
    options.sort(key=lambda i: (-scores[i], i))
    for index in options:
        if tokenizer.count(_join(paragraphs, sorted(chosen | {index}))) <= max_tokens:
            return index
    return None


def _join(paragraphs: list[str], indexes: list[int]) -> str:
    body = "\n".join(paragraphs[i] for i in indexes)
    head = f"{GAP}\n" if indexes[0] > 0 else ""
    tail = f"\n{GAP}" if indexes[-1] < len(paragraphs) - 1 else ""
    return head + body + tail


def make_cutter(strategy: str, query: str, costing: Costing) -> Cutter | None:
    """A function that cuts a unit's longest cuttable item so the unit fits; None for ``drop``."""
    if strategy == "drop":
        return None
    tokenizer = costing.tokenizer

    def cut_text(text: str, max_tokens: int) -> str:
        if strategy == "head":
            return tokenizer.truncate(text, max_tokens)
        return cut_around_keywords(text, query, max_tokens, tokenizer)

    def cutter(unit: Unit, max_tokens: int) -> Unit | None:
        cuttable = [i for i, c in enumerate(unit.candidates) if c.item.truncatable]
        if not cuttable:
            return None
        index = max(cuttable, key=lambda i: unit.candidates[i].tokens)
        target = unit.candidates[index]
        head, body = _kept_head(target.item)
        others = unit.tokens - target.tokens
        framing = render_candidate(_with_text(target.item, head), costing, 0).tokens
        text_budget = max_tokens - others - framing
        for _ in range(4):
            if text_budget < MIN_CUT_TOKENS // 2:
                return None
            text = head + cut_text(body, text_budget)
            candidate = render_candidate(_with_text(target.item, text), costing, max_tokens)
            if others + candidate.tokens <= max_tokens:
                candidates = list(unit.candidates)
                candidates[index] = candidate
                return Unit(source=unit.source, candidates=candidates, round=unit.round,
                            rank=unit.rank)
            text_budget -= others + candidate.tokens - max_tokens
        return None

    return cutter


KEEP_HEAD = "keep_head"
"""Metadata key of a first line a cut must keep (a recalled turn's marker)."""


def split_head(item: ContextItem) -> tuple[str, str]:
    """(the line a cut keeps, the text it may cut) of ``item``'s content."""
    content = item.message.content
    head = str(item.metadata.get(KEEP_HEAD, ""))
    if head and content.startswith(head):
        return head, content[len(head):]
    return "", content


def _kept_head(item: ContextItem) -> tuple[str, str]:
    """(what a cut keeps at the head, the text it may cut): ``split_head``'s, or the mark.

    The ``TOOL_ERROR_MARK`` a failed tool result opens with is kept like a marker line. It is
    found in the text, not set as ``KEEP_HEAD``: that key also says an item is a recalled
    turn's marked opening, which a tool result never is.
    """
    head, body = split_head(item)
    if head or item.message.role != "tool" or not body.startswith(TOOL_ERROR_MARK):
        return head, body
    mark = f"{TOOL_ERROR_MARK} " if body.startswith(f"{TOOL_ERROR_MARK} ") else TOOL_ERROR_MARK
    return mark, body[len(mark):]


def _with_text(item: ContextItem, text: str) -> ContextItem:
    return replace(item, message=replace(item.message, content=text))
