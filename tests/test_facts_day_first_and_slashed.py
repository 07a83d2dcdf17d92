"""Dates written day first with a month name in French, German, Spanish, Italian, Portuguese,
Dutch or Russian, ids joined by slashes and grouped numbers with check digits (a CPF) are whole
facts: only their year, their numbers or the number without its check digits had been, so a
summary that moved the day, changed the invoice's prefix or the check digits passed."""

from __future__ import annotations

import pytest

from contextwright.compress.facts import extract_facts, fact_kind, missing_facts
from contextwright.compress.summarize import Summary, verified
from contextwright.core.items import Message
from contextwright.errors import SummaryError


@pytest.mark.parametrize(("text", "fact"), [
    ("Livraison prévue le 3 mars 2024.", "3 mars 2024"),
    ("Termin am 3. März 2024 um 10 Uhr.", "3. März 2024"),
    ("La cita es el 15 de marzo de 2024.", "15 de marzo de 2024"),
    ("Consegna il 12 giugno 2024.", "12 giugno 2024"),
    ("Entrega em 15 de março de 2024.", "15 de março de 2024"),
    ("Levering op 3 mei 2024.", "3 mei 2024"),
    ("Доставка 3 марта 2024 г.", "3 марта 2024 г."),
    ("Rendez-vous le 1er avril.", "1er avril"),
])
def test_a_day_first_date_is_one_fact(text: str, fact: str) -> None:
    assert extract_facts(text) == (fact,)
    assert fact_kind(fact) == "date"


@pytest.mark.parametrize(("text", "fact"), [
    ("Invoice INV/2024/00123 is due.", "INV/2024/00123"),
    ("Faktura FV/2024/03/0012 zapłacona.", "FV/2024/03/0012"),
    ("Bill GST/23-24/0042 was paid.", "GST/23-24/0042"),
    ("See PO/12345.", "PO/12345"),
])
def test_a_slash_joined_id_is_one_fact(text: str, fact: str) -> None:
    assert extract_facts(text) == (fact,)


@pytest.mark.parametrize("text", ["TCP/IP over km/h", "see api/v2/users", "and/or",
                                  "10 maisons", "12 mayonnaises"])
def test_words_that_only_look_alike_are_no_facts(text: str) -> None:
    assert extract_facts(text) == ()


def test_a_path_keeps_its_numbers_and_is_no_id() -> None:
    assert extract_facts("/srv/backups/2024/001") == ("2024", "001")


@pytest.mark.parametrize(("said", "summarised"), [
    ("La livraison est prévue le 3 mars 2024.", "Livraison le 4 mars 2024"),
    ("Please check invoice INV/2024/00123.", "Check invoice INV/2023/00123 for 2024"),
])
def test_a_summary_that_alters_the_value_is_refused(said: str, summarised: str) -> None:
    assert missing_facts(summarised, extract_facts(said))

    class Altering:
        def summarize(self, previous: Summary | None, messages: object, **_: object
                      ) -> Summary:
            return Summary(need=summarised)

    with pytest.raises(SummaryError, match="lost"):
        verified(Altering(), None, [Message(role="user", content=said)], language="auto")


@pytest.mark.parametrize(("text", "fact"), [
    ("CPF 123.456.789-09 confirmado.", "123.456.789-09"),
    ("CNPJ 12.345.678/0001-90.", "12.345.678/0001-90"),
    ("Ref: 2024/03/15-001", "2024/03/15-001"),
])
def test_a_grouped_number_keeps_its_check_digits(text: str, fact: str) -> None:
    assert extract_facts(text) == (fact,)
    assert missing_facts("CPF 123.456.789-10", ["123.456.789-09"])


@pytest.mark.parametrize("text", ["pages 1.5-2", "score 3/4-5"])
def test_a_short_grouped_number_is_still_no_fact(text: str) -> None:
    assert extract_facts(text) == ()
