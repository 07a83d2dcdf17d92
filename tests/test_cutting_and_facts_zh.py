"""Cutting around the query keeps the text it keeps verbatim; facts read Chinese formatting whole.

A cut splits only at sentence ends (so "0.35", "¥1,299.00" and an email stay whole), rebuilds
the kept pieces with the text that stood between them, reaches the text after its best match,
and splits an over-long best paragraph into sentences instead of keeping its head. Fact
extraction reads full-width group separators, the part of the day and Chinese orders of
magnitude as part of a value, and Chinese id keywords as it reads English ones.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.compress.facts import extract_facts, missing_facts
from contextwright.compress.summarize import ExtractiveSummarizer
from contextwright.core.cutting import GAP, cut_around_keywords, split_paragraphs
from contextwright.core.items import Message
from contextwright.core.request import Document
from contextwright.tokens import get_tokenizer

TOKENIZER = get_tokenizer("o200k_base")
EXACT = ("0.35", "¥1,299.00", "kefu.service@shop.example.cn", "v2.3.1")
FILLER_ZH = "退款政策说明：普通商品七天无理由退货。"
OTHER_ZH = "其他说明：请保留发票。"


def verbatim_in_order(kept: str, original: str) -> bool:
    """Whether ``kept`` with its ``[…]`` gap markers removed is pieces of ``original``, in order."""
    position = 0
    for piece in re.split(r"\n?" + re.escape(GAP) + r"\n?", kept):
        if not piece:
            continue
        found = original.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


# --------------------------------------------------------------- sentence ends, verbatim text

def test_a_dot_inside_a_number_an_email_or_a_version_ends_no_sentence() -> None:
    text = "阈值设为0.35，单价¥1,299.00，邮箱zhang.san@example.com，版本v2.3.1。下一句。"
    assert split_paragraphs(text) == [
        "阈值设为0.35，单价¥1,299.00，邮箱zhang.san@example.com，版本v2.3.1。", "下一句。"]
    assert split_paragraphs("Set it to 0.35. Then v2.3.1 ships!  Done") == [
        "Set it to 0.35.", "Then v2.3.1 ships!", "Done"]


def test_a_cut_keeps_decimals_amounts_emails_and_versions_whole() -> None:
    text = (FILLER_ZH * 20 + "相关性阈值设为0.35，低于0.35的片段直接丢弃；订单金额¥1,299.00，"
            "联系邮箱kefu.service@shop.example.cn，客户端版本v2.3.1。" + OTHER_ZH * 20)
    kept = cut_around_keywords(text, "相关性阈值设多少？联系邮箱是什么？", 120, TOKENIZER)
    assert all(fact in kept for fact in EXACT)
    assert verbatim_in_order(kept, text) and TOKENIZER.count(kept) <= 120


def test_a_build_that_cuts_a_document_keeps_its_numbers_whole() -> None:
    doc = (FILLER_ZH * 1000 + "相关性阈值设为0.35，低于0.35的片段直接丢弃。订单金额¥1,299.00，"
           "运费12.5元。" + OTHER_ZH * 1000)
    request = Request(user_input="相关性阈值设多少？运费多少？",
                      documents=[Document(id="d1", text=doc, source="政策.txt")])
    ctx = ContextBuilder(tokenizer="o200k_base").build(BuildPlan.named("rag_qa"), request)
    assert any(d.action == "truncated" for d in ctx.report.decisions)
    sent = json.dumps(ctx.to_request("openai", model="gpt-4o"), ensure_ascii=False)
    assert "阈值设为0.35，" in sent and "¥1,299.00" in sent and "12.5元" in sent


def test_kept_paragraphs_keep_the_breaks_that_stood_between_them() -> None:
    paragraphs = [f"Paragraph {i} is about gardening." for i in range(60)]
    paragraphs[30] = "The refund window is 45 days."
    text = "\n\n".join(paragraphs)
    kept = cut_around_keywords(text, "refund window", 40, TOKENIZER)
    assert "45 days." in kept and "days.\n\nParagraph 31" in kept
    assert kept.startswith(f"{GAP}\n") and kept.endswith(f"\n{GAP}")
    assert kept.removeprefix(f"{GAP}\n").removesuffix(f"\n{GAP}") in text


# ------------------------------------------------------------------------ growth direction

def test_a_cut_reaches_the_answer_after_the_matching_question() -> None:
    text = OTHER_ZH * 40 + "问：生鲜商品可以退吗？答：签收后48小时内可申请退款。" + OTHER_ZH * 40
    kept = cut_around_keywords(text, "生鲜商品可以退吗？", 80, TOKENIZER)
    assert "问：生鲜商品可以退吗？答：签收后48小时内可申请退款。" in kept
    assert TOKENIZER.count(kept) <= 80


def test_growth_on_a_tie_takes_both_sides_in_turn() -> None:
    before = [f"Before {i} talks about soil." for i in range(30)]
    after = [f"After {i} talks about soil." for i in range(30)]
    text = "\n".join([*before, "Refunds take 45 days.", *after])
    kept = cut_around_keywords(text, "refunds", 60, TOKENIZER)
    shown_before = sum(line in kept for line in before)
    shown_after = sum(line in kept for line in after)
    assert shown_before > 0 and shown_after in (shown_before, shown_before + 1)


# --------------------------------------------------------------- an over-long best paragraph

def test_an_over_long_best_paragraph_is_cut_around_its_keywords() -> None:
    paragraph = FILLER_ZH * 60 + "特别说明：生鲜商品的退款时限为签收后48小时内。" + OTHER_ZH * 60
    text = "第一章 总则\n" + paragraph + "\n第三章 附则"
    kept = cut_around_keywords(text, "生鲜商品退款时限是多久？", 200, TOKENIZER)
    assert "特别说明：生鲜商品的退款时限为签收后48小时内。" in kept
    assert kept.startswith(f"{GAP}\n") and kept.endswith(f"\n{GAP}")
    assert verbatim_in_order(kept, text) and TOKENIZER.count(kept) <= 200


def test_an_over_long_best_sentence_is_cut_from_its_keyword() -> None:
    sentence = "x " * 500 + "the refund window is 45 days " + "y " * 500
    text = "Intro.\n\n" + sentence + "\n\nEnd."
    kept = cut_around_keywords(text, "refund window", 20, TOKENIZER)
    assert "refund window is 45 days" in kept
    assert verbatim_in_order(kept, text) and TOKENIZER.count(kept) <= 20


# ---------------------------------------------------------------------------- the property

_WORDS = st.sampled_from([
    "阈值设为0.35", "单价¥1,299.00", "邮箱zhang.san@example.com", "版本v2.3.1", "退款", "生鲜商品",
    "refund window", "45 days", "soil", "Dr. Smith", "e.g.", "…", "\"quoted.\"", "（注）",
])
_BREAKS = st.sampled_from(["", " ", "，", "。", "！", "？", "；", ". ", "! ", "? ", "; ", ".",
                           "\n", "\n\n", "\n  \n", "  "])


@st.composite
def _texts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(_WORDS, _BREAKS), min_size=1, max_size=80))
    return "".join(word + brk for word, brk in parts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts(), query=st.sampled_from(["退款阈值", "refund window", "生鲜商品", "soil"]),
       max_tokens=st.integers(1, 120))
def test_what_a_cut_keeps_is_verbatim_pieces_of_the_original_in_order(
        text: str, query: str, max_tokens: int) -> None:
    kept = cut_around_keywords(text, query, max_tokens, TOKENIZER)
    assert verbatim_in_order(kept, text)
    assert TOKENIZER.count(kept) <= max_tokens


# --------------------------------------------------------------------------- Chinese facts

@pytest.mark.parametrize(("text", "fact"), [
    ("总价1，299元", "1，299元"),
    ("金额￥１，２９９．００", "￥１，２９９．００"),
    ("共计12，345，678元", "12，345，678元"),
    ("下午3:30送达", "下午3:30"),
    ("晚上 8:05 到", "晚上 8:05"),
    ("预算¥1.2万", "¥1.2万"),
    ("预算￥3千元", "￥3千元"),
])
def test_a_chinese_amount_or_time_is_one_fact_as_written(text: str, fact: str) -> None:
    assert extract_facts(text) == (fact,)


@pytest.mark.parametrize(("text", "facts"), [
    ("买了3件，每件299元", ("299元",)),
    ("数量1，2345件", ("2345",)),
    ("第12，第345号", ("345",)),
])
def test_a_full_width_comma_that_breaks_a_clause_joins_no_numbers(
        text: str, facts: tuple[str, ...]) -> None:
    assert extract_facts(text) == facts


def test_the_summary_check_refuses_a_changed_chinese_amount() -> None:
    required = extract_facts("金额￥１，２９９．００")
    assert missing_facts("金额：￥１，９９９．００（另付２９９．００）", required) == required
    assert missing_facts("金额：¥1,299.00", required) == ()
    assert missing_facts("总价299元", extract_facts("总价1，299元")) == ("1，299元",)
    assert missing_facts("送达时间3:30", extract_facts("下午3:30送达")) == ("下午3:30",)


@pytest.mark.parametrize("text", [
    "订单 #A1B2C3 还没发货", "订单#A1B2C3还没发货", "订单号：#A1B2C3", "预订 #A1B2C3",
    "order #A1B2C3 has not shipped",
])
def test_a_chinese_id_keyword_and_a_hash_read_as_the_english_ones(text: str) -> None:
    assert extract_facts(text) == ("A1B2C3",)


def test_a_summary_keeps_an_id_after_a_chinese_keyword_and_a_hash() -> None:
    messages = [Message(role="user", content="你好，订单 #A1B2C3 一直没发货"),
                Message(role="assistant", content="抱歉，我来帮您催一下。")]
    summary = ExtractiveSummarizer().summarize(None, messages, language="zh")
    assert "A1B2C3" in summary.facts
