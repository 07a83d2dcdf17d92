"""What a tool, a retriever or a caller gave reaches the model as it was given, or is refused.

A failed tool result stays flagged as failed however it is shown (cut, reduced, one line); JSON
compaction shows numbers as written and never makes text a UTF-8 request cannot carry; tool-call
arguments and document scores that would break a provider or the build are refused with an
``InvalidInputError`` naming them; the library's own fence heads are recognised whatever their
label. Requests are checked against the official SDK types and sent through the SDKs to a local
server that enforces the APIs' rules.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from contextwright import BuildPlan, ContextBuilder, Document, Request, chat_messages
from contextwright.compress.facts import without_framing
from contextwright.compress.json_compact import compact_tool_result
from contextwright.compress.summarize import ExtractiveSummarizer
from contextwright.compress.tool_results import one_line_tool_result, reduce_tool_result
from contextwright.core.fence import fence, fenced_body
from contextwright.core.final import FinalContext
from contextwright.core.items import Message, reports_failure
from contextwright.errors import InvalidInputError
from fakes.provider_server import ProviderServer
from test_provider_requests import MODELS, SDK_TYPES, check_sdk_type, send

BUILDER = ContextBuilder(tokenizer="o200k_base")
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
MARK = "(tool error)"


def tool_turn(content: str, arguments: str = "{}", name: str = "get_weather"
              ) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [{
                "id": "c1", "type": "function",
                "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "content": content}]


def build(request: Request, plan: str = "tool_heavy") -> FinalContext:
    return BUILDER.build(BuildPlan.named(plan), request)


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def sent(server: ProviderServer, ctx: FinalContext, fmt: str) -> dict[str, Any]:
    """``ctx`` rendered for ``fmt``, checked against the SDK types and sent through the SDK.

    The SDKs encode the body as UTF-8: a lone surrogate fails there, before any network.
    Returns the body as the server received it.
    """
    body = ctx.to_request(fmt, model=MODELS[fmt])  # type: ignore[arg-type]
    check_sdk_type(fmt, body)
    send(server, fmt, body)
    received = server.received[-1]
    assert received.status == 200, received.error
    return received.body


def anthropic_tool_results(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {block["tool_use_id"]: block for message in body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"] if block["type"] == "tool_result"}


def tool_texts(ctx: FinalContext) -> list[str]:
    """What the model is shown of each tool result (inside the fence)."""
    return [fenced_body(m.content) for m in ctx.messages if m.role == "tool"]


# ----------------------------------------------------------------- a failed tool result


def test_a_failed_tool_result_cut_around_the_query_keeps_its_mark_and_anthropic_flag(
        server: ProviderServer) -> None:
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 20 for i in range(100)]
    paragraphs[60] = "Shanghai weather forecast: cached value from 2019, sunny 25C"
    failed = "upstream timeout; stale cache dump follows\n\n" + "\n\n".join(paragraphs)
    turn = chat_messages([
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "is_error": True, "content": failed}]}])
    ctx = build(Request(user_input="What is the Shanghai weather forecast?", system="Sys.",
                        tools=[WEATHER], turn=turn))
    assert [d.action for d in ctx.report.decisions if d.key == "tool_results.m1"] == ["truncated"]
    (shown,) = tool_texts(ctx)
    assert shown.startswith(f"{MARK} ") and "Shanghai weather forecast" in shown
    assert "Paragraph 99" not in shown  # it was cut
    block = anthropic_tool_results(sent(server, ctx, "anthropic"))["toolu_1"]
    assert block["is_error"] is True


def failed_history(rounds: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(rounds):
        history += [{"role": "user", "content": f"Weather, try {i}?"},
                    *tool_turn(f'{MARK} {{"error": "timeout", "code": "E{i:03d}"}}'),
                    {"role": "assistant", "content": f"It failed ({i})."}]
        history[-3]["tool_calls"][0]["id"] = history[-2]["tool_call_id"] = f"toolu_{i}"
    history += [{"role": "user", "content": "And now?"},
                *tool_turn('{"weather": "sunny"}'), {"role": "assistant", "content": "Sunny."}]
    history[-3]["tool_calls"][0]["id"] = history[-2]["tool_call_id"] = "toolu_ok"
    return history


def test_reduced_and_one_line_failed_results_are_flagged_for_anthropic(
        server: ProviderServer) -> None:
    ctx = build(Request(user_input="now?", tools=[WEATHER], history=failed_history(8)))
    texts = tool_texts(ctx)
    assert any("key facts" in text for text in texts)  # both tiers are shown
    assert any("Earlier tool result" in text for text in texts)
    results = anthropic_tool_results(sent(server, ctx, "anthropic"))
    assert len(results) == 9
    assert "is_error" not in results.pop("toolu_ok")
    for call_id, block in results.items():
        assert block["is_error"] is True, call_id
        assert fenced_body(block["content"]).startswith(f"{MARK} "), call_id


def test_a_failed_result_opens_its_reduced_forms_with_the_mark() -> None:
    failed = f'{MARK} {{"error": "timeout", "order_id": "ORD-2024-0917"}}'
    reduced = reduce_tool_result("get_order", failed)
    assert reduced == (f"{MARK} Tool result (get_order), key facts: error: timeout; "
                       "order_id: ORD-2024-0917")  # read as JSON under the mark
    line = one_line_tool_result("get_order", failed, 60)
    assert line.startswith(f"{MARK} Earlier tool result") and "ORD-2024-0917" in line
    assert len(line) <= 60
    assert reports_failure(reduced) and reports_failure(line)
    assert not reports_failure(reduce_tool_result("get_order", '{"error": null}'))


# ------------------------------------------------------------ JSON that Python re-reads


def test_an_escaped_lone_surrogate_in_a_json_result_stays_an_escape(
        server: ProviderServer) -> None:
    content = '{"name": "caf\\ud83d", "order": "ORD-1", "ok": "\\ud83d\\ude00"}'
    ctx = build(Request(user_input="status?", tools=[WEATHER], turn=tool_turn(content)))
    (shown,) = tool_texts(ctx)
    assert shown == "Tool result (get_weather): name: caf\\ud83d, order: ORD-1, ok: 😀"
    for fmt in SDK_TYPES:
        body = sent(server, ctx, fmt)
        assert r"caf\\ud83d" in json.dumps(body, ensure_ascii=False)  # the escape as text


@pytest.mark.parametrize(("content", "compacted"), [
    pytest.param('[{"k": "\\udc00x"}, {"k": 1, "z": 2}]',
                 'Tool result (t): [{"k":"\\udc00x"},{"k":1,"z":2}]', id="minified"),
    pytest.param('{"status": "\\ud83d"}', "Tool result (t): status: \\ud83d", id="compact"),
])
def test_no_compacted_or_reduced_form_holds_a_lone_surrogate(content: str, compacted: str
                                                              ) -> None:
    assert compact_tool_result("t", content) == compacted  # minified JSON; compact text
    for form in (reduce_tool_result("t", content), one_line_tool_result("t", content, 240)):
        form.encode("utf-8")
    assert reduce_tool_result("t", '{"status": "\\ud83d"}').endswith("status: \\ud83d")


def test_tool_call_arguments_escaping_a_lone_surrogate_are_refused_naming_them() -> None:
    request = Request(user_input="find it", tools=[WEATHER],
                      turn=tool_turn("no results", arguments='{"q": "caf\\ud83d"}'))
    where = re.escape("turn[0].tool_calls[0].function.arguments")
    with pytest.raises(InvalidInputError, match=rf"{where} .*lone surrogate"):
        request.validate()
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        build(request)


def test_tool_call_arguments_escaping_a_whole_emoji_are_sent(server: ProviderServer) -> None:
    request = Request(user_input="find it", tools=[WEATHER],
                      turn=tool_turn("no results", arguments='{"q": "caf\\ud83d\\ude00"}'))
    request.validate()
    body = sent(server, build(request), "anthropic")
    uses = [block for message in body["messages"] if isinstance(message["content"], list)
            for block in message["content"] if block["type"] == "tool_use"]
    assert uses[0]["input"] == {"q": "caf😀"}


WALLET = ('{"token": "ETH", "balance": 0.123456789012345678, "price": 19.90, '
          '"limit": 1e400, "dust": 1e-400, "ledger": 9007199254740993.0, "big": '
          '123456789012345678901234567890, "neg": -0, "nan": NaN}')
WRITTEN = ("0.123456789012345678", "19.90", "1e400", "1e-400", "9007199254740993.0",
           "123456789012345678901234567890", "-0", "NaN")


def test_json_compaction_shows_numbers_as_written(server: ProviderServer) -> None:
    ctx = build(Request(user_input="What is my ETH balance exactly?", tools=[WEATHER],
                        turn=tool_turn(WALLET, name="get_weather")))
    (shown,) = tool_texts(ctx)
    assert shown.startswith("Tool result (get_weather): token: ETH, balance: ")
    for number in WRITTEN:
        assert f": {number}," in f"{shown},", number
    assert "inf" not in shown and "0.0," not in shown
    for fmt in SDK_TYPES:
        sent(server, ctx, fmt)


def test_minified_and_reduced_forms_show_numbers_as_written() -> None:
    nested = ('{"a_long_section_name": {"another_long_name": '
              '{"x": 1.10, "y": 2.20, "z": 1e400}}}')
    compact = compact_tool_result("t", nested)
    assert compact == ('Tool result (t): {"a_long_section_name":{"another_long_name":'
                       '{"x":1.10,"y":2.20,"z":1e400}}}')
    reduced = reduce_tool_result("wallet", WALLET)
    for number in WRITTEN[:-1]:  # NaN is no fact
        assert number in reduced, number
    assert "ledger: 9007199254740993.0" in reduced


def test_a_json_result_with_a_duplicate_key_is_shown_as_given() -> None:
    content = '{"amount": 10, "amount": 20, "currency": "EUR"}'
    assert compact_tool_result("pay", content) is None
    ctx = build(Request(user_input="How much?", tools=[WEATHER], turn=tool_turn(content)))
    assert tool_texts(ctx) == [content]
    reduced = reduce_tool_result("pay", content)
    assert "10" in reduced and "20" in reduced


# ---------------------------------------------------------------------- document scores


@pytest.mark.parametrize("score", ["0.92", True, math.nan, math.inf, -math.inf,
                                   pytest.param(10**400, id="beyond-float")])
def test_a_document_score_that_is_not_a_finite_number_is_refused_naming_it(
        score: object) -> None:
    request = Request(user_input="How long do refunds take?", documents=[
        Document(id="ship", text="Orders ship in 2 days.", score=0.5),
        Document(id="refund", text="Refunds take 15 days.", score=score)])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"documents\[1\]\.score"):
        request.validate()
    with pytest.raises(InvalidInputError, match=r"documents\[1\]\.score"):
        build(request, "rag_qa")  # never a source failure that drops every document


def test_a_document_score_as_text_is_refused_in_a_json_request() -> None:
    with pytest.raises(InvalidInputError, match=r"documents\.0\.score"):
        Request.from_dict({"user_input": "q", "documents": [
            {"id": "refund", "text": "Refunds take 15 days.", "score": "0.92"}]})


def test_document_scores_of_any_real_number_type_order_the_documents() -> None:
    scores: list[Any] = [np.float32(0.25), Fraction(1, 3), 1, np.float64(0.5)]
    request = Request(user_input="refunds?", documents=[
        Document(id=f"d{i}", text=f"Document {i} about refunds.", score=score)
        for i, score in enumerate(scores)])
    request.validate()
    shown = [m.content for m in build(request, "rag_qa").messages if "about refunds" in m.content]
    assert [next(f"d{i}" for i in range(4) if f"Document {i} " in text) for text in shown] == [
        "d2", "d3", "d1", "d0"]


# ----------------------------------------------------------------------- fence framing


@pytest.mark.parametrize("label", [
    "Help Center > Refunds", "Refunds >", "a>>b", "a << b", "", "＞＞ full ＞",
    pytest.param("x" * 500, id="long"), "tool get_weather", "Q&A <docs>", ">"])
def test_without_framing_removes_fence_lines_of_any_label(label: str) -> None:
    fenced = fence("Refunds take 15 days.", label)
    assert without_framing(fenced) == "\nRefunds take 15 days.\n"


def test_a_quoted_fence_head_with_a_breadcrumb_label_is_no_summary_note() -> None:
    ctx = build(Request(user_input="How long do refunds take?", documents=[Document(
        id="r", text="Refunds take 15 days.", source="Help Center > Refunds")]), "rag_qa")
    head = next(m.content.splitlines()[0] for m in ctx.messages
                if m.content.startswith("<<data"))
    assert "Help Center > Refunds" in head
    summary = ExtractiveSummarizer().summarize(None, [
        Message(role="user", content="How long do refunds take?"),
        Message(role="assistant", content=f"{head} Refunds take 15 days.")], language="en")
    assert summary.notes == ("Refunds take 15 days.",)
