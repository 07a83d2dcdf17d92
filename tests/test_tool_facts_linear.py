"""Tool-result facts are found in time linear in the result's length, and are the same facts.

A tool result is untrusted text: one long word in it (a page of Chinese with no spaces, a dotted
path, a token) must not stall a build. ``extract_facts`` reads a text with a long run through one
finder per alternative of its pattern (``_fact_spans``); these tests hold that path to the facts
the single alternation finds, on realistic tool output and on short strings built from the
characters where the alternatives meet, and run it on inputs the alternation would take hours on.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright.compress.tool_results import (
    _fact_spans,
    _whole_values,
    extract_facts,
    one_line_tool_result,
    reduce_tool_result,
)

# The one alternation extract_facts ran on every text before it read long runs once. The
# finders must find exactly what it finds; it is kept here as it was, to compare against.
_ALTERNATION = re.compile(
    r"\d{4}年\d{1,2}月(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]"
    r"|\d{4}-\d{2}-\d{2}"
    r"(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}(?::?\d{2})?(?![\d:-]))?)?"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?(?:[+-]\d+)?"
    r"|[A-Za-z0-9][\w.+-]*@[\w-]+(?:\.[\w-]+)+"
    r"|\d+(?:\.\d+){2,}"
    r"|-?\d[\d,]*\.\d+"
    r"|-?\d{1,3}(?:,\d{3})+(?![\w,])"
    r"|[A-Za-z0-9_+-]*\d[A-Za-z0-9_+-]*"
    r"|\b[A-Z][A-Z0-9]{1,}(?:[_-][A-Z0-9]+)*\b"
)


def _alternation_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _ALTERNATION.finditer(text)]


def _alternation_facts(text: str) -> tuple[str, ...]:
    # extract_facts widens what the scan finds to whole values (a currency sign, a percent sign,
    # a Chinese unit or time of day next to a number) the same way on either path, so the facts
    # the alternation's spans give are widened alike before they are compared.
    spans = _whole_values(text, _alternation_spans(text))
    return tuple(dict.fromkeys(text[start:end] for start, end in spans))


# -- a seeded generator of realistic tool output ------------------------------------------------

_WORDS = ("order refund policy address customer account flight today status shipped pending "
          "error the a of to and is for on with booking payment card total price user item "
          "cancel").split()
_ZH = "订单退款政策地址客户账户航班今天上海北京已发货待处理错误金额总价用户"


def _one_of(r: random.Random, *makers: Callable[[], str]) -> str:
    return r.choice(makers)()


def _ident(r: random.Random) -> str:
    return _one_of(
        r, lambda: f"ORD-{r.randint(1000, 99999)}", lambda: f"#W{r.randint(1000000, 9999999)}",
        lambda: f"user_{r.randint(1, 999)}", lambda: f"{r.randint(0, 16**12):x}",
        lambda: f"SKU{r.randint(10, 999)}-{r.choice('ABC')}",
        lambda: f"v{r.randint(0, 9)}.{r.randint(0, 20)}.{r.randint(0, 99)}-beta{r.randint(1, 9)}",
        lambda: ".".join(str(r.randint(0, 255)) for _ in range(4)),
        lambda: r.choice(["JFK", "SFO", "USD", "EUR", "PNR_X7", "HTTP-404", "AB+CD"]),
        lambda: f"{r.getrandbits(128):032x}", lambda: f"c{r.randint(0, 99)}",
        lambda: "-".join(f"{r.getrandbits(16):04x}" for _ in range(5)),
    )


def _number(r: random.Random) -> str:
    return _one_of(
        r, lambda: str(r.randint(0, 10 ** r.randint(1, 9))),
        lambda: f"{r.uniform(-1000, 1000):.2f}",
        lambda: f"{r.randint(1, 999)},{r.randint(100, 999)}",
        lambda: f"{r.randint(1, 99)},{r.randint(100, 999)},{r.randint(100, 999)}.{r.randint(1, 9)}",
        lambda: f"-{r.randint(1, 99)}", lambda: f"${r.randint(1, 9999)}.{r.randint(0, 99):02d}",
        lambda: f"{r.randint(1, 100)}%", lambda: f"1,{r.randint(0, 99)}",
        lambda: f"1234,{r.randint(100, 999)}", lambda: "￥１，２９９．００", lambda: "٣٤٥",
    )


def _date(r: random.Random) -> str:
    y, m, d = r.randint(2000, 2030), r.randint(1, 12), r.randint(1, 28)
    day = f"{y}-{m:02d}-{d:02d}"
    return _one_of(
        r, lambda: day, lambda: f"{day}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:00Z",
        lambda: f"{day} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}",
        lambda: f"{day}T10:00:00.123+08:00", lambda: f"{y}年{m}月{d}日", lambda: f"{m}月{d}号",
        lambda: f"{r.randint(0, 23)}:{r.randint(0, 59):02d}",
        lambda: f"{r.randint(1, 12)}:{r.randint(0, 59):02d}pm",
        lambda: f"{day}T10:00-{y}-{m:02d}-{d + 1:02d}",
    )


def _email(r: random.Random) -> str:
    return _one_of(
        r, lambda: f"{r.choice(_WORDS)}.{r.choice(_WORDS)}@example.com",
        lambda: f"user+{r.randint(1, 99)}@mail.co.uk",
        lambda: f"{r.choice(_WORDS)}_{r.randint(1, 9)}@corp-x.io", lambda: "noreply@host",
        lambda: f"<{r.choice(_WORDS)}@a.b>", lambda: f"客户{r.choice(_WORDS)}@example.cn",
    )


def _url(r: random.Random) -> str:
    return _one_of(
        r, lambda: f"https://api.example.com/v2/orders/{r.randint(1, 99999)}?page=2",
        lambda: f"http://10.0.{r.randint(0, 255)}.{r.randint(0, 255)}:8080/health",
        lambda: f"s3://bucket/{_ident(r)}/file_{r.randint(1, 99)}.csv",
        lambda: f"com.example.{r.choice(_WORDS)}.{r.choice(_WORDS)}.Handler{r.randint(1, 9)}",
    )


def _token(r: random.Random) -> str:
    def chinese() -> str:
        return "".join(r.choice(_ZH) for _ in range(r.randint(1, 6)))
    return _one_of(
        r, lambda: r.choice(_WORDS), lambda: r.choice(_WORDS).capitalize(),
        lambda: r.choice(_WORDS).upper(), lambda: _ident(r), lambda: _number(r),
        lambda: _date(r), lambda: _email(r), lambda: _url(r), chinese,
        lambda: f"{chinese()}{_number(r)}{r.choice('元件个')}",
    )


def _prose(r: random.Random, words: int) -> str:
    glue = r.choice([" ", ", ", ". ", "; ", "\n", ": ", " - ", "/", "", "|", "，", "。"])
    return glue.join(_token(r) for _ in range(words))


def _json_value(r: random.Random, depth: int = 0) -> object:
    if depth > 2 or r.random() < 0.3:
        return r.choice([_token(r), r.randint(0, 10**6), round(r.uniform(0, 100), 2), None, True,
                         _prose(r, r.randint(1, 5))])
    if r.random() < 0.5:
        return [_json_value(r, depth + 1) for _ in range(r.randint(0, 4))]
    keys = ("id", "order_id", "status", "total", "email", "date", "items", "note", "code")
    return {r.choice(keys): _json_value(r, depth + 1) for _ in range(r.randint(1, 5))}


def _tool_output(r: random.Random) -> str:
    kind = r.randrange(6)
    if kind == 0:
        return _prose(r, r.randint(1, 60))
    if kind == 1:
        return "\n".join(f"{_date(r)} {r.choice(['INFO', 'WARN', 'ERROR'])} [{_ident(r)}] "
                         f"{_prose(r, r.randint(2, 8))}" for _ in range(r.randint(1, 12)))
    if kind == 2:
        return json.dumps(_json_value(r), ensure_ascii=r.random() < 0.5,
                          indent=r.choice([None, 2]))
    if kind == 3:  # CSV
        return "\n".join(",".join(_token(r).replace(",", "") for _ in range(r.randint(2, 6)))
                         for _ in range(r.randint(1, 10)))
    if kind == 4:  # a Chinese page: no spaces, English words and ids inline
        return "".join(r.choice(_ZH) + (_token(r) if r.random() < 0.15 else "")
                       for _ in range(r.randint(5, 300)))
    return "".join(_token(r) for _ in range(r.randint(1, 25)))  # tokens run together


def test_finders_find_the_alternations_facts_in_realistic_tool_output() -> None:
    r = random.Random(20_240_505)
    texts = [_tool_output(r) for _ in range(3_000)]
    long_runs = re.compile(r"[\w.,+@-]{64}")  # texts extract_facts reads through the finders
    assert sum(long_runs.search(text) is not None for text in texts) > 200
    for text in texts:
        assert list(_fact_spans(text)) == _alternation_spans(text), text
        assert extract_facts(text) == _alternation_facts(text), text


# Characters and pieces where the alternatives meet: digits (also Arabic-Indic and full-width
# ones, which \d matches), separators the alternatives treat differently, "@", upper-case codes,
# Chinese date characters, letters outside ASCII.
_PIECES = (*"aZB1290 .,-+_@:T年月日号订١٣５é\n/x", "2024-05-05", "1,234", "10:30", "AB", "a@b.co",
           "12", "234,567", "-1.5")


def test_finders_match_the_alternation_on_seeded_short_strings() -> None:
    r = random.Random(5)
    for _ in range(30_000):
        pool = r.sample(_PIECES, r.randint(2, len(_PIECES)))
        text = "".join(r.choice(pool) for _ in range(r.randint(0, 30)))
        assert list(_fact_spans(text)) == _alternation_spans(text), text


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_finders_match_the_alternation_on_any_mix_of_those_pieces(text: str) -> None:
    assert list(_fact_spans(text)) == _alternation_spans(text)


@given(st.text(max_size=200))
def test_finders_match_the_alternation_on_any_text(text: str) -> None:
    assert list(_fact_spans(text)) == _alternation_spans(text)


# -- long runs are read in linear time ---------------------------------------------------------
# The alternation read a run again from each of its positions: 20,000 letters took seconds, and
# each input below would take it hours. These finish within the normal test run, which is the
# check: no wall clock is read.

def _cjk_page(length: int) -> str:
    """Chinese prose with inline English words and no spaces, as a fetched page gives it."""
    return ("订单退款order政策地址refund客户VIP账户航班today上海" * length)[:length]


def test_fifty_thousand_character_words_give_their_facts() -> None:
    assert extract_facts("a" * 50_000) == ()
    assert extract_facts("a" * 50_000 + "7") == ("a" * 50_000 + "7",)
    dotted = ".".join(["com", "example", "service", "handler"] * 3_125)
    assert len(dotted) > 50_000
    assert extract_facts(dotted) == ()
    assert extract_facts(dotted + ".v2") == ("v2",)
    assert extract_facts(_cjk_page(50_000)) == ()
    assert extract_facts(_cjk_page(50_000) + "ORD-12345退款") == ("ORD-12345",)
    assert extract_facts("_" * 50_000 + "ORD-12345") == ("_" * 50_000 + "ORD-12345",)


def test_two_hundred_thousand_character_runs_of_every_shape_are_read() -> None:
    n = 200_000
    assert extract_facts("a" * n) == ()
    assert extract_facts("A" * n) == ("A" * n,)
    assert extract_facts("1" * n) == ("1" * n,)
    assert extract_facts(".".join(["foo"] * (n // 4))) == ()
    assert extract_facts(_cjk_page(n)) == ()
    assert extract_facts("1," * (n // 2)) == ("1",)  # digits and commas: each "1" a fact
    assert extract_facts("a." * (n // 2) + "@x") == ()  # "@" but no dotted domain
    assert extract_facts("a@" * (n // 2)) == ()
    assert extract_facts("AB+" * (n // 3)) == ("AB",)
    assert extract_facts("2024-01-01." * (n // 11)) == ("2024-01-01",)
    assert extract_facts("-1" * (n // 2)) == ("-1" * (n // 2),)
    assert extract_facts("1" + ",234" * (n // 4) + ",12 ") == ("1", "234", "12")
    assert extract_facts("1" + ",234" * (n // 4) + " ") == ("1" + ",234" * (n // 4),)
    address = "a." * (n // 2) + "a@example.com"
    assert extract_facts(address) == (address,)


def test_long_shapes_agree_with_the_alternation_when_cut_short() -> None:
    # The same shapes at a length the alternation still reads quickly: the same facts.
    for text in ("a" * 300, "1," * 150, "1" + ",234" * 80 + ",12 ", "AB+" * 100,
                 "2024-01-01." * 30 + "@x.com", "." + "١" * 300 + "a@x.com", "AB-" * 100 + "a",
                 _cjk_page(300) + "ORD-12345", "a-AB-" * 60, "-1,1" * 80 + ".5"):
        assert list(_fact_spans(text)) == _alternation_spans(text), text
        assert extract_facts(text) == _alternation_facts(text), text


def test_a_long_page_in_an_old_tool_result_reduces_to_its_ids() -> None:
    page = _cjk_page(100_000) + "订单ORD-12345，航班CA1234，2024年5月5日" + _cjk_page(100_000)
    line = one_line_tool_result("fetch_page", page)
    assert line == "Earlier tool result (fetch_page): ORD-12345 CA1234 2024年5月5日"
    reduced = reduce_tool_result("fetch_page", page)
    assert reduced.endswith("… ORD-12345, CA1234, 2024年5月5日")
