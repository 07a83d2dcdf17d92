"""The quick paths of indexing a history for recall give what the plain ones give.

Indexing a long history's first build reads every turn: its date terms (``recall.dates``) and
its tool results' compact text (``compress.json_compact``) take paths that skip work. Each is
compared here with the plain code it replaced, on generated text: English and Chinese, dates
written every way the date rules read, and JSON tool results of every shape.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Mapping
from json.encoder import encode_basestring
from typing import Any

import pytest

from contextwright.compress import json_compact
from contextwright.recall import dates

_WORDS = ("the", "order", "shipped", "this", "last", "next", "before", "yesterday", "today",
          "tomorrow", "tonight", "week", "weekend", "month", "year", "ago", "days", "may",
          "june", "jan", "January", "sept", "of", "in", "since", "early", "3rd", "1st", "th",
          "2023", "1999", "2024-05-07", "12", "3", "31", "Monday", "friday", "on", "past",
          "morning", "recently", "lately", "thistle", "plastic", "chicago", "maybe", "A599748",
          "night", "day", "a", "few", "two", "couple", "year,", "2019.", "(2020)", "mar",
          "market", "Sunday", "evening", "afternoon", "-", "_", "2025-13-40")
_CHINESE = ("昨天", "今天", "明天", "上周", "下个月", "去年", "2023年5月3日", "5月", "12号",
            "聪明天才", "过去年代", "最近", "周末", "几天前", "天气", "订单", "本周末", "今年")


def _texts(count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        pieces = [rng.choice(_CHINESE) if rng.random() < 0.2 else rng.choice(_WORDS)
                  for _ in range(rng.randint(0, 30))]
        yield "".join(piece + rng.choice((" ", " ", ", ", ". ", "", "\n")) for piece in pieces)


class _PlainWords:
    """``recall.dates._Words`` as it was: every word in the set, relative phrases read anew."""

    def __init__(self, text: str) -> None:
        self.lowered = text.lower()
        self.sequence = dates._WORD.findall(self.lowered)
        self.words = frozenset(self.sequence)
        self.digits = dates._DIGIT.search(text) is not None
        self.cjk = dates._CJK_TIME.search(text) is not None

    def relative_phrases(self) -> list[str]:
        if dates._RELATIVE_HEADS.isdisjoint(self.words):
            return []
        found, words = [], self.sequence
        for at, word in enumerate(words):
            following = words[at + 1] if at + 1 < len(words) else ""
            if (word, following) in dates._TWO_WORDS:
                found.append(f"{word} {following}")
            elif word == "before" and following == "yesterday":
                found.append("the day before yesterday")
            elif word in dates._ONE_WORD and not (word == "yesterday" and at and words[at - 1] ==
                                                  "before"):
                found.append(word)
        return found


def _plain_month_dates(words: list[str], default_year: int | None) -> list[Any]:
    """``recall.dates._month_dates`` as it was: a step per word."""
    found = []
    for at, word in enumerate(words):
        month = dates._MONTHS.get(word)
        if month is None:
            continue
        day, after = dates._day_at(words, at + 1)
        if day is None:
            day = dates._day_before(words, at)
            after = at + 1
        year = dates._number_at(words, after, 4)
        if day is not None:
            dated = dates._Mention(year if year is not None else default_year, month, day)
            found.append(dated if dates._valid(dated) else
                         dates._Mention(dated.year, dated.month, None))
        elif year is not None:
            found.append(dates._Mention(year, month))
        elif at and words[at - 1] in (dates._BEFORE_MAY if word == "may"
                                      else dates._BEFORE_MONTH):
            found.append(dates._Mention(default_year, month))
    return found


_STAMPS = (None, "2023-05-08T13:56:00", "2024-01-01", "2023-12-31T23:00:00", "not a date",
           "0001-01-01", "9999-12-31")


def _all_date_terms(texts: list[str]) -> list[list[str]]:
    return [[*dates.turn_date_terms(text, stamp), "|", *dates.query_date_terms(text, stamp)]
            for text in texts for stamp in _STAMPS]


def test_date_terms_match_the_plain_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = list(_texts(1_500, seed=7))
    quick = _all_date_terms(texts)
    monkeypatch.setattr(dates, "_Words", _PlainWords)
    monkeypatch.setattr(dates, "_month_dates", _plain_month_dates)
    plain = _all_date_terms(texts)
    assert quick == plain
    assert sum(1 for terms in quick if terms != ["|"]) > 1_000  # the texts do name dates


def _plain_flatten(value: Any, path: str) -> Iterable[str]:
    """``json_compact._flatten`` as it was: nested generators, abstract types first."""
    if isinstance(value, Mapping):
        if not value and path:
            yield f"{path}: {{}}"
        for key, child in value.items():
            name = json_compact.quoted_key(str(key))
            yield from _plain_flatten(child, f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        if json_compact._is_table(value):
            yield json_compact._table(value, path)
        elif all(not isinstance(child, Mapping | list) for child in value):
            rendered = "; ".join(json_compact._scalar(child, listed=True) for child in value)
            yield f"{path}: [{rendered}]" if path else f"[{rendered}]"
        else:
            for index, child in enumerate(value):
                yield from _plain_flatten(child, f"{path}[{index}]")
    else:
        yield f"{path}: {json_compact._scalar(value, field=True)}" if path else (
            json_compact._scalar(value, field=True))


def _plain_minified(value: Any) -> str:
    """``json_compact._minified`` as it was: abstract types first."""
    if isinstance(value, str):
        return value if isinstance(value, json_compact.JsonNumber) else encode_basestring(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{encode_basestring(key)}:{_plain_minified(child)}"
                              for key, child in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_plain_minified(child) for child in value) + "]"
    return json_compact._scalar(value)


def _plain_compact(tool_name: str | None, content: str) -> str | None:
    """What ``compact_tool_result`` gave before: every field flattened, then compared."""
    stripped = content.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        value = json_compact._unwrap(json_compact.parse_json_verbatim(stripped))
    except ValueError:
        return None
    body = ", ".join(_plain_flatten(value, ""))
    prefix = f"Tool result ({tool_name})" if tool_name else "Tool result"
    compact = f"{prefix}: {body}" if body else f"{prefix}: (empty)"
    minified = _plain_minified(value)
    shown = compact if len(compact) <= len(minified) + len(prefix) + 2 else (
        f"{prefix}: {minified}")
    return json_compact.without_lone_surrogates(shown, stripped)


_KEYS = ("id", "name", "city", "temp_c", "a, b: c", "", " padded", "status", "code", "data",
         "items", "error", "价格", "results", "x[0]", "note")
_STRINGS = ("ok", "Doe, Jane", "refund done, status: refunded", "1,200", "null", "", " x ",
            "北京", "A599748", "2025-06-01T09:00:00+08:00", "a; b", "(n)", "line\nbreak",
            "\ud83d", "quote \" here", "true")
_NUMBERS = (0, 7, -3, 200, 12345678901234567890, 2.5, -0.25)


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice((*_STRINGS, *_NUMBERS, None, True, False))
    if roll < 0.6:  # a table: rows with the same flat keys
        keys = rng.sample(_KEYS, rng.randint(1, 4))
        return [{key: _value(rng, 9) for key in keys} for _ in range(rng.randint(0, 4))]
    if roll < 0.8:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {key: _value(rng, depth + 1) for key in rng.sample(_KEYS, rng.randint(0, 6))}


def _results(count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        value = _value(rng, 0)
        if rng.random() < 0.3:
            value = {"code": 200, "data": value}
        yield json.dumps(value, ensure_ascii=rng.random() < 0.5,
                         indent=rng.choice((None, 2)))


@pytest.mark.parametrize("tool_name", [None, "get_weather"])
def test_compact_tool_results_match_the_plain_flattening(tool_name: str | None) -> None:
    results = list(_results(3_000, seed=11))
    quick = [json_compact._compact_cached.__wrapped__(tool_name, text, None)  # type: ignore[attr-defined]
             for text in results]
    plain = [_plain_compact(tool_name, text) for text in results]
    assert quick == plain
    readable = sum(1 for text in quick if text is not None and not text.split(": ", 1)[1]
                   .startswith(("{", "[")))
    assert 300 < readable < 2_700  # both outcomes are exercised: fields, and minified JSON
