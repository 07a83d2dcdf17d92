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
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from itertools import compress, count
from typing import Final

WHEN: Final = "@when"
"""The term of a turn that speaks of time, and of a question that asks for one."""

_MONTHS: Final = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")), start=1) for name in names}
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS: Final = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                   "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2,
                   "few": 3, "a few": 3}
_NUMBER: Final = "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True)) + r"|\d{1,2}"

# Dates are read off the lower-cased text's words and numbers (``_Words``), and the few patterns
# run only when a cheap look at those words says they may match: most turns name no date, and a
# regex over every turn's whole text was most of the cost of indexing it.
_BEFORE_MONTH: Final = frozenset(
    {"in", "since", "until", "till", "during", "by", "of", "early", "late", "mid", "last",
     "next", "this"})
"""Words after which a month name alone names the month: "in June", "since March"."""
_BEFORE_MAY: Final = _BEFORE_MONTH - {"by", "of", "this"}
"""The same for "may", which is a verb after "this", "by" or "of" far more often."""
_ORDINALS: Final = frozenset({"st", "nd", "rd", "th"})
_YEAR_OR_DATE: Final = re.compile(r"(?:19|20)\d\d(?:-\d\d?-\d\d?)?")
"""A year, or an ISO 8601 date (``2023-05-08``); its ends are checked apart (a pattern that
starts with its digits is searched for several times faster than one that starts with a
look-behind)."""
_BEFORE_YEAR: Final = frozenset({"in", "since", "until", "of", "by", "during", "from", "year"})
"""A bare number such as 2019 is a year after one of these words, or at the end of a clause."""
_CJK_DATE: Final = re.compile(
    r"(\d{4})年(?:(\d{1,2})月(?:(\d{1,2})[日号])?)?|(\d{1,2})月(?:(\d{1,2})[日号])?")

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
_PHRASES: Final = (*_RELATIVE_DAYS, *_RELATIVE_WEEKS, *_RELATIVE_MONTHS, *_RELATIVE_YEARS)
_ONE_WORD: Final = frozenset(p for p in _PHRASES if p.isascii() and " " not in p)
_TWO_WORDS: Final = frozenset(tuple(p.split()) for p in _PHRASES if p.count(" ") == 1)
_CJK_RELATIVE: Final = re.compile("|".join(
    sorted((p for p in _PHRASES if not p.isascii()), key=len, reverse=True)))
# Chinese writes no spaces, so 明天 also stands inside 聪明天才 and 去年 inside 过去年代. A time
# word does not count where the character before it makes a common word with its first one
# (聪明, 过去, 日本, 目前, 马上, 一下), or its last one with the character after it (周边).
# Only words whose reading clearly wins are listed: after 说 (说明) or 至 (至今), 明天 and
# 今天 are the time words far more often ("他说明天来", "至今天为止"); and most characters
# after a time word start a word of their own (明天下午, 今天气温, 本周末, 下周到货, 这个月光).
_WORDS_BEFORE_TIME: Final = frozenset(
    # … + 前天 / 前年
    "之前 以前 目前 提前 面前 眼前 当前 从前 空前 先前 事前 向前 跟前 生前 日前 门前 "
    # … + 今天 / 今年 / 今晚
    "如今 当今 古今 现今 "
    # … + 明天 / 明年
    "聪明 光明 文明 发明 证明 透明 黎明 鲜明 精明 清明 表明 声明 分明 高明 简明 阐明 "
    "标明 注明 指明 查明 失明 神明 严明 申明 挑明 言明 载明 英明 开明 "
    # … + 上周 / 上个月 / 上星期
    "马上 早上 晚上 身上 网上 路上 以上 加上 爱上 赶上 遇上 楼上 桌上 手上 脸上 头上 "
    "世上 天上 地上 线上 街上 车上 床上 墙上 班上 海上 "
    # … + 下周 / 下个月
    "以下 地下 楼下 天下 一下 留下 剩下 底下 上下 私下 手下 乡下 眼下 当下 放下 写下 "
    "记下 拿下 停下 坐下 "
    # … + 本周 / 本月
    "日本 基本 根本 成本 资本 版本 样本 课本 剧本 书本 原本 文本 账本 脚本 范本 标本 "
    "记本 "
    # … + 去年
    "过去 失去 出去 回去 进去 下去 上去 离去 逝去 死去 除去 前去".split())
_WORDS_AFTER_TIME: Final = frozenset("周边 周围 月亮 月饼 月球".split())
_AGO: Final = re.compile(rf"\b({_NUMBER})\s+(day|week|month|year)s?\s+ago\b")
_WEEKDAY: Final = re.compile(rf"\b(?:last|on|this past)\s+({'|'.join(_WEEKDAYS)})\b")
_ASKS_WHEN: Final = re.compile(
    r"^\W*when\b|\bwhen (?:did|does|do|was|were|is|will|has|have)\b"
    r"|\b(?:what|which) (?:date|day|year|month|week|time)\b|\bhow long ago\b"
    r"|什么时候|哪天|哪一天|几号|哪年|哪一年|几月|何时")

_WORD: Final = re.compile(r"[a-z]+|\d+")
_MONTH_WORDS: Final = frozenset(_MONTHS)
_RELATIVE_HEADS: Final = frozenset(head for head, _ in _TWO_WORDS) | _ONE_WORD
_TIME_WORDS: Final = frozenset({"ago", "recently", "lately", "weekend", *_WEEKDAYS})
_CJK_TIME: Final = re.compile(r"[昨前今明去上下这本年月周]|几天前|最近")
_CJK_TIME_WORDS: Final = ("几天前", "最近", "周末")


_VOCABULARY: Final = _MONTH_WORDS | _RELATIVE_HEADS | _TIME_WORDS
"""Every word a date rule looks for in a text's set of words."""
_RELATIVE_STARTS: Final = _RELATIVE_HEADS | {"before"}
"""The words a relative time phrase starts at ("before" of "the day before yesterday")."""

_DIGIT: Final = re.compile(r"\d")


def _positions_of(words: list[str], wanted: frozenset[str]) -> Iterator[int]:
    """The positions in ``words`` of the words in ``wanted``, found in C.

    A turn's words are many and the wanted ones few: a Python step per word was a large part
    of dating a turn.
    """
    return compress(count(), map(wanted.__contains__, words))


class _Words:
    """What a text holds, looked at once: its lower-cased form, words, digits, CJK time marks.

    ``words`` holds only the words some rule looks for (``_VOCABULARY``): every rule asks
    whether one of a few words is there, and a set of those is cheaper to make than one of
    every word of a long turn.
    """

    __slots__ = ("_relative", "cjk", "digits", "lowered", "sequence", "words")

    def __init__(self, text: str) -> None:
        self.lowered = text.lower()
        self.sequence = _WORD.findall(self.lowered)
        self.words = _VOCABULARY.intersection(self.sequence)
        self.digits = _DIGIT.search(text) is not None
        self.cjk = _CJK_TIME.search(text) is not None
        self._relative: list[str] | None = None

    def relative_phrases(self) -> list[str]:
        """The English relative time phrases in the text, in order ("yesterday", "last week").

        "the day before yesterday" is "before yesterday" here, so it is not also "yesterday".
        Worked out once per text (a turn's date terms and its "when" both ask); do not change
        the list returned.
        """
        if self._relative is None:
            self._relative = self._find_relative_phrases()
        return self._relative

    def _find_relative_phrases(self) -> list[str]:
        if _RELATIVE_HEADS.isdisjoint(self.words):
            return []
        found, words = [], self.sequence
        for at in _positions_of(words, _RELATIVE_STARTS):
            word = words[at]
            following = words[at + 1] if at + 1 < len(words) else ""
            if (word, following) in _TWO_WORDS:
                found.append(f"{word} {following}")
            elif word == "before" and following == "yesterday":
                found.append("the day before yesterday")
            elif word in _ONE_WORD and not (word == "yesterday" and at and words[at - 1] ==
                                            "before"):
                found.append(word)
        return found


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
    seen = _Words(text)
    mentions = _named_dates(text, seen, anchor.year if anchor is not None else None)
    if anchor is not None:
        mentions = [_Mention(anchor.year, anchor.month, anchor.day), *mentions,
                    *_resolved_dates(text, seen, anchor)]
    terms = [term for mention in mentions for term in mention.terms()]
    if len(mentions) > (anchor is not None) or _speaks_of_time(text, seen):
        terms.append(WHEN)
    return list(dict.fromkeys(terms))


def query_date_terms(query: str, now: str | None = None) -> list[str]:
    """The date terms to search for with ``query``: the dates it names, ``WHEN`` if it asks.

    ``now``: when the query is asked (ISO 8601); its time words are then resolved against it
    ("what did I say yesterday?"). A month named without a year stays a month of any year.
    """
    seen = _Words(query)
    mentions = _named_dates(query, seen, None)
    asked = timestamp_date(now)
    if asked is not None:
        mentions += _resolved_dates(query, seen, asked)
    terms = [term for mention in mentions for term in mention.terms()]
    if _ASKS_WHEN.search(seen.lowered):
        terms.append(WHEN)
    return list(dict.fromkeys(terms))


def _speaks_of_time(text: str, seen: _Words) -> bool:
    """Whether the text uses a time word ("ago", "last week", "周末"), dated or not."""
    if not _TIME_WORDS.isdisjoint(seen.words):
        return True
    if seen.relative_phrases():
        return True
    return seen.cjk and (bool(_cjk_relative_phrases(text)) or any(
        word in text for word in _CJK_TIME_WORDS))


def _named_dates(text: str, seen: _Words, default_year: int | None) -> list[_Mention]:
    """Dates the text writes out: full dates, months with or without a year, years."""
    found: list[_Mention] = []
    lowered = seen.lowered
    years: list[_Mention] = []
    if seen.digits:
        for match in _YEAR_OR_DATE.finditer(lowered):
            if _stands_alone(lowered, match.start(), match.end()):
                _add_year_or_date(match, lowered, found, years)
    if not _MONTH_WORDS.isdisjoint(seen.words):
        found += _month_dates(seen.sequence, default_year)
    found += years  # after the dates that name a month: the most precise terms come first
    if seen.cjk and seen.digits and ("年" in text or "月" in text):
        for year, month, day, month_alone, day_of_month in _CJK_DATE.findall(text):
            if year:
                found.append(_Mention(int(year), int(month) if month else None,
                                      int(day) if day else None))
            else:
                found.append(_Mention(default_year, int(month_alone),
                                      int(day_of_month) if day_of_month else None))
    return [mention for mention in found if _valid(mention)]


def _stands_alone(lowered: str, start: int, end: int) -> bool:
    """Whether ``lowered[start:end]`` is not part of a longer word, number or id."""
    return not (start and _joins(lowered[start - 1])) and not (
        end < len(lowered) and _joins(lowered[end]))


def _joins(char: str) -> bool:
    return char.isalnum() or char in "-_"


def _add_year_or_date(match: re.Match[str], lowered: str, dates: list[_Mention],
                      years: list[_Mention]) -> None:
    """An ISO date to ``dates``; a four-digit number that reads as a year to ``years``."""
    parts = match.group().split("-")
    if len(parts) == 3:
        dates.append(_Mention(int(parts[0]), int(parts[1]), int(parts[2])))
    elif _is_year(lowered, match.start(), match.end()):
        years.append(_Mention(int(parts[0])))


def _is_year(lowered: str, start: int, end: int) -> bool:
    """Whether a four-digit number reads as a year: "in 2019", "year 2020", "… in 2019."."""
    before = lowered[max(0, start - 8):start].split()
    after = lowered[end:end + 2].lstrip()
    return bool(before and before[-1] in _BEFORE_YEAR) or not after or after[0] in ",.;:?!)"


def _month_dates(words: list[str], default_year: int | None) -> list[_Mention]:
    """Dates that name a month, read off the text's words and numbers.

    "June 3rd, 2023", "3 June 2023", "the 3rd of June", "June 2023", "in June" (a month alone
    needs a word before it that makes it one: "may" is mostly a verb).
    """
    found = []
    for at in _positions_of(words, _MONTH_WORDS):
        word = words[at]
        month = _MONTHS[word]
        day, after = _day_at(words, at + 1)
        if day is None:
            day = _day_before(words, at)
            after = at + 1
        year = _number_at(words, after, 4)
        if day is not None:  # a day the month does not have still names the month
            dated = _Mention(year if year is not None else default_year, month, day)
            found.append(dated if _valid(dated) else replace(dated, day=None))
        elif year is not None:
            found.append(_Mention(year, month))
        elif at and words[at - 1] in (_BEFORE_MAY if word == "may" else _BEFORE_MONTH):
            found.append(_Mention(default_year, month))
    return found


def _number_at(words: list[str], at: int, digits: int) -> int | None:
    """The number at ``words[at]`` if it has ``digits`` digits (or fewer, for a day)."""
    if at >= len(words) or not words[at].isdigit():
        return None
    word = words[at]
    fits = len(word) == digits if digits == 4 else len(word) <= digits
    return int(word) if fits else None


def _day_at(words: list[str], at: int) -> tuple[int | None, int]:
    """A day number at ``words[at]`` ("3", "3rd") and the position after it."""
    day = _number_at(words, at, 2)
    if day is None:
        return None, at
    after = at + 1
    if after < len(words) and words[after] in _ORDINALS:
        after += 1
    return day, after


def _day_before(words: list[str], at: int) -> int | None:
    """A day number before the month at ``at``: "3 June", "3rd June", "3rd of June"."""
    before = at - 1
    if before >= 0 and words[before] == "of":
        before -= 1
    if before >= 0 and words[before] in _ORDINALS:
        before -= 1
    return _number_at(words, before, 2) if before >= 0 else None


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


def _resolved_dates(text: str, seen: _Words, anchor: date) -> list[_Mention]:
    """The dates the text's time words point to, said on ``anchor``."""
    found: list[_Mention | None] = []
    lowered = seen.lowered
    found += [_relative(phrase, anchor) for phrase in seen.relative_phrases()]
    if seen.cjk:
        found += [_relative(phrase, anchor) for phrase in _cjk_relative_phrases(text)]
    if "ago" in seen.words:
        for number, unit in _AGO.findall(lowered):
            count = _NUMBERS.get(number) or int(number)
            found.append(_shifted(anchor, unit, -count))
    if not seen.words.isdisjoint(_WEEKDAYS):
        for weekday in _WEEKDAY.findall(lowered):
            back = (anchor.weekday() - _WEEKDAYS.index(weekday)) % 7 or 7
            found.append(_shifted(anchor, "day", -back))
    # A time word said on the calendar's first or last days points outside it: no date.
    return [mention for mention in found if mention is not None and _valid(mention)]


def _cjk_relative_phrases(text: str) -> list[str]:
    """The Chinese relative time words in the text, in order, but those inside another word."""
    found = []
    for match in _CJK_RELATIVE.finditer(text):
        start, end = match.span()
        if start and text[start - 1 : start + 1] in _WORDS_BEFORE_TIME:
            continue
        if text[end - 1 : end + 1] in _WORDS_AFTER_TIME:
            continue
        found.append(match.group())
    return found


def _relative(phrase: str, anchor: date) -> _Mention | None:
    if phrase in _RELATIVE_DAYS:
        return _shifted(anchor, "day", _RELATIVE_DAYS[phrase])
    if phrase in _RELATIVE_WEEKS:
        return _shifted(anchor, "week", _RELATIVE_WEEKS[phrase])
    if phrase in _RELATIVE_MONTHS:
        return _shifted(anchor, "month", _RELATIVE_MONTHS[phrase])
    return _shifted(anchor, "year", _RELATIVE_YEARS[phrase])


def _shifted(anchor: date, unit: str, count: int) -> _Mention | None:
    """``anchor`` moved by ``count`` units, as precisely as the unit allows (None: off it).

    A day is exact; a week ago is known to its month (the day it names is a guess); a month
    to its month; a year to its year.
    """
    try:
        return _moved(anchor, unit, count)
    except OverflowError:
        return None


def _moved(anchor: date, unit: str, count: int) -> _Mention:
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
