"""Work that must grow with what is used, not with the size of what is offered.

Each test counts units of work (characters read, Python-level checks, elements copied,
schemas analysed) at two sizes, or pins the shape of a pattern, instead of timing anything:
the two shared cores of CI make times noise. Where a faster path replaced a slower one, the
slower one is kept here as the reference the new one must agree with exactly.
"""

from __future__ import annotations

import importlib
import json
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request, clear_caches
from contextwright.sources import history_digest, tools
from contextwright.tokens import _base, _openai, get_tokenizer

# --------------------------------------------------------------------------- history digest


def _rows(count: int) -> str:
    return json.dumps({"rows": [{"id": f"R{i}", "qty": i} for i in range(count)]})


def _left_out_call(arguments: str) -> Request:
    call = {"id": "c1", "type": "function",
            "function": {"name": "save_rows", "arguments": arguments}}
    return Request(
        user_input="done?",
        tools=[{"type": "function", "function": {"name": "save_rows",
                                                 "parameters": {"type": "object"}}}],
        history=[{"role": "user", "content": "save these rows"},
                 {"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "c1", "content": "saved"},
                 {"role": "assistant", "content": "Saved."}])


def _characters_extracted(monkeypatch: pytest.MonkeyPatch, request: Request) -> tuple[int, str]:
    """Characters of long texts the digest extracted values from, and the digest's text."""
    read: list[int] = []
    extract = history_digest.extract_facts

    def counting(text: str) -> tuple[str, ...]:
        if len(text) > 1_000:
            read.append(len(text))
        return extract(text)

    monkeypatch.setattr(history_digest, "extract_facts", counting)
    clear_caches()
    context = ContextBuilder(tokenizer="o200k_base").build(BuildPlan.named("tool_heavy"),
                                                           request)
    digests = [str(m["content"]) for m in context.to_messages("openai")
               if "Digest of" in str(m.get("content"))]
    assert len(digests) == 1
    return sum(read), digests[0]


def test_a_huge_left_out_call_costs_its_digest_a_bounded_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    small, small_digest = _characters_extracted(monkeypatch, _left_out_call(_rows(5_000)))
    large, large_digest = _characters_extracted(monkeypatch, _left_out_call(_rows(40_000)))
    assert large <= small * 1.1  # 8.5 times the arguments, about the same read
    assert len(_rows(40_000)) > 30 * history_digest.READ_CHARS
    assert small <= history_digest.READ_CHARS
    assert large <= history_digest.READ_CHARS
    assert "R100;" in small_digest and "R100;" in large_digest


def test_an_omitted_text_up_to_the_read_limit_is_read_whole() -> None:
    text = _rows(3_000)[: history_digest.READ_CHARS]
    assert len(text) == history_digest.READ_CHARS
    assert history_digest._read_values(text) == history_digest.extract_facts(text)


@pytest.mark.parametrize("text", [
    "ORD-" + "1234567890" * 10_000,  # one value far longer than the head: cut, so left out
    ("ORD-77 " * 9_000) + "ORD-123456789" + "x" * 10_000 + " tail ORD-99",
    ";".join(f"SKU{i:07d}" for i in range(8_000)),  # no space at all: cut hard
    "\n".join(f"order ORD-{i} shipped 2024-05-{i % 28 + 1:02d}" for i in range(4_000)),
])
def test_a_long_omitted_text_gives_only_whole_values(text: str) -> None:
    whole = set(history_digest.extract_facts(text))
    read = history_digest._read_values(text)
    assert set(read) <= whole
    assert len(read) == len(set(read))


def test_a_long_omitted_text_gives_the_values_of_its_head_and_tail() -> None:
    text = ("first ORD-1 " + "filler words " * 4_000 + "middle ORD-2 "
            + "filler words " * 4_000 + "last ORD-3")
    assert len(text) > history_digest.READ_CHARS
    read = history_digest._read_values(text)
    assert "ORD-1" in read and "ORD-3" in read and "ORD-2" not in read


# --------------------------------------------------------------------------- tools


def _schemas(count: int) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Does thing {i}.",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}
        for i in range(count)]


def _elements_copied_into_sets(monkeypatch: pytest.MonkeyPatch, count: int) -> int:
    copied = [0]

    def counting_set(items: Any = ()) -> set[Any]:
        made = set(items)
        copied[0] += len(made)
        return made

    monkeypatch.setattr(tools, "set", counting_set, raising=False)
    names = [f"tool_{i}" for i in range(count)]
    scores = [1.0 if i % 7 == 0 else 0.0 for i in range(count)]
    settings = tools.ToolOptions.read({})
    offered, left_out = tools._offer(names, scores, set(), settings)
    assert len(offered) == tools.MAX_REQUEST_TOOLS
    assert len(offered) + len(left_out) == count
    monkeypatch.undo()
    return copied[0]


def test_choosing_among_thousands_of_tools_is_linear_in_their_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    at_n = _elements_copied_into_sets(monkeypatch, 400)
    at_10n = _elements_copied_into_sets(monkeypatch, 4_000)
    assert at_10n <= 11 * at_n + 100


def _schemas_analysed_by_a_warm_build(monkeypatch: pytest.MonkeyPatch, count: int) -> int:
    request = Request(user_input="use tool_7", tools=_schemas(count))
    builder = ContextBuilder(tokenizer="o200k_base")
    builder.build(BuildPlan.named("tool_heavy"), request)
    analysed = [0]
    terms = tools._terms

    def counting(text: str) -> set[str]:
        analysed[0] += 1
        return terms(text)

    monkeypatch.setattr(tools, "_terms", counting)
    builder.build(BuildPlan.named("tool_heavy"), request)
    monkeypatch.undo()
    return analysed[0]


def test_a_warm_build_analyses_no_schema_again_with_thousands_of_tools(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clear_caches()
    few = _schemas_analysed_by_a_warm_build(monkeypatch, 50)
    many = _schemas_analysed_by_a_warm_build(monkeypatch, 5_000)
    assert many == few  # the input's terms only


def test_a_schema_edited_in_place_is_read_again() -> None:
    schema = _schemas(1)[0]
    before = tools.schema_json(schema)
    schema["function"]["parameters"]["properties"]["x"]["type"] = "integer"
    after = tools.schema_json(schema)
    assert after != before and '"integer"' in after
    assert tools.schema_json(schema) == after


# --------------------------------------------------------------------------- token counting


def _reference_safe_cut(text: str, low: int, high: int) -> int | None:
    """The cut point search as it was written first, one Python step per candidate."""
    newline = text.rfind("\n", low, high - 1)
    while newline >= low:
        if _base.splits_after_line_break(text, newline + 1):
            return newline + 1
        newline = text.rfind("\n", low, newline)
    space = text.rfind(" ", low, high - 1)
    while space > low:
        if _base.splits_before_space(text, space):
            return space
        space = text.rfind(" ", low, space)
    return None


def _reference_pieces(text: str, piece_chars: int) -> list[str]:
    pieces, start = [], 0
    while len(text) - start > piece_chars:
        end = start + piece_chars
        cut = (_reference_safe_cut(text, start + piece_chars // 2, end)
               or _reference_safe_cut(text, start + 1, end) or end)
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


_PIECE_PARTS = ("\n", " ", "a", "1", "/", "²", "½", "৴", "\t", "\u3000", "_", "é", "x", "  ", "\n ",
                "\n/", "文")


def test_cut_points_are_the_ones_the_pre_tokenizer_splits_at() -> None:
    chance = random.Random(20240607)
    for _ in range(20_000):
        text = "".join(chance.choice(_PIECE_PARTS) for _ in range(chance.randint(2, 40)))
        low = chance.randint(0, len(text) - 1)
        high = chance.randint(low + 1, len(text))
        assert _base._safe_cut(text, low, high) == _reference_safe_cut(text, low, high), (
            text, low, high)
    for _ in range(500):
        text = "".join(chance.choice(_PIECE_PARTS) for _ in range(chance.randint(2, 600)))
        piece_chars = chance.randint(4, 80)
        assert _base.split_into_pieces(text, piece_chars) == _reference_pieces(text,
                                                                               piece_chars)


def _whitespace_heavy(chars: int) -> Iterator[str]:
    rows = [{"id": i, "price": 1.5, "sku": f"A-{i}", "tags": [1, 2]} for i in range(chars // 80)]
    yield json.dumps(rows, indent=2)[:chars]
    yield "a" + " " * chars
    yield ("        value: 12\n" * (chars // 18 + 1))[:chars]
    yield ("word ² ½ " * (chars // 9 + 1))[:chars]


def test_whitespace_heavy_text_counts_exactly_as_the_tokenizer_does() -> None:
    encoding = get_tokenizer("o200k_base")
    inner = encoding.inner
    assert isinstance(inner, _openai.OpenAITokenizer)
    for text in _whitespace_heavy(150_000):
        expected = sum(len(inner._encode(piece))
                       for piece in _reference_pieces(text, _base.PIECE_CHARS))
        assert encoding.count(text) == expected


def _python_checks(monkeypatch: pytest.MonkeyPatch, run: Callable[[], object]) -> int:
    """Calls of the per-candidate checks (line break, space) while ``run`` runs."""
    checks = [0]
    for name in ("splits_after_line_break", "splits_before_space"):
        check = getattr(_base, name)

        def counting(text: str, at: int, check: Callable[[str, int], bool] = check) -> bool:
            checks[0] += 1
            return check(text, at)

        monkeypatch.setattr(_base, name, counting)
    run()
    monkeypatch.undo()
    return checks[0]


def test_finding_cut_points_takes_no_python_step_per_space(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for text in _whitespace_heavy(400_000):
        pieces = len(_base.split_into_pieces(text))
        checks = _python_checks(monkeypatch, lambda text=text: _base.split_into_pieces(text))
        assert checks <= 4 * pieces, text[:40]


def _pieces_looked_for(monkeypatch: pytest.MonkeyPatch, run: Callable[[], object]) -> int:
    searches = [0]
    cut = _base._safe_cut

    def counting(text: str, low: int, high: int) -> int | None:
        searches[0] += 1
        return cut(text, low, high)

    monkeypatch.setattr(_base, "_safe_cut", counting)
    run()
    monkeypatch.undo()
    return searches[0]


def test_counting_up_to_a_limit_stops_looking_for_pieces_past_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    encoding = get_tokenizer("o200k_base")
    for size in (200_000, 2_000_000):
        text = "The quick brown fox jumps over the lazy dog.\n" * (size // 45)
        looked = _pieces_looked_for(monkeypatch, lambda t=text: encoding.count_up_to(t, 100))
        assert looked <= 2
        assert encoding.count_up_to(text, 100) > 100


def test_truncating_a_long_text_stops_looking_for_pieces_past_the_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    encoding = get_tokenizer("o200k_base")
    for size in (200_000, 2_000_000):
        text = "The quick brown fox jumps over the lazy dog.\n" * (size // 45)
        looked = _pieces_looked_for(monkeypatch, lambda t=text: encoding.inner.truncate(t, 50))
        assert looked <= 2
        assert encoding.count(encoding.inner.truncate(text, 50)) <= 50


# --------------------------------------------------------------------------- replay

replay_module = importlib.import_module("contextwright.observe.replay")
"""The module (``contextwright.observe.replay`` is also the name of its function)."""

_REFERENCE_FENCE = re.compile(r"<<data ([0-9a-f]{12}) ([^\n]*)>>\n(.*?)\n<<end \1>>", re.DOTALL)
"""The fenced-part pattern as first written: exact, but it reads on to the end of the text from
every opening line that has no end."""


def test_fenced_parts_are_found_as_the_reference_pattern_finds_them() -> None:
    markers = ("0123456789ab", "aaaaaaaaaaaa", "0123456789a")
    parts = ("<<data {m} lbl>>\n", "<<data {m} a>b>>\n", "<<data {m} >>\n", "<<data {m} x",
             ">>", "\n<<end {m}>>", "\n", "x", " ", "<", "<<end {m}>>",
             "<<data {m} <<data {m} y>>\n", "<<<data {m} z>>\n")
    chance = random.Random(7)
    for _ in range(20_000):
        text = "".join(chance.choice(parts).format(m=chance.choice(markers))
                       for _ in range(chance.randint(0, 12)))
        assert replay_module._fenced_parts(text) == _REFERENCE_FENCE.findall(text), text


def test_no_fence_pattern_of_replay_reads_past_the_line_it_starts_on() -> None:
    patterns = [value for value in vars(replay_module).values()
                if isinstance(value, re.Pattern)]
    assert patterns
    for pattern in patterns:
        # A lazy any-character span reads on to the text's end from each place it fails at.
        assert not pattern.flags & re.DOTALL, pattern.pattern
        assert ".*" not in pattern.pattern, pattern.pattern


class _CountingPattern:
    """A compiled pattern that counts the characters each call is given to search."""

    def __init__(self, pattern: re.Pattern[str], offered: list[int]) -> None:
        self._pattern = pattern
        self._offered = offered

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._pattern, name)

        def counting(text: str, pos: int = 0, endpos: int | None = None) -> Any:
            self._offered.append((len(text) if endpos is None else endpos) - pos)
            return method(text, pos, len(text) if endpos is None else endpos)

        return counting


def _characters_searched(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    offered: list[int] = []
    for name, value in list(vars(replay_module).items()):
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(replay_module, name, _CountingPattern(value, offered))
    replay_module._fence_markers(_snapshot_with_user_text(text))
    monkeypatch.undo()
    return sum(offered)


def _snapshot_with_user_text(text: str) -> Any:
    class _Snapshot:
        messages = ({"role": "user", "content": text},)

    return _Snapshot()


def test_replay_reads_quoted_fence_openings_in_linear_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def pasted(count: int) -> str:
        return "<<data 0123456789ab tool search>>\n" * count + "<<data 0123456789ab x>>\nb\n"

    small, large = pasted(300), pasted(3_000)
    assert _characters_searched(monkeypatch, large) <= 11 * _characters_searched(monkeypatch,
                                                                                  small)
    assert replay_module._fenced_parts(large) == []
    closed = large + "<<end 0123456789ab>>"
    assert replay_module._fenced_parts(closed) == _REFERENCE_FENCE.findall(closed)
