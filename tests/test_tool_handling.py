"""Tool results: field extraction and tiered retention in history."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, PlanError, Request
from contextwright.compress.json_compact import compact_tool_result, select_fields
from contextwright.compress.tool_results import (
    ToolTiers,
    extract_facts,
    one_line_tool_result,
    reduce_tool_result,
)
from contextwright.core.plan import FrozenOptions

BUILDER = ContextBuilder()
ORDER = {"code": 200, "data": {
    "order_id": "ORD-2024-0917", "status": "shipped", "placed": "2024-05-20",
    "total": 129.5, "internal_trace": "x" * 40,
    "items": [{"name": "boots", "sku": "SKU88123", "qty": 1},
              {"name": "socks", "sku": "SKU10002", "qty": 3}]}}
FLIGHTS = [{"flight_number": f"HAT{n:03d}", "origin": "JFK", "destination": "SEA",
            "date": "2024-05-20", "scheduled_departure_time_est": f"{6 + n % 12:02d}:00:00",
            "prices": {"economy": 100 + n, "business": 400 + n},
            "note": "Seats are subject to availability and change without notice."}
           for n in range(1, 7)]
USER = {"user_id": "nora_vance_5172", "email": "nora.vance5172@example.com", "dob": "1988-11-23",
        "payment_methods": {"credit_card_8817203": {"id": "credit_card_8817203",
                                                    "last_four": "2916"},
                            "certificate_3390412": {"id": "certificate_3390412",
                                                    "amount": 250}},
        "reservations": ["QX4ZT8", "PLM2R7"]}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def result(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"role": "tool", "tool_call_id": call_id, "content": text, **extra}


def tool_rounds(count: int, *, consumed: int | None = None) -> list[dict[str, Any]]:
    """``count`` rounds, each a question, a search call, its flight list and an answer."""
    history: list[dict[str, Any]] = []
    for n in range(count):
        flights = [dict(f, flight_number=f"HAT{n}{i:02d}") for i, f in enumerate(FLIGHTS)]
        history += [{"role": "user", "content": f"flights for leg {n}?"},
                    call(f"c{n}", "search_flights", leg=n),
                    result(f"c{n}", flights, **({"consumed": True} if n == consumed else {})),
                    {"role": "assistant", "content": f"Leg {n} has six flights."}]
    return history


def plan(**history_options: Any) -> BuildPlan:
    return (BuildPlan.builder("tiers").add("system").add("history", options=history_options)
            .add("user").budget(window=100_000).build())


def tool_messages(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


# ------------------------------------------------------------------- field extraction


def test_fields_keep_only_the_listed_dotted_paths() -> None:
    text = compact_tool_result("get_order", json.dumps(ORDER),
                               ["order_id", "status", "items[].name"])
    assert text == ("Tool result (get_order): order_id: ORD-2024-0917, status: shipped, "
                    "items (2 rows) [name]: (boots); (socks)")


def test_field_paths_reach_into_lists_and_every_key_of_an_object() -> None:
    assert select_fields(FLIGHTS[:2], ["[].flight_number"]) == [
        {"flight_number": "HAT001"}, {"flight_number": "HAT002"}]
    assert select_fields(USER, ["payment_methods.*.id"]) == {"payment_methods": {
        "credit_card_8817203": {"id": "credit_card_8817203"},
        "certificate_3390412": {"id": "certificate_3390412"}}}


def test_fields_never_hide_an_error_or_an_unexpected_shape() -> None:
    failed = {"error": "order not found", "order_id": "ORD-1"}
    assert select_fields(failed, ["status"]) == failed, "no listed field: the whole result"
    assert select_fields(failed, ["order_id"]) == failed, "the error is always kept"


def test_fields_come_from_the_plan_and_the_raw_json_stays_in_the_report() -> None:
    raw = json.dumps(ORDER)
    request = Request(user_input="where is my order?", history=[
        {"role": "user", "content": "order?"}, call("c1", "get_order"), result("c1", raw),
        {"role": "assistant", "content": "It shipped."}])
    ctx = BUILDER.build(plan(fields={"get_order": ["order_id", "status"]}), request)
    (shown,) = tool_messages(ctx.to_messages())
    assert "order_id: ORD-2024-0917, status: shipped" in shown
    assert "internal_trace" not in shown and "SKU88123" not in shown
    (compacted,) = [d for d in ctx.report.decisions if d.action == "compacted"]
    assert compacted.detail == raw


# --------------------------------------------------------------------------- facts


def test_extract_facts_finds_ids_numbers_dates_and_codes() -> None:
    text = ("Order ORD-2024-0917 for nora_vance_5172 ships 2024-05-20 at 14:30, total 129.50, "
            "flight KST418 from JFK, mail nora.vance5172@example.com")
    facts = extract_facts(text)
    for value in ("ORD-2024-0917", "nora_vance_5172", "2024-05-20", "14:30", "129.50", "KST418",
                  "JFK", "nora.vance5172@example.com"):
        assert value in facts
    assert "ships" not in facts and "flight" not in facts


@pytest.mark.parametrize("content", [ORDER, FLIGHTS, USER], ids=["order", "flights", "user"])
def test_reduced_result_keeps_every_exact_value(content: Any) -> None:
    raw = json.dumps(content)
    reduced = reduce_tool_result("tool", raw)
    assert "\n" not in reduced and len(reduced) < len(raw)
    for value in _exact_values(content):
        assert value in reduced, value


def _exact_values(value: Any) -> list[str]:
    """Every id-, number-, date- or code-like scalar of a JSON value."""
    if isinstance(value, dict):
        return [v for child in value.values() for v in _exact_values(child)]
    if isinstance(value, list):
        return [v for child in value for v in _exact_values(child)]
    text = str(value)
    return [text] if isinstance(value, int | float) or any(c.isdigit() for c in text) else []


def test_one_line_keeps_identifiers_and_says_how_many_did_not_fit() -> None:
    raw = json.dumps(USER)
    line = one_line_tool_result("get_user_details", raw, max_chars=400)
    for value in ("nora_vance_5172", "1988-11-23", "credit_card_8817203", "certificate_3390412",
                  "QX4ZT8", "PLM2R7"):
        assert value in line
    short = one_line_tool_result("get_user_details", raw, max_chars=60)
    assert len(short.split(" (+")[0]) <= 60 and "more)" in short


def test_tiers_by_rank_and_consumed() -> None:
    tiers = ToolTiers(full=1, reduced=2)
    assert [tiers.tier(rank, False) for rank in range(4)] == ["full", "reduced", "reduced",
                                                              "line"]
    assert tiers.tier(0, True) == "reduced", "a consumed result is reduced even when newest"
    assert ToolTiers.from_options({}) is None, "tiers are off unless tool_full is set"


# ------------------------------------------------------------------- tiered retention in builds


def test_latest_result_full_middle_reduced_early_one_line() -> None:
    request = Request(user_input="book the cheapest", history=tool_rounds(5))
    ctx = BUILDER.build(plan(tool_full=1, tool_reduced=2), request)
    shown = tool_messages(ctx.to_messages())
    assert len(shown) == 5
    assert all("Earlier tool result (search_flights)" in text for text in shown[:2])
    assert all("key facts" in text for text in shown[2:4])
    assert "Seats are subject to availability" in shown[4], "the newest is whole"
    reasons = [d.reason for d in ctx.report.decisions if d.action == "compacted"]
    assert sum("one line" in r for r in reasons) == 2
    assert sum("key facts" in r for r in reasons) == 2


def test_exact_values_survive_reduction_in_a_build() -> None:
    request = Request(user_input="book the cheapest", history=tool_rounds(4))
    ctx = BUILDER.build(plan(tool_full=1, tool_reduced=3), request)
    text = "\n".join(tool_messages(ctx.to_messages()))
    for n in range(4):
        for i in range(len(FLIGHTS)):
            assert f"HAT{n}{i:02d}" in text
    for price in (101, 106, 401, 406):
        assert str(price) in text
    assert "2024-05-20" in text


def test_consumed_result_is_reduced_on_the_next_turn() -> None:
    request = Request(user_input="and now?", history=tool_rounds(2, consumed=1))
    ctx = BUILDER.build(plan(tool_full=3), request)
    newest = tool_messages(ctx.to_messages())[-1]
    assert "key facts" in newest and "Seats are subject" not in newest
    assert any("marked consumed" in d.reason for d in ctx.report.decisions)


def test_consumed_flag_is_ignored_by_this_turn() -> None:
    turn = [call("t1", "search_flights"), result("t1", FLIGHTS, consumed=True)]
    ctx = BUILDER.build(BuildPlan.named("tool_heavy"), Request(user_input="go", turn=turn))
    assert "Seats are subject" in tool_messages(ctx.to_messages())[0]


def test_dropped_early_result_still_answers_its_call() -> None:
    request = Request(user_input="book", history=tool_rounds(3))
    ctx = BUILDER.build(plan(tool_full=1, tool_reduced=0, tool_early="drop"), request)
    messages = ctx.to_messages()  # validated: every call has its result
    shown = tool_messages(messages)
    assert shown[0].count("[earlier result of search_flights omitted]") == 1
    for index, message in enumerate(messages):
        if message.get("tool_calls"):
            assert messages[index + 1]["role"] == "tool"
            assert messages[index + 1]["tool_call_id"] == message["tool_calls"][0]["id"]
    assert any(d.reason.startswith("early tool result dropped") for d in ctx.report.decisions)


def test_tiers_make_more_history_fit() -> None:
    request = Request(user_input="book the cheapest", history=tool_rounds(12))
    small = (BuildPlan.builder("small").add("system").add("history", max_tokens=900)
             .add("user").budget(window=100_000).build())
    tiered = (BuildPlan.builder("small").add("system")
              .add("history", max_tokens=900, options={"tool_full": 1, "tool_reduced": 2})
              .add("user").budget(window=100_000).build())
    plain_count = len(tool_messages(BUILDER.build(small, request).to_messages()))
    tiered_count = len(tool_messages(BUILDER.build(tiered, request).to_messages()))
    assert tiered_count > plain_count


def test_tiers_follow_the_history_as_it_grows() -> None:
    history = tool_rounds(2)
    options = plan(tool_full=1, tool_reduced=0)
    first = tool_messages(BUILDER.build(options, Request(user_input="a",
                                                         history=history)).to_messages())
    history += tool_rounds(1)
    second = tool_messages(BUILDER.build(options, Request(user_input="b",
                                                          history=history)).to_messages())
    assert "Seats are subject" in first[1]
    assert "Earlier tool result" in second[1], "the once-newest result is now early"


def test_bad_tier_option_is_a_plan_error_when_the_plan_is_made() -> None:
    with pytest.raises(PlanError, match="history: option tool_early"):
        plan(tool_full=1, tool_early="forget")


def test_bad_tier_option_given_to_the_source_is_reported_not_ignored() -> None:
    """A plan changed after it loaded is checked again by the builder, against its source."""
    good = plan(tool_full=1)
    bad = tuple(replace(s, options=FrozenOptions({**s.options, "tool_early": "forget"}))
                if s.source == "history" else s for s in good.sources)
    with pytest.raises(PlanError, match="history: option tool_early"):
        BUILDER.build(replace(good, sources=bad), Request(user_input="x", history=tool_rounds(1)))


def test_compact_results_keep_null_and_empty_values() -> None:
    text = compact_tool_result("lookup", '{"code": 200, "error": null, "msg": "", "id": "A1"}')
    assert text is not None
    assert "error: null" in text and "msg: " in text and "id: A1" in text
    assert "code" not in text  # the success marker alone is dropped


def test_a_turn_left_out_whole_is_a_warning_not_only_decisions() -> None:
    # An agent that does not see the calls it made this turn makes them again, and again.
    tools = [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    turn = [{"role": "assistant", "content": None, "tool_calls": [{
                "id": "c1", "type": "function",
                "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1",
             "content": json.dumps({"rows": [{"id": i, "v": "x" * 40} for i in range(40)]})}]
    request = Request(user_input="find it", tools=tools, turn=turn)
    tight = ContextBuilder().build(
        BuildPlan.named("tool_heavy").with_budget(available_override=150), request)
    assert [m["role"] for m in tight.to_messages()] == ["system", "user"]
    assert any("none of this turn's 2 call and result message(s) fit" in w
               for w in tight.report.warnings)
    roomy = ContextBuilder().build(
        BuildPlan.named("tool_heavy").with_budget(available_override=2000), request)
    assert not any("this turn's" in w for w in roomy.report.warnings)


@pytest.mark.parametrize("plan_name", ["chat", "tool_heavy"])
def test_a_huge_newest_tool_result_leaves_the_older_rounds_that_fit_in_view(
        plan_name: str) -> None:
    """The result is cut to its share of the history grant; the rounds before it fill the rest.

    Reading used to stop at the huge result, so the short older rounds were never read and half
    of the grant stayed empty while the answer to the question sat in one of them.
    """
    history: list[dict[str, Any]] = []
    for n in range(10):
        history += [{"role": "user", "content": f"When does order R{n} ship?"},
                    {"role": "assistant", "content": f"Order R{n} ships on day {n}."}]
    history += [
        {"role": "user", "content": "Show the server logs"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "logs", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": "GET /health 200 in 3 ms from the load balancer\n" * 8000},
        {"role": "assistant", "content": "The logs are long."}]
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        BuildPlan.named(plan_name),
        Request(user_input="And order R2?", system="Be brief.", history=history))
    text = ctx.to_text()
    assert "Order R2 ships on day 2." in text
    assert all(f"Order R{n} ships" in text for n in range(10)), "they all fit beside the cut"
    unread = [d for d in ctx.report.decisions if d.source == "history" and d.key.endswith(".*")]
    assert not unread, unread


def _parallel_logs(results: int) -> list[dict[str, Any]]:
    """Ten short rounds, then one call block with ``results`` large results."""
    history: list[dict[str, Any]] = []
    for n in range(10):
        history += [{"role": "user", "content": f"When does order R{n} ship?"},
                    {"role": "assistant", "content": f"Order R{n} ships on day {n}."}]
    calls = [{"id": f"call_{j}", "type": "function",
              "function": {"name": "search_logs", "arguments": json.dumps({"part": j})}}
             for j in range(results)]
    history += [{"role": "user", "content": "Search the logs"},
                {"role": "assistant", "content": None, "tool_calls": calls}]
    history += [{"role": "tool", "tool_call_id": f"call_{j}",
                 "content": f"log part {j}: GET /health 200 in 3 ms\n" * 1500}
                for j in range(results)]
    return [*history, {"role": "assistant", "content": "Found it."}]


@pytest.mark.parametrize("plan_name", ["chat", "tool_heavy"])
@pytest.mark.parametrize("results", [2, 3])
def test_several_large_results_of_one_call_are_each_cut_and_older_rounds_stay(
        plan_name: str, results: int) -> None:
    """A parallel call's large results are cut alike, so the block fits its share.

    Only the longest result used to be cut: the block still did not fit, and it was dropped
    with every round before it.
    """
    history = _parallel_logs(results)
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        BuildPlan.named(plan_name).with_budget(available_override=1500),
        Request(user_input="What did the logs say?", system="Be brief.", history=history))
    text = ctx.to_text()
    assert all(f"Order R{n} ships" in text for n in range(10))
    assert all(f"log part {j}:" in text for j in range(results)), "each result keeps a cut"
    cut = [d for d in ctx.report.decisions if d.action == "truncated"]
    assert len(cut) == results


def test_this_turns_large_parallel_results_are_each_cut_not_left_to_a_digest() -> None:
    turn = _parallel_logs(2)[21:-1]
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        BuildPlan.named("tool_heavy").with_budget(available_override=3000),
        Request(user_input="What did the logs say?", system="Be brief.", turn=turn))
    text = ctx.to_text()
    assert "log part 0:" in text and "log part 1:" in text
    assert not ctx.report.warnings, ctx.report.warnings


def test_a_zero_item_share_reads_history_only_as_far_as_the_budget_reaches() -> None:
    history: list[dict[str, Any]] = []
    for n in range(3000):
        history += [{"role": "user", "content": f"Question {n}"},
                    {"role": "assistant", "content": f"Answer {n}"}]
    plan = BuildPlan.builder("p").add("history", options={"max_item_share": 0.0}).add(
        "user").budget(available_override=600).build()
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        plan, Request(user_input="Next?", history=history))
    per_message = [d for d in ctx.report.decisions if d.source == "history" and d.count == 1]
    assert len(per_message) < 200, "the messages never read are one decision, not one each"


@pytest.mark.parametrize("content, shown", [
    ({"note": "null", "coupon": None, "gift": "true", "paid": True},
     'note: "null", coupon: null, gift: "true", paid: true'),
    ({"passengers": ["Doe; Jane", "Roe"]}, 'passengers: ["Doe; Jane"; Roe]'),
    ({"success": True}, "success: true"),
    ({"status": "ok", "message": "ok"}, "status: ok, message: ok"),
    ({"": "VIP-1", "tier": 2}, '"": VIP-1, tier: 2'),
])
def test_compaction_never_shows_two_different_results_alike(content: Any, shown: str) -> None:
    """A string that reads as a literal is quoted, a list item holding the separator too, a
    result that is nothing but its success envelope keeps it, and an empty key is named."""
    assert compact_tool_result("t", json.dumps(content)) == f"Tool result (t): {shown}"
