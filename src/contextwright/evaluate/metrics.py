"""Metric functions over rendered messages: presence, position, density, tool pairs, nDCG.

Every function reads OpenAI-format message dicts (what ``ctx.to_messages("openai")`` returns, or
what a baseline keeps), never the builder's internal state, so a metric can only credit what the
model would actually see. Pure functions: no I/O, no builds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Msg = Mapping[str, Any]
Count = Callable[[str], int]
MESSAGE_COST = 4
"""Per-message framing tokens (the library counts the same)."""
REPLY_PRIMING = 3
"""Tokens that prime the reply, counted once per context (the library counts the same)."""
HEAD, TAIL = 0.2, 0.8
"""Relative offsets below ``HEAD`` are the head of the context, above ``TAIL`` its tail."""


def content_text(message: Msg) -> str:
    """A message's text: its content, or the text parts of a list of parts joined by lines.

    A message with images is rendered as a list of parts (``{"type": "text"}`` and
    ``{"type": "image_url"}``); its text is what a model reads of it.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, Mapping) and part.get("type") == "text"
                         and isinstance(part.get("text"), str))
    return ""


def message_parts(message: Msg) -> list[str]:
    """The text of one message: its content and the arguments of its tool calls."""
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str | list):
        parts.append(content_text(message))
    for call in message.get("tool_calls") or []:
        arguments = call.get("function", {}).get("arguments", "")
        parts.append(arguments if isinstance(arguments, str) else json.dumps(arguments))
    return parts


def context_text(messages: Iterable[Msg]) -> str:
    """All message contents and tool-call arguments, one per line."""
    return "\n".join(part for message in messages for part in message_parts(message))


def message_tokens(message: Msg, count: Count) -> int:
    """Chat cost of one message: content and call arguments, plus the per-message framing."""
    return sum(count(part) for part in message_parts(message)) + MESSAGE_COST


def context_tokens(messages: Sequence[Msg], count: Count) -> int:
    """Chat cost of a message list, counted the same way for contextwright and baselines."""
    return sum(message_tokens(m, count) for m in messages) + REPLY_PRIMING


def locate(text: str, messages: Sequence[Msg]) -> tuple[int, int] | None:
    """(message index, character offset) of the first verbatim copy of ``text``, or ``None``.

    Only whole copies count: a turn cut in the middle, or a paraphrase, is not present.
    """
    if not text:
        return None
    for index, message in enumerate(messages):
        offset = content_text(message).find(text)
        if offset >= 0:
            return index, offset
    return None


def relative_position(where: tuple[int, int], messages: Sequence[Msg], count: Count) -> float:
    """Where a located text starts, as a share of the context's tokens (0 head, 1 tail)."""
    index, offset = where
    before = sum(message_tokens(m, count) for m in messages[:index])
    if offset:
        before += count(content_text(messages[index])[:offset])
    total = context_tokens(messages, count)
    return min(before / total, 1.0) if total else 0.0


def pair_problems(messages: Sequence[Msg]) -> list[str]:
    """Independent OpenAI tool-pair check; an empty list means every pair is intact.

    A block of tool messages must directly follow an assistant message with tool calls; each
    result answers one still-unanswered call with its id (the first such call, i.e. by
    position, because τ-bench reuses ids); every call must be answered.
    """
    problems: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.get("role") == "tool":
            problems.append(f"messages[{index - 1}] is a tool result that follows no call")
            continue
        calls = (message.get("tool_calls") or []) if message.get("role") == "assistant" else []
        if not calls:
            continue
        pending = [str(call.get("id")) for call in calls]
        while index < len(messages) and messages[index].get("role") == "tool":
            call_id = messages[index].get("tool_call_id")
            if call_id in pending:
                pending.remove(call_id)
            else:
                problems.append(f"messages[{index}] answers no call of the assistant before it")
            index += 1
        if pending:
            problems.append(f"{len(pending)} call(s) before messages[{index}] have no result")
    return problems


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains in rank order (rank 1 undiscounted)."""
    return sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))


def ndcg_at_k(ranking: Sequence[str], relevance: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k of ``ranking`` against graded ``relevance``, log2 discount; the one nDCG here.

    Duplicates: a document counts once, at its first rank; a repeat is skipped and takes no
    rank, so ``k`` counts distinct documents (as trec_eval reads a run: one score per
    document). A ranking of chunks that repeats a relevant document thus never scores above 1.
    The ideal ranking is the ``k`` best positive gains; without any, the score is 0.
    """
    seen: set[str] = set()
    gains: list[float] = []
    for doc in ranking:
        if doc not in seen and len(gains) < k:
            seen.add(doc)
            gains.append(relevance.get(doc, 0.0))
    ideal = dcg(sorted((g for g in relevance.values() if g > 0), reverse=True)[:k])
    return dcg(gains) / ideal if ideal else 0.0


def recall_at_k(ranking: Sequence[str], relevance: Mapping[str, float], k: int) -> float:
    """Share of the relevant documents found in the first ``k`` of ``ranking``."""
    relevant = {doc for doc, gain in relevance.items() if gain > 0}
    return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0
