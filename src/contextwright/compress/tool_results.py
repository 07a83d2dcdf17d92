"""Tiered retention of tool results: full, key facts, one line.

The newest tool results stay whole; older ones are *reduced* to one short line of key facts, and
the oldest to a shorter line of identifiers, or to a placeholder. Reduction never paraphrases and
never changes a value: each value it keeps is shown whole, as ``compress.facts.extract_facts``
reads it (``12 500 ₽``, ``€1.200,50``, ``¥1.2萬元``, ``+44 20 7946 0958``, a URL, an address), or
as the tool wrote it (a short string, a number, ``true``/``false``, an id under an id key such as
``order_id`` or ``orderId``). The records of a list stay together, one row each, as the compact
table shows them; a string is quoted where it holds the separators around it; a long run such as
base64 or a hash is shown as its kind and length, not cut into pieces. A long text result keeps
its head, its facts and its last non-empty line (where an exception or a summary is). A reduced
form whose values would take more room than the full form is one line instead.

A reduced result still answers its call: only its text changes, never its pairing. A failed
result's reduced forms open with its ``(tool error)`` mark, as the result did, so they still say
(and a provider's flag still says) that the call failed.

Pure functions over the result text; nothing here knows about items or budgets.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from contextwright.compress.facts import extract_facts as whole_value_facts
from contextwright.compress.facts import fact_kind
from contextwright.compress.json_compact import (
    MAX_COMPACT_CHARS,
    JsonNumber,
    compact_tool_result,
    parse_json_verbatim,
    quoted_key,
    quoted_value,
    select_fields,
    without_lone_surrogates,
)
from contextwright.core.caches import call_bytes, memoized, register_cache
from contextwright.core.items import TOOL_ERROR_MARK
from contextwright.errors import PlanError
from contextwright.tokens._base import whole_clusters

Tier = Literal["full", "reduced", "line", "drop"]

# A fact is what one left-to-right scan finds when it tries these alternatives in order at each
# position, the first that matches winning: dates (with an optional time and UTC offset; Chinese
# dates, 2024年5月5日, whole) and times of day, e-mail addresses, dotted numbers (IP addresses,
# versions), decimals, amounts with thousands separators, any token with a digit (ids, codes,
# amounts), and upper-case codes (airport, currency, booking codes). The offset may not run on
# into a digit, colon or dash, so a range "…T10:00-2024-05-02" keeps its second date.
#
# Several alternatives read a whole run of word characters before they fail (the e-mail one looks
# for an "@", the token one for a digit), and ``finditer`` reads that run again from each of its
# positions: tool output with a 50,000-character word took minutes. A text with a run that long
# is scanned by finders instead, one per alternative, each reading a run once; the scan takes the
# leftmost start any finder reports (the earlier alternative on a tie), as the alternation would.
# The alternation itself stays for texts without such a run, where it is faster and its cost is
# bounded by the run length.
_DATE_TIME = (
    r"\d{4}年\d{1,2}月(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]"
    r"|\d{4}-\d{2}-\d{2}"
    r"(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}(?::?\d{2})?(?![\d:-]))?)?"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?(?:[+-]\d+)?"
)
_CODE = r"\b[A-Z][A-Z0-9]{1,}(?:[_-][A-Z0-9]+)*\b"
_FACT = re.compile(
    rf"{_DATE_TIME}|[A-Za-z0-9][\w.+-]*@[\w-]+(?:\.[\w-]+)+|\d+(?:\.\d+){{2,}}|-?\d[\d,]*\.\d+"
    rf"|-?\d{{1,3}}(?:,\d{{3}})+(?![\w,])|[A-Za-z0-9_+-]*\d[A-Za-z0-9_+-]*|{_CODE}"
)
_LONG_RUN = re.compile(r"(?<![\w.,+@-])[\w.,+@-]{64}")
"""A run the alternation would read again from each of its positions. One attempt of it reads
at most three runs and a few characters between them, so without such a run it is linear."""
# The finders' forms of the other alternatives are possessive (``*+``): where the alternation
# gives characters back, that can never let them match.
_DOTTED = r"\d++(?:\.\d++){2,}"
_DECIMAL = r"-?\d[\d,]*+\.\d+"
_THOUSANDS = r"-?\d{1,3}+(?:,\d{3})++(?![\w,])"
_WITH_DIGIT = r"(?=[A-Za-z_+-]*+\d)"
"""A token of ``[A-Za-z0-9_+-]`` starts here that holds a digit, or is followed by one."""
_EMAIL_LOCAL = re.compile(r"(?<![\w.+-])[\w.+-]*+(?=@[\w-]++\.[\w-])")
"""A whole run that can hold an address's local part, followed by "@" and a dotted domain."""
_EMAIL_DOMAIN = re.compile(r"@[\w-]++(?:\.[\w-]++)++")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_NOWHERE = sys.maxsize
"""The start a finder reports when its alternative matches nowhere further on."""
_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?(?:[+-]\d+)?")
_ID_WORDS = "id|ids|number|no|code|date|time|ref|key|sku|pnr|uuid|locator"
_ID_KEY = re.compile(
    rf"(?:^|[_\-. ])(?i:{_ID_WORDS})$"  # order_id, ID, booking-ref
    rf"|(?<=[a-z0-9])(?:{_ID_WORDS.title()}|{_ID_WORDS.upper()})$")  # orderId, bookingRef, userID
"""A key whose value is an identifier as a whole (``ord_abcdef``), facts or not. The camelCase
form needs its capital, so ``paid`` or ``valid`` is no id key."""
_VERDICT_KEYS = frozenset(("status", "state", "error", "errors", "result", "message", "reason"))
_VERDICT_MAX_CHARS = 60
_SHORT_TEXT = 160
"""A text result this short is already one line: reducing it would only lose words."""


def extract_facts(text: str) -> tuple[str, ...]:
    """Exact id-, number-, date- and code-like values of ``text``, de-duplicated, in order.

    Takes time linear in the length of ``text``, however its characters are arranged.
    """
    return tuple(dict.fromkeys(text[start:end] for start, end in _token_spans(text)))


def _token_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each value ``extract_facts`` finds, left to right."""
    if _LONG_RUN.search(text) is None:
        spans: Iterable[tuple[int, int]] = (m.span() for m in _FACT.finditer(text))
    else:
        spans = _fact_spans(text)
    return _whole_values(text, spans)


def shown_facts(text: str) -> tuple[str, ...]:
    """The values of ``text`` the reduced tiers list: each whole, in order, each once.

    ``compress.facts.extract_facts`` reads whole values in every locale it knows (``12 500 ₽``,
    ``+44 20 7946 0958``, ``350 5th Ave, New York, NY 10118``, URLs). Where it finds nothing, the
    tokens ``extract_facts`` finds are added (codes such as ``JFK``, ``12A``, ``15%``, small
    counts), but never a token inside a whole value, which would be a piece of it.
    """
    whole = whole_value_facts(text)
    tokens = list(_token_spans(text))
    if not whole:
        return tuple(dict.fromkeys(text[start:end] for start, end in tokens))
    # The tokens each whole value is made of, and where in the value each stands: a token of
    # the text that is such a piece, with its value around it, is no value of its own. (Looking
    # the values up in the text instead would read the text once per value.)
    pieces: dict[str, set[tuple[int, int]]] = {}
    for fact in whole:
        for start, end in _token_spans(fact):
            pieces.setdefault(fact[start:end], set()).add((start, len(fact)))
    values = set(whole)
    found: list[tuple[int, str]] = []
    position = 0
    for fact in whole:  # in order of first appearance, so the search only moves forward
        position = max(text.find(fact, position), position)
        found.append((position, fact))
    found += [(start, text[start:end]) for start, end in tokens
              if not _inside_a_value(text, start, pieces.get(text[start:end], ()), values)]
    found.sort(key=lambda pair: pair[0])
    return tuple(dict.fromkeys(fact for _, fact in found))


def _inside_a_value(text: str, start: int, places: Iterable[tuple[int, int]],
                    values: set[str]) -> bool:
    """Whether the token at ``start`` is a piece of one of ``values`` the text holds there.

    ``places``: (the token's offset, the value's length) in each value it is a piece of.
    """
    return any(offset <= start and text[start - offset:start - offset + length] in values
               for offset, length in places)


# What the scan leaves next to a number but is part of its value: a currency sign, a percent
# sign, a Chinese order of magnitude or unit ("¥1.2万" is 12,000 yuan, not 1.2), a Chinese time
# with its part of the day ("下午3:30" is 15:30, "晚上8点" is 20:00). Each is read with a pattern
# of bounded length at a fact's edge, so widening stays linear in the text.
_CURRENCY_SIGNS = "$¥￥€£"
_DAYPARTS = ("上午", "下午", "晚上", "早上", "中午", "凌晨", "傍晚")
_UNIT_AFTER = re.compile(r"(?:[百千]?万|亿|千)(?:元|块钱|块)?|元|块钱|块|%")
_CLOCK_AFTER = re.compile(r":\d{2}(?::\d{2})?(?!\d)|点(?:\d{1,2}分|半)?")
_HOUR = re.compile(r"\d{1,2}")
_ZH_CLOCK = re.compile(r"\d{1,2}(?::\d{2}|点)")


def _whole_values(text: str, spans: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """``spans`` widened to the whole values they belong to, merged where they then meet.

    A Chinese date runs on into its time ("5月6日下午3:30" is one value, not "5月6日", "3", "30").
    """
    merged: tuple[int, int] | None = None
    for start, end in spans:
        start, end = _widened(text, start, end)
        if merged is not None and (start < merged[1] or (
                start == merged[1] and text[merged[1] - 1] in "日号")):
            merged = (merged[0], max(end, merged[1]))
            continue
        if merged is not None:
            yield merged
        merged = (start, end)
    if merged is not None:
        yield merged


def _widened(text: str, start: int, end: int) -> tuple[int, int]:
    """One fact's span with the sign, unit or part of the day next to it taken in."""
    if not text[end - 1].isdigit():
        return start, end
    if _HOUR.fullmatch(text, start, end) and (clock := _CLOCK_AFTER.match(text, end)):
        end = clock.end()
    elif unit := _UNIT_AFTER.match(text, end):
        end = unit.end()
    if start > 0 and text[start - 1] in _CURRENCY_SIGNS:
        start -= 1
    elif _ZH_CLOCK.match(text, start, end) and text[max(start - 2, 0):start] in _DAYPARTS:
        start -= 2
    return start, end


def _fact_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each fact, left to right, as one alternation's ``finditer`` gives them."""
    finders: tuple[_Finder, ...] = (_DATE_TIME_FINDER, _Emails(), _DOTTED_FINDER,
                                    _DECIMAL_FINDER, _THOUSANDS_FINDER, _WITH_DIGIT_FINDER,
                                    _CODE_FINDER)
    starts = [finder.next_start(text, 0) for finder in finders]
    while (start := min(starts)) != _NOWHERE:
        best = starts.index(start)  # on a tie the earlier alternative wins, as in an alternation
        end = finders[best].end(text, start)
        yield start, end
        for k, finder in enumerate(finders):
            if starts[k] < end:  # the scan went past it: this finder looks again from the end
                starts[k] = finder.next_start(text, end)


class _Finder(Protocol):
    """Where one alternative of the fact pattern matches next, and where that match ends."""

    def next_start(self, text: str, pos: int) -> int:
        """The leftmost position from ``pos`` on where the alternative matches, or _NOWHERE."""

    def end(self, text: str, start: int) -> int:
        """Where the alternative's match at ``start`` (a position next_start reported) ends."""


@dataclass(frozen=True, slots=True)
class _Alternative:
    """An alternative found without reading a run again from each of its characters.

    ``here`` asks whether it matches at the position itself, first skipping characters that
    cannot begin it (its match ends where the fact begins). ``later`` searches from the next
    position on, but is not tried where an earlier position already decided the answer: an
    alternative that fails from a run's first character fails from the rest of the run too,
    so the rest is not read again.
    """

    whole: re.Pattern[str]
    here: re.Pattern[str]
    later: re.Pattern[str]

    def next_start(self, text: str, pos: int) -> int:
        found = self.here.match(text, pos) or self.later.search(text, pos + 1)
        return found.end() if found else _NOWHERE

    def end(self, text: str, start: int) -> int:
        found = self.whole.match(text, start)
        assert found is not None  # next_start found it here
        return found.end()


def _alternative(whole: str, here: str, later: str) -> _Alternative:
    return _Alternative(re.compile(whole), re.compile(here), re.compile(later))


def _short_failing(whole: str) -> _Alternative:
    """An alternative that fails within a few characters, or within one word: searched as is."""
    ahead = f"(?={whole})"
    return _alternative(whole, ahead, ahead)


class _Emails:
    """The e-mail alternative. The run before each "@" is read once, as the scan reaches it.

    An address may begin at any letter or digit of that run, so after the scan consumed part
    of the run (a date in it, say), the next start is the next letter or digit.
    """

    __slots__ = ("_at", "_end", "_local", "_search_from")

    def __init__(self) -> None:
        self._search_from = 0
        self._local = self._at = self._end = -1

    def next_start(self, text: str, pos: int) -> int:
        while True:
            if pos < self._at:
                first = _ALNUM.search(text, max(pos, self._local), self._at)
                if first:
                    return first.start()
            found = _EMAIL_LOCAL.search(text, self._search_from)
            if found is None:
                return _NOWHERE
            self._local, self._at = found.span()
            self._search_from = self._at + 1
            domain = _EMAIL_DOMAIN.match(text, self._at)
            assert domain is not None  # _EMAIL_LOCAL looked ahead for it
            self._end = domain.end()

    def end(self, text: str, start: int) -> int:
        return self._end


_DATE_TIME_FINDER = _short_failing(_DATE_TIME)
_DOTTED_FINDER = _alternative(_DOTTED, f"(?={_DOTTED})", rf"(?<!\d)(?={_DOTTED})")
# ``here`` skips leading commas; ``later`` tries a minus sign wherever one is, and a run of
# digits and commas only where it begins.
_DECIMAL_FINDER = _alternative(_DECIMAL, rf",*+(?={_DECIMAL})",
                               rf"(?=-\d)(?={_DECIMAL})|(?<![\d,]),*+(?={_DECIMAL})")
# ``later`` skips a digit with a digit before it and at most two after it, and a group of exactly
# three digits after "d,": an amount that matches there also matches one or two characters
# earlier, where the search has already looked. The character before ``pos`` is behind the
# search, so ``here`` tries the digit after a leading comma itself.
_THOUSANDS_FINDER = _alternative(
    _THOUSANDS, rf",?(?={_THOUSANDS})",
    rf"(?!(?<=\d)\d{{1,2}}(?!\d)|(?<=\d,)\d{{3}}(?!\d))(?={_THOUSANDS})")
_WITH_DIGIT_FINDER = _alternative(r"[A-Za-z0-9_+-]*+(?:\d[A-Za-z0-9_+-]*+)?", _WITH_DIGIT,
                                  rf"(?<![A-Za-z0-9_+-]){_WITH_DIGIT}")
_CODE_FINDER = _short_failing(_CODE)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolTiers:
    """Where the retention tiers of history's tool results begin (plan options of ``history``)."""

    full: int
    """``tool_full``: the newest this many call blocks keep their results whole."""
    reduced: int
    """``tool_reduced``: the next this many are reduced to a line of key facts."""
    early: Literal["line", "drop"] = "line"
    """``tool_early``: older results become one line of identifiers, or a placeholder."""
    line_chars: int = 240
    """``tool_line_chars``: the longest an early one-line result may be."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ToolTiers | None:
        """Tiers from source options, or None when ``tool_full`` is not set (tiers off)."""
        full = options.get("tool_full")
        if full is None:
            return None
        early = options.get("tool_early", "line")
        if early not in ("line", "drop"):
            raise PlanError("history option tool_early must be 'line' or 'drop'")
        return cls(full=_count(options, "tool_full", 0),
                   reduced=_count(options, "tool_reduced", 3), early=early,
                   line_chars=_count(options, "tool_line_chars", 240))

    def tier(self, rank: int, consumed: bool) -> Tier:
        """Tier of the results of the call block ``rank`` blocks back (0 = newest).

        A result the model marked consumed is reduced even where it would stay whole.
        """
        if rank < self.full:
            return "reduced" if consumed else "full"
        if rank < self.full + self.reduced:
            return "reduced"
        return self.early


def _count(options: Mapping[str, Any], name: str, default: int) -> int:
    """The whole, non-negative number option ``name`` (the message never echoes the value)."""
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PlanError(f"history option {name} must be a non-negative whole number")
    if value != int(value):
        raise PlanError(f"history option {name} must be a whole number")
    return int(value)


_WORDING: dict[str, dict[str, str]] = {
    "en": {"reduced": "Tool result ({name}), key facts",
           "reduced_unnamed": "Tool result, key facts",
           "line": "Earlier tool result ({name})", "line_unnamed": "Earlier tool result",
           "none": "(none)", "no_ids": "(no identifiers)", "more": " (+{more} more)",
           "dropped": "[earlier result of {name} omitted]", "a_tool": "a tool",
           "blob": "<{length} chars of {kind}>"},
    "zh": {"reduced": "工具结果（{name}），关键事实", "reduced_unnamed": "工具结果，关键事实",
           "line": "较早的工具结果（{name}）", "line_unnamed": "较早的工具结果",
           "none": "（无）", "no_ids": "（无标识）", "more": "（另有 {more} 项）",
           "dropped": "[已省略{name}的较早结果]", "a_tool": "某工具",
           "blob": "<{length} 个字符的 {kind}>"},
}
"""What a reduced result says around its values, by the build's labels' language
(``core.fence.LABELS``); the values themselves are never translated."""


def _wording(language: str) -> dict[str, str]:
    """The wording of ``language``; one the labels do not know is an error."""
    wording = _WORDING.get(language)
    if wording is None:
        raise ValueError(f"unknown labels language {language!r}: expected one of "
                         f"{', '.join(_WORDING)}")
    return wording


def reduce_tool_result(tool_name: str | None, content: str,
                       fields: Sequence[str] | None = None, *, language: str = "en") -> str:
    """One line of key facts of a result: ``key: value, value; key: value`` for JSON.

    ``language``: that of the build's labels (``en``, ``zh``); the line's own words follow it.
    """
    _wording(language)
    return _reduce_cached(tool_name, content, None if fields is None else tuple(fields),
                          language)


@memoized("compress.tool_results.reduce", max_entries=16_384, share=0.03, size=call_bytes)
def _reduce_cached(tool_name: str | None, content: str, fields: tuple[str, ...] | None,
                   language: str) -> str:
    mark, content = _failure_mark(content)
    reduced = _reduce(tool_name, content, fields, _wording(language))
    return mark + without_lone_surrogates(reduced, content)


def _reduce(tool_name: str | None, content: str, fields: tuple[str, ...] | None,
            wording: Mapping[str, str]) -> str:
    prefix = (wording["reduced"].format(name=tool_name) if tool_name
              else wording["reduced_unnamed"])
    value = _parse_json(content)
    if value is None:
        body = _reduced_text(content, wording)
        full = content
    else:
        if fields is not None:
            value = select_fields(value, fields)
        body = "; ".join(_fields(value, "", wording))
        full = (compact_tool_result(tool_name, content, fields) or content).split(": ", 1)[-1]
    if not body:
        return f"{prefix}: {wording['none']}"
    if len(body) > len(full):  # no saving: every value, as the full tier shows them
        return f"{prefix}: {full}"
    return f"{prefix}: {body}"


def _fields(value: Any, key: str, wording: Mapping[str, str]) -> Iterator[str]:
    """``key: value`` of each kept value.

    Nested keys are dotted (``prices.economy``), a list of records is shown as rows
    (``items [sku, qty]: (SKU-1, 2); (SKU-2, 1)``).
    """
    if isinstance(value, Mapping) and _keyed_records(value):
        yield _by_key(value, key, wording)
    elif isinstance(value, Mapping):
        parent = key.rsplit(".", 1)[-1]
        for child_key, child in value.items():
            name = quoted_key(str(child_key))
            yield from _fields(child, f"{parent}.{name}" if parent else name, wording)
    elif isinstance(value, list):
        shown = _list(value, key, wording)
        if shown:
            yield shown
    else:
        scalar = _shown_scalar(key, value, wording, cell=False)
        if scalar is not None:
            yield f"{key}: {scalar}" if key else scalar


def _list(values: list[Any], key: str, wording: Mapping[str, str]) -> str | None:
    """A list's kept items: scalars as ``key: a, b``, records as rows.

    Rows are a table when every row keeps the same fields. A row is never merged with another:
    its values stay together.
    """
    name = key or "rows"
    if not all(isinstance(child, Mapping) for child in values):
        items = [item for item in (_inline(child, key, wording) for child in values)
                 if item is not None]
        separator = ", " if all(not isinstance(c, Mapping | list) for c in values) else "; "
        return f"{name}: {separator.join(items)}" if items else None
    rows = [cells for cells in (_cells(child, wording) for child in values) if cells]
    if not rows:
        return None
    columns = [column for column, _ in rows[0]]
    if len(rows) > 1 and all([column for column, _ in row] == columns for row in rows):
        body = "; ".join("(" + ", ".join(text for _, text in row) + ")" for row in rows)
        return f"{name} [{', '.join(columns)}]: {body}"
    return f"{name}: " + "; ".join(_record(row) for row in rows)


def _keyed_records(value: Mapping[str, Any]) -> bool:
    """Whether ``value`` holds records under their ids (``{"card_8817203": {...}, ...}``)."""
    return bool(value) and all(_has_digit(str(key)) and isinstance(child, Mapping)
                               for key, child in value.items())


def _by_key(value: Mapping[str, Any], key: str, wording: Mapping[str, str]) -> str:
    """Records under their ids as ``key: id (field: value, …); id (…)``.

    A field that only repeats its record's id (``"id": "card_8817203"``) is not shown again.
    """
    rows = []
    for record_key, record in value.items():
        name = quoted_value(str(record_key), cell=True)
        cells = [(field, text) for field, text in _cells(record, wording)
                 if text != name]
        rows.append(f"{name} {_record(cells)}" if cells else name)
    return f"{key or 'rows'}: {'; '.join(rows)}"


def _cells(value: Mapping[str, Any], wording: Mapping[str, str]) -> list[tuple[str, str]]:
    """(field, shown value) of one record's kept values, nested fields dotted."""
    cells: list[tuple[str, str]] = []
    for key, child in value.items():
        name = quoted_key(str(key))
        if isinstance(child, Mapping):
            cells += [(f"{name}.{inner}", text) for inner, text in _cells(child, wording)]
        elif (shown := _inline(child, name, wording)) is not None:
            cells.append((name, shown))
    return cells


def _record(cells: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{name}: {text}" for name, text in cells) + ")"


def _inline(value: Any, key: str, wording: Mapping[str, str]) -> str | None:
    """A value inside a row or a list; None when nothing of it is kept.

    A scalar is shown as a cell, a record in parentheses, a list in brackets.
    """
    if isinstance(value, Mapping):
        cells = _cells(value, wording)
        return _record(cells) if cells else None
    if isinstance(value, list):
        items = [item for item in (_inline(child, key, wording) for child in value)
                 if item is not None]
        separator = ", " if all(not isinstance(c, Mapping | list) for c in value) else "; "
        return "[" + separator.join(items) + "]" if items else None
    return _shown_scalar(key, value, wording, cell=True)


def _shown_scalar(key: str, value: Any, wording: Mapping[str, str], *, cell: bool
                  ) -> str | None:
    """A scalar as the reduced tier shows it, or None when it holds no key fact.

    Numbers as the tool wrote them, booleans as ``true``/``false``; a string whole when it is
    an id (by its key), a verdict (``status``, ``error``) or a short value holding a fact, else
    its facts, each whole, between ellipses; null and prose without facts are left out.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, JsonNumber | int | float):
        return str(value)
    text = _without_line_breaks(str(value))
    if not text.strip():
        return None
    if (kind := _blob_kind(text)) is not None:
        return wording["blob"].format(length=len(text), kind=kind)
    leaf = key.rsplit(".", 1)[-1]
    short = len(text) <= _VERDICT_MAX_CHARS
    verdict = leaf.lower() in _VERDICT_KEYS
    if short and (verdict or _ID_KEY.search(leaf)):
        return quoted_value(text, cell=cell)
    facts = shown_facts(_without_blobs(text, wording))
    if not facts and not verdict:
        return None
    if facts == (text,) or (short and len(text.split()) <= _VALUE_WORDS):
        return quoted_value(text, cell=cell)
    pieces = [quoted_value(fact, cell=cell) for fact in facts]
    if verdict:  # what went wrong is in its words: the head of the message, then its facts
        head = _head(text, _VERDICT_MAX_CHARS).removesuffix(" …")
        in_head = set(shown_facts(head))  # whole facts: "55" is not shown by "ORD-5512"
        pieces = [head, *(p for p, f in zip(pieces, facts, strict=True) if f not in in_head)]
        return " … ".join(pieces) + " …"
    return " … ".join(pieces)


_VALUE_WORDS = 4
"""A short string of at most this many words that holds a fact is a value (``UA 857``,
``Terminal 4, Gate B12``), shown whole; a longer one is prose, shown as its facts."""


_LINE_CHARS = 240
"""The longest a one-line result is unless the plan says otherwise (``tool_line_chars``)."""


def one_line_tool_result(tool_name: str | None, content: str, max_chars: int = _LINE_CHARS, *,
                         language: str = "en") -> str:
    """The shortest form that still names what the result held: its identifiers and dates.

    A short text result is shown whole when that fits in ``max_chars``; otherwise the
    identifiers that fit in ``max_chars`` are listed, followed by a " (+n more)" count of the
    rest (the count may run past ``max_chars``: reserving room for it costs identifiers).
    ``language``: that of the build's labels (``en``, ``zh``); the line's own words follow it.
    """
    _wording(language)
    return _line_cached(tool_name, content, max_chars, language)


@memoized("compress.tool_results.line", max_entries=16_384, share=0.03, size=call_bytes)
def _line_cached(tool_name: str | None, content: str, max_chars: int, language: str) -> str:
    mark, content = _failure_mark(content)
    line = _line(tool_name, content, max_chars - len(mark), _wording(language))
    return mark + without_lone_surrogates(line, content)


def _failure_mark(content: str) -> tuple[str, str]:
    """(``TOOL_ERROR_MARK`` and a space, or "" for a result that did not fail; the rest).

    The mark is taken off before reducing, so a failed JSON result is still read as JSON, and
    put back at the head of the reduced text, where ``reports_failure`` looks for it.
    """
    if not content.startswith(TOOL_ERROR_MARK):
        return "", content
    return f"{TOOL_ERROR_MARK} ", content[len(TOOL_ERROR_MARK):].lstrip()


def _line(tool_name: str | None, content: str, max_chars: int,
          wording: Mapping[str, str]) -> str:
    prefix = wording["line"].format(name=tool_name) if tool_name else wording["line_unnamed"]
    value = _parse_json(content)
    if value is None and len(content) <= _SHORT_TEXT:
        whole = f"{prefix}: {_one_line(content)}"
        if len(whole) <= max_chars:
            return whole
    if value is None:
        found: Iterable[str] = shown_facts(_without_blobs(content, wording))
    else:
        found = (fact for key, scalar in _leaves(value, "")
                 for fact in _line_facts(key, scalar, wording))
    facts = sorted((f for f in dict.fromkeys(found) if _is_identifier(f)), key=_line_rank)
    room = max_chars - len(prefix) - 2
    shown = _fitting(facts, room)
    if len(shown) < len(facts):  # the "(+N more)" tail takes room of its own, unless the
        # line would then show no value at all: one value and the tail say more than none
        shown = _fitting(facts, room - len(wording["more"].format(more=len(facts)))) or shown
    more = len(facts) - len(shown)
    tail = wording["more"].format(more=more) if more else ""
    return f"{prefix}: {' '.join(shown) or wording['no_ids']}{tail}"


_LINE_RANKS = {"id": 0, "code": 0, "email": 1, "phone": 1, "url": 1, "version": 2, "date": 2}
"""Which values a one-line result lists first when its line cannot hold them all: the ids
and codes a later call names (a reservation, a card), then contacts, then dates; addresses,
amounts and plain numbers last. The order is otherwise the result's own."""


def _line_rank(fact: str) -> int:
    kind = fact_kind(fact)
    if kind:
        return _LINE_RANKS.get(kind, 3)
    # A whole value kept by its key (``pnr: X7BYG1``): an id when it mixes letters and digits.
    has_digit = any(ch.isdigit() for ch in fact)
    return 0 if has_digit and any(ch.isalpha() for ch in fact) and " " not in fact else 3


def _line_facts(key: str, value: Any, wording: Mapping[str, str]) -> Iterable[str]:
    """The whole values of one scalar of a JSON result.

    Each scalar is read on its own: reading them as one text would join the end of one to the
    start of the next ("12" and "500 ₽" would read as "12 500 ₽").
    """
    if isinstance(value, bool):
        return ()
    if isinstance(value, JsonNumber | int | float):
        return (str(value),)
    text = _without_line_breaks(str(value))
    if _blob_kind(text) is not None:
        return ()
    if _ID_KEY.search(key.rsplit(".", 1)[-1]) and 0 < len(text) <= _VERDICT_MAX_CHARS:
        return (text,)
    return shown_facts(_without_blobs(text, wording))


def _fitting(facts: Sequence[str], room: int) -> list[str]:
    """The leading ``facts`` that fit in ``room`` characters, each with a separating space."""
    shown: list[str] = []
    length = 0
    for fact in facts:
        if length + len(fact) + 1 > room:
            break
        shown.append(fact)
        length += len(fact) + 1
    return shown


def dropped_tool_result(tool_name: str | None, *, language: str = "en") -> str:
    """The placeholder that answers a call whose early result was dropped (in ``language``)."""
    wording = _wording(language)
    return wording["dropped"].format(name=tool_name or wording["a_tool"])


def _parse_json(content: str) -> Any:
    stripped = content.strip()
    if not stripped or stripped[0] not in "{[" or len(stripped) > MAX_COMPACT_CHARS:
        return None
    try:
        value = parse_json_verbatim(stripped)
    except (ValueError, RecursionError):  # not JSON (or a duplicate key: read as text)
        return None
    return value if isinstance(value, Mapping | list) else None


def _leaves(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    """(leaf key, scalar) pairs.

    The leaf key is the nearest object key above the scalar, prefixed by its parent's key
    (``prices.economy``); only the last part says whether it is an id key.
    """
    if isinstance(value, Mapping):
        parent = key.rsplit(".", 1)[-1]
        for child_key, child in value.items():
            name = str(child_key)
            yield from _leaves(child, f"{parent}.{name}" if parent else name)
    elif isinstance(value, list):
        for child in value:
            yield from _leaves(child, key)
    elif value is not None:
        yield key, value


_HEAD_CHARS = 100
"""Characters of a long text result a reduced line shows before its remaining facts."""
_TAIL_CHARS = 200
"""Characters of a long text result's last non-empty lines a reduced line shows at its end."""


def _reduced_text(content: str, wording: Mapping[str, str]) -> str:
    """A text result's head, the facts head and tail do not show, and its last line(s).

    The last non-empty lines are where a traceback's exception and a log's summary are.
    """
    content = _without_blobs(content, wording)
    if len(content) <= _SHORT_TEXT:
        return _one_line(content)
    lines = [line for line in (_one_line(line) for line in content.splitlines()) if line]
    if not lines:
        return ""
    tail_lines: list[str] = []
    if len(lines) > 1:
        tail_lines.append(lines.pop())
        while len(lines) > 1 and (len(lines[-1]) + 1 + sum(len(t) + 1 for t in tail_lines)
                                  <= _TAIL_CHARS):
            tail_lines.insert(0, lines.pop())
    before = " ".join(lines)
    head = _head(before, _HEAD_CHARS)
    tail = _head(" ".join(tail_lines), _TAIL_CHARS) if tail_lines else ""
    # Whole facts, not substrings: "55" is not shown by a head that holds "ORD-5512". A fact the
    # cut splits is not among the head's facts either, so it is listed whole.
    shown = set(shown_facts(head)) | set(shown_facts(tail))
    rest = [quoted_value(f, cell=True) for f in shown_facts(_one_line(content)) if f not in shown]
    parts = [head.removesuffix(" …")]
    if rest:
        parts.append(", ".join(rest))
    if tail:
        parts.append(tail)  # with its own " …" when it was cut
    return " … ".join(parts) + (" …" if len(parts) == 1 else "")


def _head(text: str, limit: int) -> str:
    """``text`` when it is at most ``limit`` characters, else its first ``limit`` and " …".

    The cut falls between characters as a reader sees them: a Devanagari conjunct or an emoji
    family is kept whole or left out, never shown in part.
    """
    if len(text) <= limit:
        return text
    return whole_clusters(text, text[:limit]) + " …"


def _without_line_breaks(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text) if _LINE_BREAK.search(text) else text


_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")
_BLOB_RUN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{65,}")
"""A run longer than a SHA-256 in hex, of the characters of base64 and hex: a blob or a hash."""
_HEX_RUN = re.compile(r"(?=[^a-fA-F]*[a-fA-F])(?=\D*\d)[0-9a-fA-F]+")
_BASE64_RUN = re.compile(r"(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])(?=\D*\d)[A-Za-z0-9+/=_-]+")


def _blob_kind(run: str) -> str | None:
    """``hex`` or ``base64`` for a run of ``_BLOB_RUN`` that reads as one, else None.

    A path or an id that happens to be as long has few slashes, or lacks mixed case and digits.
    """
    if len(run) < 65:
        return None
    if _HEX_RUN.fullmatch(run):
        return "hex"
    if _BASE64_RUN.fullmatch(run) and run.count("/") * 32 <= len(run):
        return "base64"
    return None


def _without_blobs(text: str, wording: Mapping[str, str]) -> str:
    """``text`` with each blob shown as its kind and length: a piece of one is no fact."""
    if len(text) < 65:
        return text

    def shown(run: re.Match[str]) -> str:
        kind = _blob_kind(run.group())
        return run.group() if kind is None else wording["blob"].format(
            length=len(run.group()), kind=kind)

    return _BLOB_RUN.sub(shown, text)


def _has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def _one_line(text: str) -> str:
    return " ".join(text.split())


_AMOUNT_MARKS = re.compile(r"[.,$¥￥€£%]|[百千万亿]|元|块钱|块")
_ZH_CLOCK_OF_DAY = re.compile(r"(?:上午|下午|晚上|早上|中午|凌晨|傍晚)?\d{1,2}"
                              r"(?::\d{2}(?::\d{2})?|点(?:\d{1,2}分|半)?)")


def _is_identifier(fact: str) -> bool:
    """Ids, dates, codes and long numbers; not the small counts and prices of a listing."""
    if _TIME.fullmatch(fact) or _ZH_CLOCK_OF_DAY.fullmatch(fact):
        return False  # a time of day names nothing by itself
    digits = sum(ch.isdigit() for ch in fact)
    if digits == 0:
        return len(fact) >= 3  # an upper-case code
    # Signs and units do not make an amount an identifier: "$5" is a price like "5".
    if digits == len(_AMOUNT_MARKS.sub("", fact).lstrip("-")):
        return digits >= 4  # a plain number: only long ones (card ends, zips, amounts in cents)
    return True


register_cache("compress.tool_results.reduce", _reduce_cached)
register_cache("compress.tool_results.line", _line_cached)
