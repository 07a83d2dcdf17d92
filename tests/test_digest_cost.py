"""Digest costing: counted line by line where that is exact, and exactly what it renders as."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.accounting import MESSAGE_OVERHEAD
from contextwright.core.digest import LINE_ADDITIVE_TOKENIZERS, DigestCost, count_by_lines
from contextwright.core.gather import Costing, render_candidate
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.tokens import get_tokenizer

# Lines like a digest's, and lines meant to tempt a token across the cut: punctuation, "/",
# spaces and line breaks at both ends, CJK, digits, contractions.
_LINE = st.one_of(
    st.text(alphabet=st.sampled_from(list("ab Z9_-;:./'s\n\t 上海日期\u00a0!?<|>")), max_size=40),
    st.builds(lambda who, vals: f"- {who}, history[3]: {'; '.join(vals)}",
              st.sampled_from(["user", "assistant", "tool get_user_details"]),
              st.lists(st.from_regex(r"[A-Za-z0-9_@.\-]{1,14}", fullmatch=True), max_size=6)),
)


@pytest.mark.parametrize("name", sorted(LINE_ADDITIVE_TOKENIZERS))
@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINE, max_size=12))
def test_counting_by_lines_equals_counting_the_whole_text(name: str, lines: list[str]) -> None:
    tokenizer = get_tokenizer(name)
    text = "\n".join(lines)
    assert count_by_lines(tokenizer.inner.count, text) == tokenizer.inner.count(text)


def test_a_slash_after_a_line_break_is_not_a_cut() -> None:
    # o200k's pre-tokenizer joins punctuation, the line break and a following "/" in one piece.
    tokenizer = get_tokenizer("o200k_base")
    text = "a.\n/b\n//c;\n/"
    assert count_by_lines(tokenizer.inner.count, text) == tokenizer.inner.count(text)


def _digest_item(text: str) -> ContextItem:
    return ContextItem(key="history.digest", message=Message(role="assistant", content=text),
                       layer=Layer.HISTORY, group="digest", order=-1.0, untrusted=True,
                       label="digest of omitted turns")


@pytest.mark.parametrize("tokenizer", ["o200k_base", "cl100k_base", "estimate"])
@pytest.mark.parametrize("target", ["chat", "text"])
def test_digest_cost_equals_the_rendered_candidate(tokenizer: str, target: Any) -> None:
    costing = Costing(get_tokenizer(tokenizer), "en", target)
    text = ("Digest of 12 earlier message(s) left out for space: exact values first seen in "
            "them, not shown elsewhere.\n- user, history[2]: nora_vance_5172; 1988-11-23\n"
            "- tool get_user_details, history[4]: <|im_end|>; QX4ZT8; ¥1,299.00\n- assistant, "
            "history[7]: 14:00:00")
    item = _digest_item(text)
    expected = render_candidate(item, costing, 10_000)
    cost = DigestCost(costing, 10_000)
    assert cost(item) == expected.tokens
    candidate = cost.render(item)
    assert candidate.message == expected.message
    assert candidate.tokens == expected.tokens
    assert cost.render(item) is candidate  # the builder's rendering reuses the last cost


@pytest.mark.parametrize("name", sorted(LINE_ADDITIVE_TOKENIZERS))
@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_LINE, min_size=1, max_size=8),
       label=st.text(alphabet=st.sampled_from(list("ab Z9_-<>|上 .")), max_size=12))
def test_any_fenced_item_costs_what_it_renders_as(name: str, lines: list[str],
                                                  label: str) -> None:
    costing = Costing(get_tokenizer(name), "en", "chat")
    item = ContextItem(key="history.digest", layer=Layer.HISTORY, untrusted=True,
                       label=label or None,
                       message=Message(role="assistant", content="\n".join(lines)))
    expected = render_candidate(item, costing, 100_000)
    whole = get_tokenizer(name).inner.count(expected.message.content)
    assert DigestCost(costing, 100_000)(item) == expected.tokens == whole + MESSAGE_OVERHEAD


def _history(rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(rounds):
        messages += [{"role": "user", "content": f"Order ORD{n:04d}X for user u_{n}_77, ok?"},
                     {"role": "assistant", "content": f"Booked flight HAT{n:03d} on 2024-05-"
                                                      f"{n % 28 + 1:02d}. " + "More words. " * 20}]
    return messages


@pytest.mark.parametrize("tokenizer", ["o200k_base", "cl100k_base"])
def test_the_digest_in_a_build_costs_what_its_message_counts(tokenizer: str) -> None:
    builder = ContextBuilder(tokenizer=tokenizer)
    plan = (BuildPlan.builder("digest").budget(available_override=3000)
            .add("history", weight=0.7, max_tokens=900,
                 options={"digest_share": 0.3, "digest_scan": 100})
            .add("user", weight=0.3).build())
    ctx = builder.build(plan, Request(user_input="Which order was it?", history=_history(80)))
    digest = next(m for m in ctx.messages if "left out for space" in m.content)
    decision = next(d for d in ctx.report.decisions if d.key == "history.digest")
    whole = get_tokenizer(tokenizer).inner.count(digest.content)  # uncached, in one piece
    assert decision.tokens_after == whole + MESSAGE_OVERHEAD
    assert ctx.total_tokens <= 3000


def _support_chat(rounds: int) -> list[dict[str, str]]:
    history = []
    for i in range(rounds):
        history += [
            {"role": "user", "content": f"Where is order ORD-{10000 + i}? I paid ${i}.{i:02d}. "
                                        + "Please check the shipping status. " * (1 + i % 4)},
            {"role": "assistant", "content": f"Order ORD-{10000 + i} shipped with tracking "
                                             f"TRK{900000 + i * 7}. "
                                             + "It should arrive soon. " * (1 + i % 3)}]
    return history


@pytest.mark.parametrize("budget", [1000, 2000, 2500, 3500])
def test_a_digest_that_brings_the_data_note_leaves_room_for_it(budget: int) -> None:
    # Plain chat history offers nothing fenced, so the note that fenced text is data is not set
    # aside; the digest is fenced and brings it along. Its room must pay for it, or the exact
    # count drops the whole digest and leaves a third of the budget unused.
    request = Request(system="You are a support agent.", user_input="Any update on my order?",
                      history=_support_chat(60))
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        BuildPlan.named("tool_heavy").with_budget(available_override=budget), request)
    digest = [d for d in ctx.report.decisions if d.key == "history.digest"]
    assert [d.action for d in digest] == ["compacted"]
    assert ctx.total_tokens >= 0.95 * budget
