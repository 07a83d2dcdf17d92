"""Corrections of listed facts: which value of the facts zone a user message replaces.

The facts zone is write once, so a corrected value stays listed; it is marked as replaced by the
new one (``Zones.superseded``) so that no build shows it as a value to act on. Pure functions over
``Zones``; the session layer decides when a message is a correction.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import replace

from contextwright.compress.facts import extract_facts, fact_key
from contextwright.modes.zones import MAX_FACTS, Zones


def supersede_facts(zones: Zones, text: str, *, correction: bool, listing: bool) -> Zones:
    """Mark the listed facts a user message replaces; call it before the message's facts are added.

    A value the message negates ("20241010, not 20241001", "不是5月7日") is replaced by the new
    value of the same kind it names. A correction (``correction``: "Actually …", "日期改成…")
    also replaces a listed value it changes into a new one ("把 X 改成 Y", "change X to Y"), or
    else the one listed value of the new value's kind, when there is exactly one: with two
    listed dates, "actually the 7th" does not say which it replaces, and marking the wrong one
    would hide a value that still holds. A value named again after it was replaced stands again.

    ``listing``: the message's facts are added next (structured mode); a value it negates is
    then recorded as replaced even when it is not listed yet, so it is never listed as current.
    """
    said = extract_facts(text)
    if not said:
        return zones
    current = [fact for fact in zones.facts if zones.replacement(fact) is None]
    current_keys = {fact_key(fact) for fact in current}
    negated = [fact for fact in said if _negated(text, fact)]
    new = [fact for fact in said if fact not in negated and fact_key(fact) not in current_keys]
    pairs: list[tuple[str, str]] = []
    for value in new:
        taken = {old for old, _ in pairs}
        old = _replaced_by(value, text, [f for f in negated if f not in taken],
                           [f for f in current if f not in taken] if correction else [], said)
        if old is not None and fact_key(old) != fact_key(value):
            pairs.append((old, value))
    listed = {fact_key(fact) for fact in zones.facts}
    pairs = [pair for pair in pairs if listing or fact_key(pair[0]) in listed]
    if not pairs:
        return zones
    stands = {fact_key(value) for _, value in pairs}
    kept = [pair for pair in zones.superseded if fact_key(pair[0]) not in stands]
    superseded = tuple(dict.fromkeys((*kept, *pairs)))[-MAX_FACTS:]
    return zones if superseded == zones.superseded else replace(zones, superseded=superseded)


def _replaced_by(value: str, text: str, negated: Sequence[str], current: Sequence[str],
                 said: Sequence[str]) -> str | None:
    """The value ``value`` replaces: a negated one of its kind, else a listed one (see above)."""
    same = [fact for fact in negated if _same_kind(fact, value)]
    if same:
        return same[0]
    kind = [fact for fact in current if _same_kind(fact, value)]
    changed = [fact for fact in kind if _changed_into(text, fact, value)]
    if changed:
        return changed[0]
    said_keys = {fact_key(fact) for fact in said}
    unnamed = [fact for fact in kind if fact_key(fact) not in said_keys]
    return unnamed[0] if len(unnamed) == 1 else None


# A value right after "not" / "instead of" / "不是" (a word or two between: "not order #1") is
# the one the user says is wrong.
_NEGATION_BEFORE = re.compile(
    r"(?:\b(?:not|instead of|rather than|no longer)(?:\s+[A-Za-z]+){0,2}|不是|而非|并非|而不是)"
    r"\W{0,3}$", re.IGNORECASE)
# "X 改成 Y", "change X to Y", "X -> Y": the words between an old and a new value.
_CHANGED_INTO = re.compile(
    r"^\W*(?:改成|改为|换成|换到|变成|更正为|应该是|应为|->|=>|→|to|into|should be|is now|now)\W*$",
    re.IGNORECASE)


def _negated(text: str, fact: str) -> bool:
    at = text.find(fact)
    return at > 0 and _NEGATION_BEFORE.search(text[max(0, at - 40):at]) is not None


def _changed_into(text: str, old: str, new: str) -> bool:
    start, end = text.find(old), text.find(new)
    return 0 <= start and start + len(old) <= end and _CHANGED_INTO.match(
        text[start + len(old):end]) is not None


def _same_kind(one: str, other: str) -> bool:
    """Whether two facts are values of one kind: the same shape of digits, letters and marks.

    "20241001" and "20241010", "5月7日" and "5月17日", "7:30pm" and "8:30pm" are; "20241001"
    and "4242" (an order and a card) are not: a bare number must keep its length.
    """
    exact_one, exact_other = _shape(one), _shape(other)
    if exact_one == exact_other:
        return True
    coarse = _runs(exact_one)
    return coarse == _runs(exact_other) and coarse != "9"


def _shape(fact: str) -> str:
    folded = unicodedata.normalize("NFKC", fact).lower()
    return "".join("9" if char.isdigit() else "a" if char.isascii() and char.isalpha()
                   else char for char in folded)


def _runs(shape: str) -> str:
    return re.sub(r"9+", "9", re.sub(r"a+", "a", shape))
