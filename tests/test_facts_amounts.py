"""Money facts keep their order of magnitude, in English and Chinese."""

from __future__ import annotations

import pytest

from contextwright.compress.facts import extract_facts
from contextwright.compress.summarize import ExtractiveSummarizer
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
