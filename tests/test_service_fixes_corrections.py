"""Corrections read from a long pasted message: the result, and how much of the message is read."""

from __future__ import annotations

import random

import pytest

from contextwright.compress.facts import extract_facts
from contextwright.errors import BudgetError
from contextwright.manager import ContextManager
from contextwright.modes.corrections import READ_CHARS, supersede_facts
from contextwright.modes.zones import MAX_FACTS, Zones


def _log(lines: int) -> str:
    """A pasted service log: several distinct values (times, order ids, hosts) on every line."""
    rng = random.Random(7)
    return "\n".join(
        f"2026-12-07T10:{i % 60:02d}:00 order ORD-{rng.randint(10000, 99999)} status=shipped "
        f"host=web-{i % 7} latency={rng.randint(1, 900)}ms" for i in range(lines))


def test_a_correction_before_a_600_kb_log_replaces_the_listed_value_and_nothing_else() -> None:
    zones = Zones(facts=("ORD-11111", "alice@example.com"))
    text = "Actually the order is ORD-22222, not ORD-11111. Here is the log:\n" + _log(8000)
    assert len(text) > 600_000
    result = supersede_facts(zones, text, correction=True, listing=True)
    assert result.superseded == (("ORD-11111", "ORD-22222"),)
    assert result.facts == zones.facts


def test_a_600_kb_log_without_a_correction_leaves_the_zones_as_they_are() -> None:
    zones = Zones(facts=("ORD-11111", "2026-12-06"))
    text = "Here is the log:\n" + _log(8000)
    assert supersede_facts(zones, text, correction=False, listing=True) is zones


def test_values_after_the_first_max_facts_of_a_message_are_not_read_as_corrections() -> None:
    log = _log(MAX_FACTS)
    assert len(extract_facts(log)) > MAX_FACTS
    zones = Zones(facts=("ORD-11111",))
    text = log + "\nso the order is ORD-22222, not ORD-11111"
    assert supersede_facts(zones, text, correction=False, listing=True) is zones
    # The same sentence at the start of the message is read.
    text = "the order is ORD-22222, not ORD-11111\n" + log
    assert supersede_facts(zones, text, correction=False, listing=True).superseded == (
        ("ORD-11111", "ORD-22222"),)


def test_only_a_few_characters_between_two_values_link_an_old_value_to_its_new_one() -> None:
    zones = Zones(facts=("2026-05-07", "2026-05-09"))
    near = "Actually change 2026-05-07 to 2026-05-08"
    assert supersede_facts(zones, near, correction=True, listing=True).superseded == (
        ("2026-05-07", "2026-05-08"),)
    far = "Actually change 2026-05-07" + " " * 60 + "to 2026-05-08"
    assert ("2026-05-07", "2026-05-08") not in supersede_facts(
        zones, far, correction=True, listing=True).superseded


def test_prepare_stores_a_600_kb_pasted_log() -> None:
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "My order is ORD-11111.", target="chat")
    text = "Actually it is ORD-22222, not ORD-11111. The log:\n" + _log(8000)
    with pytest.raises(BudgetError) as refused:  # the log does not fit the default window
        manager.prepare("u", "s", text, target="chat")
    assert refused.value.stored_seq == 2


def test_a_correction_after_the_first_read_chars_of_a_message_is_not_read() -> None:
    zones = Zones(facts=("ORD-11111",))
    prose = "All of this went fine and nothing else changed there. " * (READ_CHARS // 50)
    late = prose + "The order is ORD-22222, not ORD-11111."
    assert supersede_facts(zones, late, correction=False, listing=True) is zones
    early = "The order is ORD-22222, not ORD-11111. " + prose
    assert supersede_facts(zones, early, correction=False, listing=True).superseded == (
        ("ORD-11111", "ORD-22222"),)
