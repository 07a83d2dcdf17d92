"""Values the digest lists whole: URLs with their own brackets, and amounts, phones and account
numbers as other locales write them (``compress.facts.extract_facts``)."""

from __future__ import annotations

import pytest

from contextwright.compress.facts import extract_facts, fact_kind


@pytest.mark.parametrize(("text", "fact"), [
    ("See https://en.wikipedia.org/wiki/Mercury_(planet) for details",
     "https://en.wikipedia.org/wiki/Mercury_(planet)"),
    ('{"url": "https://en.wikipedia.org/wiki/Mercury_(planet)"}',
     "https://en.wikipedia.org/wiki/Mercury_(planet)"),
    ("[docs](https://ex.com/x_(y)) here", "https://ex.com/x_(y)"),
    ("open https://ex.com/q?a=[1] now", "https://ex.com/q?a=[1]"),
])
def test_a_url_keeps_the_bracket_it_opened(text: str, fact: str) -> None:
    assert extract_facts(text) == (fact,)


@pytest.mark.parametrize(("text", "fact"), [
    ("(see https://ex.com/a) now", "https://ex.com/a"),
    ("(see https://en.wikipedia.org/wiki/Mercury_(planet))", "https://en.wikipedia.org/wiki/Mercury_(planet)"),
    ("[https://ex.com/b], then", "https://ex.com/b"),
])
def test_a_url_leaves_the_bracket_of_the_prose_around_it(text: str, fact: str) -> None:
    assert extract_facts(text) == (fact,)


@pytest.mark.parametrize(("text", "fact"), [
    ("Giá 5.000.000 ₫", "5.000.000 ₫"),
    ("Harga Rp 1.500.000", "Rp 1.500.000"),
    ("Harga Rp1.500.000,00 saja", "Rp1.500.000,00"),
    ("JP¥1,000 only", "JP¥1,000"),
    ("Refund -€5.00 issued", "-€5.00"),
    ("Budget: -$1,200.50 after refunds", "-$1,200.50"),
    ("Tel. 030 12345678", "030 12345678"),
    ("IBAN DE89 3704 0044 0532 0130 00", "DE89 3704 0044 0532 0130 00"),
    ("pay to GB82 WEST 1234 5698 7654 32.", "GB82 WEST 1234 5698 7654 32"),
])
def test_whole_values_of_other_locales(text: str, fact: str) -> None:
    assert extract_facts(text) == (fact,)


def test_an_iban_is_a_code() -> None:
    assert fact_kind("DE89 3704 0044 0532 0130 00") == "code"


@pytest.mark.parametrize(("text", "facts"), [
    # A range between two prices: the hyphen is no minus.
    ("Prices range $10-$20 per item", ("$10", "$20")),
    ("Between 2019-$500 fees", ("2019", "$500")),
    # Dot groups without a currency stay a plain number; one dot group is a decimal.
    ("It grew by 1.000.000 users", ("1.000.000",)),
    ("Total € 1.500 incl.", ("€ 1.500",)),
    # Groups that fail the IBAN check are read as before, one by one.
    ("DE88 3704 0044 0532 0130 00", ("DE88", "3704", "0044", "0532", "0130")),
    ("temperatures -5 to 10", ()),
    ("we paid RP 500", ("500",)),
])
def test_ordinary_sentences_keep_their_facts(text: str, facts: tuple[str, ...]) -> None:
    assert extract_facts(text) == facts
