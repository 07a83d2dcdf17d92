"""Exact facts beyond English and Simplified Chinese, and the summary rules around them.

Traditional Chinese, Japanese and Korean amounts, times, dates, addresses and keyed ids; amounts
grouped with spaces, apostrophes or lakh commas and written with a decimal comma; every currency
sign; international phone numbers. A fact is never a piece of a longer value, so a summary that
states a piece of it does not pass.
"""

from __future__ import annotations

import time
import unicodedata

import pytest

from contextwright.compress.facts import extract_facts, fact_kind, missing_facts
from contextwright.compress.summarize import Summary, verified
from contextwright.core.items import Message
from contextwright.errors import SummaryError


@pytest.mark.parametrize(("text", "expected"), [
    ("預算¥1.2萬元，尾款3千元", ["¥1.2萬元", "3千元"]),
    ("預算1.5萬塊", ["1.5萬塊"]),
    ("12月3號晚上8點半送達", ["12月3號晚上8點半"]),
    ("下午3點到", ["下午3點"]),
    ("請寄到臺北市信義區信義路五段7號", ["臺北市信義區信義路五段7號"]),
    ("寄到新北市板橋區文化路", ["新北市板橋區文化路"]),
    ("訂單編號 ABCDEF", ["ABCDEF"]),
    ("快遞單號 SFABCDEFG", ["SFABCDEFG"]),
    ("金額 NT$1,200", ["NT$1,200"]),
])
def test_traditional_chinese_facts_read_as_the_simplified_ones(
        text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Итого: 12 500 ₽", ["12 500 ₽"]),
    ("Итого: 1 250 000 ₽", ["1 250 000 ₽"]),
    ("Итого: 12\u00a0500,00\u00a0₽", ["12\u00a0500,00\u00a0₽"]),
    ("Total : 12\u202f500,00\u00a0€", ["12\u202f500,00\u00a0€"]),
    ("Razem: 1 299,99 zł", ["1 299,99 zł"]),
    ("Celkem 25 000 Kč", ["25 000 Kč"]),
    ("Summe: 1.299,00 €", ["1.299,00 €"]),
    ("Total: €1.200,50", ["€1.200,50"]),
    ("CHF 1'250.00", ["CHF 1'250.00"]),
    ("Loan amount is ₹1,50,000 and EMI ₹12,500", ["₹1,50,000", "₹12,500"]),
    ("कुल राशि ₹2,35,000 है", ["₹2,35,000"]),
    ("Budget: Rs. 10,00,000", ["Rs. 10,00,000"]),
    ("population 10,00,000", ["10,00,000"]),
    ("Итого: 12 500", ["12 500"]),
    ("paid €1,50 today", ["€1,50"]),
])
def test_amounts_grouped_in_any_locale_are_one_fact(text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize("text", [
    "Итого: 12 500 ₽", "Total : 12\u202f500,00\u00a0€", "Celkem 25 000 Kč", "Total: €1.200,50",
    "CHF 1'250.00", "Итого: 1 250 000 ₽", "12\u00a0500", "x 1'250", "$10,20,30",
])
def test_no_fact_is_a_piece_of_a_grouped_amount(text: str) -> None:
    pieces = {"500", "000", "250", "250.00", "€1.200", "500 ₽", "$10"}
    assert pieces.isdisjoint(extract_facts(text))


@pytest.mark.parametrize(("told", "wrong"), [
    ("Сумма счёта 12 500 ₽.", "500 ₽"),
    ("Le total est de 1 299,00 €.", "299 €"),
    ("Der Betrag ist €1.200,50.", "€1.200"),
    ("預算¥1.2萬元", "¥1.2"),
    ("My loan amount is ₹1,50,000.", "₹1"),
])
def test_a_summary_stating_a_piece_of_the_amount_is_refused(told: str, wrong: str) -> None:
    class Wrong:
        def summarize(self, previous: Summary | None, messages: object, *, language: str,
                      max_tokens: int | None = None, tokenizer: object = None) -> Summary:
            return Summary(need="pay the invoice", facts=(wrong,))

    messages = [Message(role="user", content=told), Message(role="assistant", content="OK")]
    with pytest.raises(SummaryError):
        verified(Wrong(), None, messages, language="en")


@pytest.mark.parametrize(("text", "expected"), [
    ("お支払いは3万円です", ["3万円"]),
    ("お支払いは30,000円です", ["30,000円"]),
    ("予算は1万2千円", ["1万2千円"]),
    ("5千円札", ["5千円"]),
    ("午後3時30分にお届け", ["午後3時30分"]),
    ("15時30分", ["15時30分"]),
    ("12月3日午後3時30分にお届け", ["12月3日午後3時30分"]),
    ("注文番号は A1B2C3 です", ["A1B2C3"]),
    ("결제 금액은 3만원입니다", ["3만원"]),
    ("30,000원", ["30,000원"]),
    ("총 1억 2천만 원", ["1억 2천만 원"]),
    ("12월 3일 오후 3시", ["12월 3일 오후 3시"]),
    ("오후 3시 30분에 만나요", ["오후 3시 30분"]),
    ("₩30,000", ["₩30,000"]),
    ("₹1,200", ["₹1,200"]),
    ("฿1,200", ["฿1,200"]),
    ("₪1,200", ["₪1,200"]),
    ("₽1,200", ["₽1,200"]),
])
def test_japanese_and_korean_amounts_times_and_every_currency_sign(
        text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize("text", ["3千米", "5時間かかる", "3시간 걸려요", "1万2"])
def test_distances_and_durations_are_no_amounts_or_times(text: str) -> None:
    assert extract_facts(text) == ()


def test_every_currency_sign_unicode_knows_is_a_currency() -> None:
    signs = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Sc"]
    assert [s for s in signs if extract_facts(f"{s}1,200") != (f"{s}1,200",)] == []


@pytest.mark.parametrize(("fact", "kind"), [
    ("午後3時30分", "time"), ("오후 3시", "time"), ("12月3號晚上8點", "date"),
    ("1万2千円", "money"), ("12 500 ₽", "money"), ("+91 98765 43210", "phone"),
])
def test_fact_kinds_of_the_new_forms(fact: str, kind: str) -> None:
    assert fact_kind(fact) == kind


@pytest.mark.parametrize("phone", [
    "+91 98765 43210", "+33 1 23 45 67 89", "+49 30 12345678", "+49 151 23456789",
    "+55 11 91234-5678", "+81 3-1234-5678", "+7 (495) 123-45-67", "+971 50 123 4567",
    "(03) 1234-5678", "(02) 9876 5432", "098765 43210", "555 123 4567", "+919876543210",
])
def test_international_phone_numbers_are_one_fact(phone: str) -> None:
    assert extract_facts(f"call me at {phone} please") == (phone,)


def test_a_phone_rewritten_as_its_pieces_is_missing() -> None:
    required = extract_facts("call +91 98765 43210")
    assert missing_facts("numbers 98765 and 43210", required) == ("+91 98765 43210",)


@pytest.mark.parametrize(("text", "expected"), [
    # English and Simplified Chinese as before.
    ("Total charged: $12,500", ["$12,500"]),
    ("总价￥1,299.00，另付199元", ["￥1,299.00", "199元"]),
    ("买了3件，299元一件", ["299元"]),
    ("数量3，2999元", ["2999元"]),
    ("预算¥1.2万元，尾款3千元", ["¥1.2万元", "3千元"]),
    ("ids 1234,5678", ["1234"]),
    ("call +44 20 7946 0958 or 020 7946 0958", ["+44 20 7946 0958", "020 7946 0958"]),
    ("version 1.2.3 costs $3", ["1.2.3", "$3"]),
    ("price $100 $200", ["$100", "$200"]),
])
def test_english_and_simplified_chinese_facts_are_unchanged(
        text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


_NEAR_MISSES = {
    "spaced digits": "1 ", "long spaced run": " 234", "no-break run": "\u00a0234",
    "apostrophe run": "'234", "lakh run": ",50", "comma run": ",234", "dot run": ".234",
    "decimal comma run": ",5", "magnitude run": "万2", "korean magnitude run": "억 2",
    "korean times": "오후 3시 ", "japanese times": "午後3時", "plus groups": "+1 2 ",
    "area codes": "(03) 12", "signs": "€1 ", "signs after": "1 €", "currency words": "1 zł",
    "traditional": "萬號點區",
}


@pytest.mark.parametrize("unit", list(_NEAR_MISSES.values()), ids=list(_NEAR_MISSES))
def test_facts_of_near_misses_take_linear_time(unit: str) -> None:
    def seconds(size: int) -> float:
        text = "1" + unit * (size // len(unit))
        start = time.perf_counter()
        extract_facts(text)
        return time.perf_counter() - start

    small, large = seconds(20_000), seconds(160_000)
    # Eight times the text: a linear scan takes about eight times as long, a quadratic one
    # sixty-four times; the margin leaves room for a busy machine.
    assert large < 20 * small + 0.5
