"""Money facts keep their order of magnitude, in English and Chinese."""

from __future__ import annotations

import json

import pytest

from contextwright.compress.facts import extract_facts
from contextwright.compress.summarize import ExtractiveSummarizer
from contextwright.compress.tool_results import one_line_tool_result, reduce_tool_result
from contextwright.core.items import Message


@pytest.mark.parametrize(("text", "fact"), [
    ("The contract is worth $2.5M in total", "$2.5M"),
    ("a setup fee of $1.2K applies", "$1.2K"),
    ("a €3bn deal", "€3bn"),
    ("USD 1.5M raised", "USD 1.5M"),
    ("about 2.5M USD", "2.5M USD"),
])
def test_a_magnitude_suffix_stays_with_the_amount(text: str, fact: str) -> None:
    assert fact in extract_facts(text)


@pytest.mark.parametrize("text", ["$2.5Mbps link", "$2.5x faster", "$1.2Kg"])
def test_no_money_fact_is_a_prefix_of_another_amount(text: str) -> None:
    assert all(not f.startswith("$") for f in extract_facts(text))


@pytest.mark.parametrize(("text", "fact"), [
    ("预算8千元左右", "8千元"),
    ("退了5万块", "5万块"),
    ("总价2.5万", "2.5万"),
    ("大概3千块钱吧", "3千块钱"),
    ("一共5万块钱", "5万块钱"),
])
def test_common_chinese_amounts_are_money_facts(text: str, fact: str) -> None:
    assert fact in extract_facts(text)


def test_a_distance_in_thousands_is_no_amount() -> None:
    assert extract_facts("跑了3千米") == ()


def test_a_chinese_amount_is_kept_in_the_summary() -> None:
    summary = ExtractiveSummarizer().summarize(
        None, [Message(role="user", content="我的预算是8千元，帮我找个酒店")], language="zh")
    assert "8千元" in summary.facts


@pytest.mark.parametrize(("value", "shown"), [
    ("¥1.2万", "¥1.2万"), ("5月6日下午3:30", "5月6日下午3:30"), ("晚上8点", "晚上8点"),
    ("15%", "15%"), ("$1,299", "$1,299"), ("下午3点半", "下午3点半"),
])
def test_a_reduced_tool_result_keeps_amounts_and_times_whole(value: str, shown: str) -> None:
    reduced = reduce_tool_result("get_refund", json.dumps(
        {"order_id": "A1001", "detail": f"the value is {value} as agreed"}, ensure_ascii=False))
    assert f"detail: {shown}" in reduced


def test_a_long_text_result_lists_whole_amounts_and_times() -> None:
    text = ("财务已审核，款项将原路退回您的银行卡。" * 8
            + "退款¥1.2万，预计5月6日下午3:30到账，优惠15%。")
    reduced = reduce_tool_result("get_refund", text)
    assert "¥1.2万" in reduced and "5月6日下午3:30" in reduced and "15%" in reduced


def test_an_early_one_line_result_still_lists_no_prices_or_times() -> None:
    long = "ORD-5512 costs $5 at 下午3:30, 15% off. " + "filler words here " * 12
    assert one_line_tool_result("search", long, 240) == "Earlier tool result (search): ORD-5512"
