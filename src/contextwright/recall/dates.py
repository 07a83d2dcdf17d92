"""Date terms: when a turn was said and the days it speaks of, as terms a recaller can match.

"What did Maria donate in December 2023?" names no word of the turn that answers it ("I gave
my old coats to the shelter yesterday"); the turn's date does. A turn with a timestamp is
indexed under its day, month and year, and under the dates its time words point to, resolved
against that timestamp ("yesterday", "last month", "two weeks ago", "上个月"); a query is
searched for the dates it names ("on 3 May 2023", "in June", "2023年5月"). A turn that speaks
of time at all carries ``WHEN``, and so does a question asking for a time ("When did …",
"what year …", "什么时候"), so among turns that share its words, the ones that date the event
rank first.

Terms start with ``@``, which no analyzer's words contain, so they never collide with a word:
``@d2023-05-07`` (day), ``@m2023-05`` (month), ``@y2023`` (year), ``@mon05`` (a month of any
year, for "in June"), ``@when``. English and Chinese time words; pure, no I/O.
"""

from __future__ import annotations

import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Final

WHEN: Final = "@when"
"""The term of a turn that speaks of time, and of a question that asks for one."""
TERM_PREFIX: Final = "@"
"""Every date term starts with it; no analyzed word does."""

_MONTHS: Final = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")), start=1) for name in names}
_MONTH: Final = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS: Final = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                   "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2,
                   "few": 3, "a few": 3}
_NUMBER: Final = "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True)) + r"|\d{1,2}"

_FLAGS: Final = re.IGNORECASE
_ISO_DATE: Final = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_MONTH_DAY: Final = re.compile(
    rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?", _FLAGS)
_DAY_MONTH: Final = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b\.?(?:,?\s+(\d{{4}})\b)?", _FLAGS)
_MONTH_YEAR: Final = re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", _FLAGS)
_IN_MONTH: Final = re.compile(
    rf"\b(?:in|since|until|till|during|by|of|early|late|mid|last|next|this)[\s-]+({_MONTH})\b",
    _FLAGS)
_YEAR: Final = re.compile(r"\b(?:in|since|until|of|by|during|from|year)\s+((?:19|20)\d{2})\b"
                          r"|\b((?:19|20)\d{2})\b(?=\s*(?:[,.;:?!)]|$))", _FLAGS)
_CJK_DATE: Final = re.compile(r"(?:(\d{4})年)?(?:(\d{1,2})月)(?:(\d{1,2})[日号])?|(\d{4})年")

_RELATIVE_DAYS: Final = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1,
                         "this morning": 0, "this afternoon": 0, "this evening": 0,
                         "the day before yesterday": -2, "last night": -1,
                         "昨天": -1, "昨晚": -1, "前天": -2, "今天": 0, "今晚": 0, "明天": 1}
_RELATIVE_WEEKS: Final = {"last week": -1, "last weekend": -1, "this week": 0,
                          "this weekend": 0, "next week": 1, "next weekend": 1,
                          "上周": -1, "上个星期": -1, "上星期": -1, "这周": 0, "本周": 0,
                          "下周": 1}
_RELATIVE_MONTHS: Final = {"last month": -1, "this month": 0, "next month": 1,
                           "上个月": -1, "这个月": 0, "本月": 0, "下个月": 1}
_RELATIVE_YEARS: Final = {"last year": -1, "this year": 0, "next year": 1,
                          "去年": -1, "今年": 0, "明年": 1, "前年": -2}
_RELATIVE: Final = re.compile(
    "|".join(sorted(map(re.escape, (*_RELATIVE_DAYS, *_RELATIVE_WEEKS, *_RELATIVE_MONTHS,
                                    *_RELATIVE_YEARS)), key=len, reverse=True)), _FLAGS)
_AGO: Final = re.compile(rf"\b({_NUMBER})\s+(day|week|month|year)s?\s+ago\b", _FLAGS)
_WEEKDAY: Final = re.compile(rf"\b(?:last|on|this past)\s+({'|'.join(_WEEKDAYS)})\b", _FLAGS)
_TIME_WORDS: Final = re.compile(
    rf"\b(?:ago|recently|lately|weekend|{'|'.join(_WEEKDAYS)})\b|几天前|最近|周末", _FLAGS)
_ASKS_WHEN: Final = re.compile(
    r"^\W*when\b|\bwhen (?:did|does|do|was|were|is|will|has|have)\b"
    r"|\b(?:what|which) (?:date|day|year|month|week|time)\b|\bhow long ago\b"
    r"|什么时候|哪天|哪一天|几号|哪年|哪一年|几月|何时", _FLAGS)


@dataclass(frozen=True, slots=True)
class _Mention:
    """A date spoken of, as precisely as it was said (``month`` / ``day`` may be unknown)."""

    year: int | None
    month: int | None = None
    day: int | None = None

    def terms(self) -> list[str]:
        """Its terms: the day, month and year it names, and its month of any year."""
        terms = []
        if self.year is not None and self.month is not None and self.day is not None:
            terms.append(f"@d{self.year:04d}-{self.month:02d}-{self.day:02d}")
        if self.year is not None and self.month is not None:
            terms.append(f"@m{self.year:04d}-{self.month:02d}")
        if self.year is not None:
            terms.append(f"@y{self.year:04d}")
        if self.month is not None:
            terms.append(f"@mon{self.month:02d}")
        return terms


def timestamp_date(timestamp: str | None) -> date | None:
    """The calendar date of an ISO 8601 timestamp (``2023-05-08T13:56:00``), else None.

    Timestamps are the caller's, kept as given: one that is not ISO 8601 dates nothing rather
    than failing a build.
    """
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.strip()).date()
    except ValueError:
        return None


def turn_date_terms(text: str, timestamp: str | None) -> list[str]:
    """The date terms of a turn said at ``timestamp``: its own date, the dates it speaks of.

    Distinct terms, in a fixed order. Time words are resolved against the turn's date; without
    one, only the dates the text names in full (with a year) count.
    """
    anchor = timestamp_date(timestamp)
    mentions = _named_dates(text, anchor.year if anchor is not None else None)
    if anchor is not None:
        mentions = [_Mention(anchor.year, anchor.month, anchor.day), *mentions,
                    *_resolved_dates(text, anchor)]
    terms = [term for mention in mentions for term in mention.terms()]
    spoken_of = len(mentions) - (anchor is not None)
    if spoken_of or _TIME_WORDS.search(text) or _RELATIVE.search(text) or _AGO.search(text):
        terms.append(WHEN)
    return list(dict.fromkeys(terms))


def query_date_terms(query: str) -> list[str]:
    """The date terms to search for with ``query``: the dates it names, ``WHEN`` if it asks."""
    terms = [term for mention in _named_dates(query, None) for term in mention.terms()]
    if _ASKS_WHEN.search(query):
        terms.append(WHEN)
    return list(dict.fromkeys(terms))


def is_date_term(term: str) -> bool:
    """Whether ``term`` is one of this module's terms (not a word of the text)."""
    return term.startswith(TERM_PREFIX)


def _named_dates(text: str, default_year: int | None) -> list[_Mention]:
    """Dates the text writes out: full dates, months with or without a year, years."""
    found: list[_Mention] = []
    for year, month, day in _ISO_DATE.findall(text):
        found.append(_Mention(int(year), int(month), int(day)))
    for month_name, day, year in _MONTH_DAY.findall(text):
        found.append(_Mention(_year(year, default_year), _MONTHS[month_name.lower()], int(day)))
    for day, month_name, year in _DAY_MONTH.findall(text):
        found.append(_Mention(_year(year, default_year), _MONTHS[month_name.lower()], int(day)))
    for month_name, year in _MONTH_YEAR.findall(text):
        found.append(_Mention(int(year), _MONTHS[month_name.lower()]))
    for month_name in _IN_MONTH.findall(text):
        if month_name.lower() != "may" or month_name[0] == "M":  # not "in may be"
            found.append(_Mention(default_year, _MONTHS[month_name.lower()]))
    for after_word, alone in _YEAR.findall(text):
        found.append(_Mention(int(after_word or alone)))
    for year, month, day, year_only in _CJK_DATE.findall(text):
        if year_only:
            found.append(_Mention(int(year_only)))
        else:
            found.append(_Mention(_year(year, default_year), int(month),
                                  int(day) if day else None))
    return [mention for mention in found if _valid(mention)]


def _year(written: str, default: int | None) -> int | None:
    return int(written) if written else default


def _valid(mention: _Mention) -> bool:
    """A real calendar date (``31 February`` and ``month 13`` are no dates)."""
    if mention.year is not None and not 1 <= mention.year <= 9999:
        return False
    if mention.month is None:
        return mention.year is not None
    if not 1 <= mention.month <= 12:
        return False
    if mention.day is None:
        return True
    days = monthrange(mention.year if mention.year is not None else 2000, mention.month)[1]
    return 1 <= mention.day <= days


def _resolved_dates(text: str, anchor: date) -> list[_Mention]:
    """The dates the text's time words point to, said on ``anchor``."""
    found: list[_Mention] = []
    for phrase in _RELATIVE.findall(text):
        found.append(_relative(phrase.lower(), anchor))
    for number, unit in _AGO.findall(text):
        count = _NUMBERS.get(number.lower()) or int(number)
        found.append(_shifted(anchor, unit.lower(), -count))
    for weekday in _WEEKDAY.findall(text):
        back = (anchor.weekday() - _WEEKDAYS.index(weekday.lower())) % 7 or 7
        day = anchor - timedelta(days=back)
        found.append(_Mention(day.year, day.month, day.day))
    return found


def _relative(phrase: str, anchor: date) -> _Mention:
    if phrase in _RELATIVE_DAYS:
        return _shifted(anchor, "day", _RELATIVE_DAYS[phrase])
    if phrase in _RELATIVE_WEEKS:
        return _shifted(anchor, "week", _RELATIVE_WEEKS[phrase])
    if phrase in _RELATIVE_MONTHS:
        return _shifted(anchor, "month", _RELATIVE_MONTHS[phrase])
    return _shifted(anchor, "year", _RELATIVE_YEARS[phrase])


def _shifted(anchor: date, unit: str, count: int) -> _Mention:
    """``anchor`` moved by ``count`` units, as precisely as the unit allows.

    A day is exact; a week ago is known to its month (the day it names is a guess); a month
    to its month; a year to its year.
    """
    if unit == "day":
        day = anchor + timedelta(days=count)
        return _Mention(day.year, day.month, day.day)
    if unit == "week":
        day = anchor + timedelta(weeks=count)
        return _Mention(day.year, day.month)
    if unit == "month":
        months = anchor.year * 12 + anchor.month - 1 + count
        return _Mention(months // 12, months % 12 + 1)
    return _Mention(anchor.year + count)
