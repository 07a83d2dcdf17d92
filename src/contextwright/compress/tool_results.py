"""Tiered retention of tool results: full, key facts, one line.

The newest tool results stay whole; older ones are *reduced* to one short line of key facts, and
the oldest to a shorter line of identifiers, or to a placeholder. Reduction never paraphrases:
it keeps, verbatim, every value that looks like an id, a number, a date or a code (and short
status / error strings), because those are what a later call needs exactly. A reduced result still
answers its call: only its text changes, never its pairing. A failed result's reduced forms open
with its ``(tool error)`` mark, as the result did, so they still say (and a provider's flag
still says) that the call failed.

Pure functions over the result text; nothing here knows about items or budgets.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from contextwright.compress.json_compact import (
    MAX_COMPACT_CHARS,
    JsonNumber,
    parse_json_verbatim,
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
_ID_KEY = re.compile(r"(?:^|_)(?:id|ids|number|no|code|date|time|ref|key|sku)$", re.IGNORECASE)
_VERDICT_KEYS = frozenset(("status", "state", "error", "errors", "result", "message", "reason"))
_VERDICT_MAX_CHARS = 60
_SHORT_TEXT = 160
"""A text result this short is already one line: reducing it would only lose words."""


def extract_facts(text: str) -> tuple[str, ...]:
    """Exact id-, number-, date- and code-like values of ``text``, de-duplicated, in order.

    Takes time linear in the length of ``text``, however its characters are arranged.
    """
    if _LONG_RUN.search(text) is None:
        spans: Iterable[tuple[int, int]] = (m.span() for m in _FACT.finditer(text))
    else:
        spans = _fact_spans(text)
    return tuple(dict.fromkeys(text[start:end] for start, end in _whole_values(text, spans)))


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
           "dropped": "[earlier result of {name} omitted]", "a_tool": "a tool"},
    "zh": {"reduced": "工具结果（{name}），关键事实", "reduced_unnamed": "工具结果，关键事实",
           "line": "较早的工具结果（{name}）", "line_unnamed": "较早的工具结果",
           "none": "（无）", "no_ids": "（无标识）", "more": "（另有 {more} 项）",
           "dropped": "[已省略{name}的较早结果]", "a_tool": "某工具"},
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
        return _reduce_text(prefix, content)
    if fields is not None:
        value = select_fields(value, fields)
    groups: dict[str, dict[str, None]] = {}
    for key, scalar in _leaves(value, ""):
        for fact in _scalar_facts(key, scalar):
            groups.setdefault(key or "value", {})[fact] = None
    body = "; ".join(f"{key}: {', '.join(values)}" for key, values in groups.items())
    return f"{prefix}: {body}" if body else f"{prefix}: {wording['none']}"


def one_line_tool_result(tool_name: str | None, content: str, max_chars: int = 240, *,
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
    text = content if value is None else " ".join(
        str(s) for _, s in _leaves(value, "") if not isinstance(s, bool))
    facts = [f for f in extract_facts(text) if _is_identifier(f)]
    shown = _fitting(facts, max_chars - len(prefix) - 2)
    more = len(facts) - len(shown)
    tail = wording["more"].format(more=more) if more else ""
    return f"{prefix}: {' '.join(shown) or wording['no_ids']}{tail}"


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

    The leaf key is the nearest object key above the scalar, prefixed by its parent's key unless
    that is itself an id (``prices.economy``, but ``id`` under ``payment_methods.card_123``), so
    values of same-named fields in different places are not mixed up.
    """
    if isinstance(value, Mapping):
        parent = key.rsplit(".", 1)[-1]
        for child_key, child in value.items():
            name = str(child_key)
            qualified = f"{parent}.{name}" if parent and not _has_digit(parent) else name
            yield from _leaves(child, qualified)
    elif isinstance(value, list):
        for child in value:
            yield from _leaves(child, key)
    elif value is not None:
        yield key, value


def _scalar_facts(key: str, value: Any) -> Iterable[str]:
    if isinstance(value, bool):
        return (str(value).lower(),) if key.rsplit(".", 1)[-1] in _VERDICT_KEYS else ()
    if isinstance(value, JsonNumber | int | float):
        return (str(value),)  # a number as the tool wrote it
    text = str(value)
    leaf = key.rsplit(".", 1)[-1]
    if _ID_KEY.search(leaf) and len(text) <= _VERDICT_MAX_CHARS:
        return (text,)
    if leaf in _VERDICT_KEYS and len(text) <= _VERDICT_MAX_CHARS:
        return (_one_line(text),)
    return extract_facts(text)


_HEAD_CHARS = 100
"""Characters of a long text result a reduced line shows before its remaining facts."""


def _reduce_text(prefix: str, content: str) -> str:
    if len(content) <= _SHORT_TEXT:
        return f"{prefix}: {_one_line(content)}"
    flat = _one_line(content)
    # The head ends between characters as a reader sees them: a Devanagari conjunct or an
    # emoji family is kept whole or left out, never shown in part.
    head = whole_clusters(flat, flat[:_HEAD_CHARS])
    # Whole facts, not substrings: "55" is not shown by a head that holds "ORD-5512". A fact the
    # cut splits is not among the head's facts either, so it is listed whole.
    shown = set(extract_facts(head))
    rest = [f for f in extract_facts(flat) if f not in shown]
    return f"{prefix}: {head} … {', '.join(rest)}" if rest else f"{prefix}: {head} …"


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
