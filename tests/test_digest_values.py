"""The digest of omitted turns lists the values a JSON tool result holds, decoded, and counts a
value as already shown only when what the model is shown holds it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.compress.facts import missing_facts
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.sources.history_digest import history_digest

BUILDER = ContextBuilder(tokenizer="o200k_base")
QUOTE = {"sku": "SKU-88412", "price": "€1.200,50", "price_tw": "¥1.2萬元",
         "price_krw": "₩12,000", "store": "上海市浦东新区世纪大道100号", "pickup": "5月6日下午3:30",
         "note": "line one\nORD-2024-0042 on line two", "url": "https://ex.com/a/b"}
PHONE = "+44 20 7946 0958"
DIGESTING = (BuildPlan.builder("digesting").add("system")
             .add("history", max_tokens=700, options={"digest_share": 0.4})
             .add("user").budget(window=100_000).build())


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def quote_history(content: str) -> list[dict[str, Any]]:
    """A quote fetched early, then enough chat that the quote is left out."""
    history = [{"role": "user", "content": "Get me a quote for SKU-88412."},
               call("call_q", "get_quote", sku="SKU-88412"),
               {"role": "tool", "tool_call_id": "call_q", "name": "get_quote",
                "content": content},
               {"role": "assistant", "content": "Here is your quote."}]
    for i in range(12):
        history += [{"role": "user", "content": f"Question {i}: " + "shipping policies " * 20},
                    {"role": "assistant", "content": "Shipping policy answer. " * 30}]
    return history


def digest_text(request: Request, plan: BuildPlan) -> str:
    ctx = BUILDER.build(plan, request)
    digests = [m["content"] for m in ctx.to_messages()
               if "digest of omitted turns" in (m.get("content") or "")]
    assert len(digests) == 1
    return str(digests[0])


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_an_omitted_json_result_gives_its_decoded_values(ensure_ascii: bool) -> None:
    content = json.dumps(QUOTE, ensure_ascii=ensure_ascii)
    request = Request(user_input="What was the price in euros?", history=quote_history(content))
    digest = digest_text(request, DIGESTING)
    wanted = ["€1.200,50", "¥1.2萬元", "₩12,000", "上海市浦东新区世纪大道100号", "5月6日下午3:30",
              "ORD-2024-0042", "https://ex.com/a/b"]
    assert missing_facts(digest, wanted) == ()
    assert "u20ac" not in digest and "nORD" not in digest


def test_escaped_and_plain_json_give_the_same_digest() -> None:
    texts = [digest_text(Request(user_input="What was the price?",
                                 history=quote_history(json.dumps(QUOTE, ensure_ascii=flag))),
                         DIGESTING) for flag in (True, False)]
    # The fence markers differ with the text; the lines of values do not.
    assert texts[0].splitlines()[1:-1] == texts[1].splitlines()[1:-1]


def cost(item: ContextItem) -> int:
    return len(item.message.content) // 4 + 4


def kept_tool_item(content: str, *, raw: str | None = None,
                   compaction: str | None = None) -> ContextItem:
    metadata = {} if compaction is None else {"compaction": compaction}
    return ContextItem(key="history.m3", message=Message(role="tool", content=content,
                                                         tool_call_id="c1", name="lookup"),
                       layer=Layer.HISTORY, group="r1", order=3.0, untrusted=True, raw=raw,
                       metadata=metadata)


def omitted_user_history(value: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"My budget is {value}, my phone {PHONE}."},
            {"role": "assistant", "content": "Noted."},
            call("c1", "lookup", q="me"),
            {"role": "tool", "tool_call_id": "c1", "content": "{}"}]


def test_a_value_in_a_kept_escaped_json_result_counts_as_shown() -> None:
    shown = json.dumps({"budget": "€1.200,50", "phone": PHONE})  # escaped, shown as given
    request = Request(user_input="go", history=omitted_user_history("€1.200,50"))
    digest = history_digest(request, {}, [kept_tool_item(shown)], 500, cost)
    assert digest is None  # both values are in the kept result


def test_a_value_only_in_the_original_of_a_dropped_result_is_listed() -> None:
    original = json.dumps({"budget": "€1.200,50", "phone": PHONE}, ensure_ascii=False)
    kept = kept_tool_item("[earlier result of lookup omitted]", raw=original,
                          compaction="early tool result dropped")
    request = Request(user_input="go", history=omitted_user_history("€1.200,50"))
    digest = history_digest(request, {}, [kept], 500, cost)
    assert digest is not None
    assert missing_facts(digest.message.content, ["€1.200,50", PHONE]) == ()


def test_a_value_shown_in_a_compacted_result_counts_as_shown() -> None:
    original = json.dumps({"budget": "€1.200,50", "phone": PHONE})
    kept = kept_tool_item(f"Tool result (lookup): budget: €1.200,50, phone: {PHONE}",
                          raw=original)
    request = Request(user_input="go", history=omitted_user_history("€1.200,50"))
    assert history_digest(request, {}, [kept], 500, cost) is None


def test_a_value_whose_kept_result_is_dropped_reaches_the_model_in_the_digest() -> None:
    history = [{"role": "user", "content": f"Please call me back on {PHONE} later. "
                + "Some background. " * 150},
               {"role": "assistant", "content": "Noted. " + "Long answer. " * 150}]
    for i in range(4):
        number = PHONE if i == 0 else f"+44 20 7946 01{i}{i}"
        history += [{"role": "user", "content": f"Check record {i}."},
                    call(f"c{i}", "lookup", q=f"R{i}"),
                    {"role": "tool", "tool_call_id": f"c{i}",
                     "content": json.dumps({"record": f"R-77{i}", "phone": number})},
                    {"role": "assistant", "content": f"Record R-77{i} checked."}]
    plan = (BuildPlan.builder("dropping").add("system")
            .add("history", max_tokens=450, options={
                "tool_full": 1, "tool_reduced": 0, "tool_early": "drop", "digest_share": 0.3})
            .add("user").budget(window=100_000).build())
    ctx = BUILDER.build(plan, Request(user_input="Phone me back now.", history=history))
    shown = [m.get("content") or "" for m in ctx.to_messages()]
    assert any("[earlier result of lookup omitted]" in text for text in shown)
    assert missing_facts("\n".join(shown), [PHONE]) == ()


def test_a_long_escaped_json_result_is_read_decoded() -> None:
    rows = [{"row": n, "note": "filler text " * 8} for n in range(400)]
    rows[0]["amount"] = "€1.200,50"
    rows[-1]["store"] = "上海市浦东新区世纪大道100号"
    content = json.dumps(rows)  # escaped, and longer than what is read whole
    assert len(content) > 40_000
    history = [call("c1", "export"), {"role": "tool", "tool_call_id": "c1", "content": content},
               {"role": "assistant", "content": "Exported."}]
    digest = history_digest(Request(user_input="go", history=history), {}, [], 2_000, cost)
    assert digest is not None
    assert missing_facts(digest.message.content, ["€1.200,50", "上海市浦东新区世纪大道100号"]) == ()
    assert "u20ac" not in digest.message.content
