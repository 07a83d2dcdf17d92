"""A stable-prefix build keeps the tools it showed in their place and their form.

Providers cache the tool list as the head of the prefix: a tool the set gains goes after the
ones shown before, and a shown tool keeps its bytes when the set grows over
``description_budget`` (``compact_descriptions: auto``).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

from contextwright import BuildPlan, ContextBuilder, FinalContext, Request
from contextwright.core.cache import Fingerprint


def tool(name: str, description: str, **parameters: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {
            key: {"type": "string", "description": text} for key, text in parameters.items()}}}}


# Long descriptions, so a set of two is under the budget below and a set of four is over it.
CATALOGUE = [
    tool("add_event", "Add an event to the calendar. Reminders are sent an hour before.",
         title="Event title. Shown in every reminder the user gets."),
    tool("get_weather", "Current weather of a city. Data from the national met office.",
         city="City name. Pinyin and local spellings are accepted as well."),
    tool("get_order", "Look up an order by its id. Returns items, totals and status.",
         order_id="The order id. Printed on the receipt and in the email."),
    tool("refund_order", "Refund an order that was returned. Money goes back in 5 days.",
         order_id="The order id. Printed on the receipt and in the email."),
    tool("save_memo", "Save a short memo for the user. Memos are kept for a year.",
         text="The memo text. Plain text; markdown is shown as written."),
]
INPUTS = ["Please refund order A-77", "what's the weather in Paris?",
          "save a memo: buy milk", "add an event tomorrow at nine", "thanks!"]


def relevant_plan(**options: Any) -> BuildPlan:
    base = BuildPlan.builder("tools").add("system").add("history").add("user")
    return base.add("tools", options={"select": "relevant", **options}).budget(
        window=100_000).build()


def schemas_json(ctx: FinalContext) -> list[str]:
    return [json.dumps(schema, sort_keys=True) for schema in ctx.tool_schemas]


def names(ctx: FinalContext) -> list[str]:
    return [schema["function"]["name"] for schema in ctx.tool_schemas]


def replay(plan: BuildPlan, *, through_json: bool = False) -> list[FinalContext]:
    builder, history, contexts = ContextBuilder(), [], []
    previous: FinalContext | Fingerprint | None = None
    for text in INPUTS:
        ctx = builder.build(plan, Request(user_input=text, tools=CATALOGUE,
                                          history=list(history)), previous=previous, cache=True)
        contexts.append(ctx)
        previous = Fingerprint.from_json(ctx.fingerprint.to_json()) if through_json else ctx
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    return contexts


def test_a_growing_tool_set_appends_and_shown_tools_keep_their_bytes() -> None:
    plan = relevant_plan(compact_descriptions="auto", description_budget=160)
    for through_json in (False, True):  # a session store keeps the fingerprint as JSON
        contexts = replay(plan, through_json=through_json)
        sizes = [len(ctx.tool_schemas) for ctx in contexts]
        assert sizes == sorted(sizes) and sizes[-1] > sizes[0] >= 2
        for before, after in itertools.pairwise(contexts):
            assert schemas_json(after)[:len(before.tool_schemas)] == schemas_json(before)
        assert contexts[-1].report.cache.prefix_tokens > 0  # type: ignore[union-attr]


def test_without_a_previous_build_the_set_is_compacted_and_in_the_given_order() -> None:
    plan = relevant_plan(compact_descriptions="auto", description_budget=160)
    builder = ContextBuilder()
    grown = replay(plan)[-2]
    fresh = builder.build(plan, Request(user_input=INPUTS[3], tools=CATALOGUE,
                                        history=[]), cache=True)
    order = [schema["function"]["name"] for schema in CATALOGUE]
    assert names(fresh) == sorted(names(fresh), key=order.index)
    # The grown set is over the budget: the tools it gained are compacted, as a fresh build's
    # are; the two it began with were shown whole and stay whole.
    full = {schema["function"]["name"]: schema["function"]["description"]
            for schema in CATALOGUE}
    shown = {schema["function"]["name"]: schema["function"]["description"]
             for schema in grown.tool_schemas}
    assert [name for name in names(grown) if shown[name] == full[name]] == [
        "get_order", "refund_order"]
    assert all(shown[name] != full[name] for name in names(grown)[2:])


def test_the_keep_option_shows_kept_tools_first_in_its_order_and_its_forms() -> None:
    plan = relevant_plan(keep=["save_memo", "get_weather"], keep_compacted=["get_weather"],
                         compact_descriptions=False)
    ctx = ContextBuilder().build(plan, Request(user_input="refund order A-77", tools=CATALOGUE))
    assert names(ctx) == ["save_memo", "get_weather", "get_order", "refund_order"]
    by_name = {schema["function"]["name"]: schema["function"] for schema in ctx.tool_schemas}
    assert by_name["get_weather"]["description"] == "Current weather of a city."
    assert by_name["save_memo"]["description"] == CATALOGUE[4]["function"]["description"]


def test_a_fingerprint_records_the_compacted_tools_and_reads_back() -> None:
    plan = relevant_plan(compact_descriptions=True)
    ctx = ContextBuilder().build(plan, Request(user_input="weather in Paris", tools=CATALOGUE),
                                 cache=True)
    print_ = ctx.fingerprint
    assert print_.compacted == {"tools": ("tools.get_weather",)}
    assert Fingerprint.from_json(print_.to_json()) == print_
    older = {key: value for key, value in print_.to_dict().items() if key != "compacted"}
    assert Fingerprint.from_dict(older) == replace(print_, compacted={})
