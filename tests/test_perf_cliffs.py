"""Work that must grow with what is used, not with the size of what is offered.

Each test counts units of work (characters read, Python-level checks, elements copied,
schemas analysed) at two sizes, or pins the shape of a pattern, instead of timing anything:
the two shared cores of CI make times noise. Where a faster path replaced a slower one, the
slower one is kept here as the reference the new one must agree with exactly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request, clear_caches
from contextwright.sources import history_digest, tools

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
