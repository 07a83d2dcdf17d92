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

READ_CHARS = 50_000
"""The characters of a message read for corrections (a correction is said in a sentence)."""


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

    A correction is a sentence, not a paste: only the message's first ``READ_CHARS`` characters
    and, of them, its first ``MAX_FACTS`` values (as many as the facts zone holds) are read, so a
    pasted log or table costs no more than a message of that size.
    """
    text = _head(text)
    said = extract_facts(text)[:MAX_FACTS]
    if not said:
        return zones
    current = [fact for fact in zones.facts if zones.replacement(fact) is None]
    scan = _Scan(text, said)
    negated = [fact for fact in said if scan.negated(fact)]
    if not negated and not (correction and current):
        return zones  # nothing a value of the message could replace
    current_keys = {fact_key(fact) for fact in current}
    negated_set = set(negated)
    new = [fact for fact in said if fact not in negated_set and fact_key(fact) not in current_keys]
    pairs = _pairs(new, scan, negated, current if correction else [])
    listed = {fact_key(fact) for fact in zones.facts}
    pairs = [pair for pair in pairs if listing or fact_key(pair[0]) in listed]
    if not pairs:
        return zones
    stands = {fact_key(value) for _, value in pairs}
    kept = [pair for pair in zones.superseded if fact_key(pair[0]) not in stands]
    superseded = tuple(dict.fromkeys((*kept, *pairs)))[-MAX_FACTS:]
    return zones if superseded == zones.superseded else replace(zones, superseded=superseded)


def _head(text: str) -> str:
    """The first ``READ_CHARS`` characters of ``text``, ending at a space so no value is cut."""
    if len(text) <= READ_CHARS:
        return text
    head = text[:READ_CHARS]
    space = max(head.rfind(" "), head.rfind("\n"))
    return head[:space] if space > READ_CHARS // 2 else head


def _pairs(new: Sequence[str], scan: _Scan, negated: Sequence[str],
           current: Sequence[str]) -> list[tuple[str, str]]:
    """(old, new) for each new value that replaces one, in order; a value is replaced once."""
    pairs: list[tuple[str, str]] = []
    taken: set[str] = set()
    for value in new:
        old = _replaced_by(value, scan, [f for f in negated if f not in taken],
                           [f for f in current if f not in taken])
        if old is not None and fact_key(old) != fact_key(value):
            pairs.append((old, value))
            taken.add(old)
    return pairs


class _Scan:
    """The message and its values, with where each value first occurs found once.

    Every check looks at a value's first occurrence; finding it again for each pair of values
    would cost a pass over the message per pair.
    """

    def __init__(self, text: str, said: Sequence[str]) -> None:
        self.text = text
        self.said_keys = {fact_key(fact) for fact in said}
        self._at: dict[str, int] = {}

    def at(self, fact: str) -> int:
        """Where ``fact`` first occurs in the message, -1 when it does not."""
        found = self._at.get(fact)
        if found is None:
            found = self._at[fact] = self.text.find(fact)
        return found

    def negated(self, fact: str) -> bool:
        at = self.at(fact)
        return at > 0 and _NEGATION_BEFORE.search(self.text[max(0, at - 40):at]) is not None

    def changed_into(self, old: str, new: str) -> bool:
        """Whether the message says "old → new": only linking words between the two."""
        start, end = self.at(old), self.at(new)
        gap_start = start + len(old)
        return (0 <= start and gap_start <= end and end - gap_start <= _MAX_LINK_CHARS
                and _CHANGED_INTO.match(self.text[gap_start:end]) is not None)


def _replaced_by(value: str, scan: _Scan, negated: Sequence[str],
                 current: Sequence[str]) -> str | None:
    """The value ``value`` replaces: a negated one of its kind, else a listed one (see above)."""
    same = [fact for fact in negated if _same_kind(fact, value)]
    if same:
        return same[0]
    kind = [fact for fact in current if _same_kind(fact, value)]
    changed = [fact for fact in kind if scan.changed_into(fact, value)]
    if changed:
        return changed[0]
    unnamed = [fact for fact in kind if fact_key(fact) not in scan.said_keys]
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
# The longest text read as linking an old value to its new one: the words above with a little
# punctuation around them, never a paragraph.
_MAX_LINK_CHARS = 40


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
