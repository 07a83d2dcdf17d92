"""Dynamic tool loading: relevant tools, always-include, already-called, compaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, ContextManager, InvalidInputError, Request
from contextwright.session import SessionKey
from contextwright.sources.tools import (
    LexicalToolScorer,
    ToolDefinitionSource,
    ToolScorer,
    compact_schema,
    first_sentence,
)


def tool(name: str, description: str, **parameters: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {
            key: {"type": "string", "description": text} for key, text in parameters.items()}}}}


WEATHER = tool("get_weather", "Current weather and forecast of a city. Data from the met office.",
               city="City name, in any language. Accepts pinyin as well.")
MEMO = tool("save_memo", "Save a short note for the user to read later.", text="The note.")
ORDER = tool("get_order", "Look up an order by its id.", order_id="The order id.")
REFUND = tool("refund_order", "Refund an order that was returned.", order_id="The order id.")
CALENDAR = tool("add_event", "Add an event to the user's calendar.", title="Event title.",
                when="Start time, ISO 8601.")
TOOLS = [WEATHER, MEMO, ORDER, REFUND, CALENDAR]
BUILDER = ContextBuilder()


def plan(**options: Any) -> BuildPlan:
    return (BuildPlan.builder("tools").add("system").add("tools", options=options)
            .add("history").add("user").budget(window=100_000).build())


def offered(ctx: Any) -> list[str]:
    return [schema["function"]["name"] for schema in ctx.tool_schemas]


def left_out(ctx: Any) -> dict[str, str]:
    return {d.key: d.reason for d in ctx.report.decisions
            if d.source == "tools" and d.action == "dropped"}


def test_only_relevant_tools_are_loaded_and_the_rest_reported() -> None:
    ctx = BUILDER.build(plan(select="relevant"),
                        Request(user_input="Please refund order A-77", tools=TOOLS))
    assert set(offered(ctx)) == {"get_order", "refund_order"}
    reasons = left_out(ctx)
    assert set(reasons) == {"tools.get_weather", "tools.save_memo", "tools.add_event"}
    assert all("not relevant" in reason for reason in reasons.values())


def test_chinese_input_finds_english_tools() -> None:
    ctx = BUILDER.build(plan(select="relevant"),
                        Request(user_input="今天上海天气怎么样，顺便帮我记下来", tools=TOOLS))
    assert set(offered(ctx)) == {"get_weather", "save_memo"}


def test_chinese_descriptions_match_chinese_input() -> None:
    stock = tool("quote", "查询股票的实时价格", symbol="股票代码")
    scores = LexicalToolScorer().score("帮我看看茅台股票价格", [stock, WEATHER])
    assert scores[0] > 0 and scores[1] == 0


def test_always_include_and_already_called_tools_stay() -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "add lunch"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function",
                    "function": {"name": "add_event", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    ctx = BUILDER.build(plan(select="relevant", always_include=["save_memo"]),
                        Request(user_input="what's the weather in Paris?", tools=TOOLS,
                                history=history))
    assert offered(ctx) == ["get_weather", "save_memo", "add_event"], "in the given order"


def test_max_tools_keeps_the_best_ranked() -> None:
    ctx = BUILDER.build(plan(select="relevant", max_tools=1),
                        Request(user_input="refund my order", tools=TOOLS))
    assert offered(ctx) == ["refund_order"]
    assert "over max_tools" in left_out(ctx)["tools.get_order"]


MANY = [tool(f"tool_{i}", f"Does thing number {i}.") for i in range(200)]


@pytest.mark.parametrize("options", [{}, {"max_tools": 150}, {"select": "relevant"}])
def test_at_most_128_tools_are_offered_the_best_ranked_and_the_rest_reported(
        options: dict[str, Any]) -> None:
    ctx = BUILDER.build(plan(**options, always_include="tool_199"),
                        Request(user_input="use tool_7 please", tools=MANY))
    names = offered(ctx)
    assert len(names) == 128 and {"tool_199", "tool_7"} <= set(names)
    reasons = left_out(ctx)
    assert len(reasons) == 72 and set(reasons.values()) == {
        "over the 128 tools OpenAI takes in a request; ranked lower"}


def test_max_tools_under_128_still_says_max_tools() -> None:
    ctx = BUILDER.build(plan(max_tools=100), Request(user_input="use tool_7", tools=MANY))
    assert len(offered(ctx)) == 100 and "tool_7" in offered(ctx)
    assert all("over max_tools (100)" in reason for reason in left_out(ctx).values())


def test_the_openai_renderings_refuse_more_than_128_tools_from_any_source() -> None:
    from contextwright.core.items import Message
    from contextwright.core.providers import CallSettings, openai_chat, openai_responses

    messages, settings = [Message(role="user", content="hi")], CallSettings(model="m")
    with pytest.raises(InvalidInputError, match="129 tools; OpenAI takes at most 128"):
        openai_chat(messages, MANY[:129], settings)
    with pytest.raises(InvalidInputError, match="129 tools; OpenAI takes at most 128"):
        openai_responses("", messages, MANY[:129], settings)
    assert len(openai_chat(messages, MANY[:128], settings).body["tools"]) == 128


def test_no_match_offers_every_tool_rather_than_none() -> None:
    ctx = BUILDER.build(plan(select="relevant"), Request(user_input="hello", tools=TOOLS))
    assert len(offered(ctx)) == len(TOOLS)


def test_default_offers_every_tool_as_before() -> None:
    ctx = BUILDER.build(plan(), Request(user_input="refund my order", tools=TOOLS))
    assert offered(ctx) == [t["function"]["name"] for t in TOOLS]
    assert not left_out(ctx)


def test_compacted_descriptions_keep_names_types_and_the_full_schema_in_the_report() -> None:
    ctx = BUILDER.build(plan(compact_descriptions=True), Request(user_input="weather?",
                                                                 tools=[WEATHER]))
    (schema,) = ctx.tool_schemas
    function = schema["function"]
    assert function["description"] == "Current weather and forecast of a city."
    assert function["parameters"]["properties"]["city"] == {
        "type": "string", "description": "City name, in any language."}
    (decision,) = [d for d in ctx.report.decisions if d.action == "compacted"]
    assert "met office" in (decision.detail or "")
    assert decision.tokens_after < decision.tokens_before


def test_auto_compaction_starts_over_the_description_budget() -> None:
    request = Request(user_input="weather?", tools=TOOLS)
    roomy = BUILDER.build(plan(), request)
    tight = BUILDER.build(plan(description_budget=50), request)
    assert roomy.tool_schemas[0] == WEATHER
    assert tight.tool_schemas[0] == compact_schema(WEATHER)


def test_a_scorer_plugs_in() -> None:
    class Fixed:
        def score(self, query: str, schemas: Sequence[Mapping[str, Any]]) -> list[float]:
            return [1.0 if s["function"]["name"] == "add_event" else 0.0 for s in schemas]

    scorer: ToolScorer = Fixed()
    builder = ContextBuilder(sources=[ToolDefinitionSource(scorer=scorer)])
    ctx = builder.build(plan(select="relevant"), Request(user_input="anything", tools=TOOLS))
    assert offered(ctx) == ["add_event"]


def test_tools_under_budget_pressure_drop_the_least_relevant() -> None:
    small = (BuildPlan.builder("tools").add("system").add("tools", max_tokens=80)
             .add("user").budget(window=100_000).build())
    ctx = BUILDER.build(small, Request(user_input="refund my order", tools=TOOLS))
    assert "refund_order" in offered(ctx)
    assert "get_weather" not in offered(ctx)


@pytest.mark.parametrize(("description", "first"), [
    ("Gets the weather, e.g. rain or sun. Call it per city.",
     "Gets the weather, e.g. rain or sun."),
    ("Books flights, hotels, etc. Needs a date.", "Books flights, hotels, etc."),
    ("查询城市天气。需要城市名。", "查询城市天气。"),
    ("Saves a memo (i.e. a note) for later! Returns its id.",
     "Saves a memo (i.e. a note) for later!"),
])
def test_a_first_sentence_ends_at_a_real_sentence_end(description: str, first: str) -> None:
    assert first_sentence(description, 200) == first


def test_two_tools_with_one_name_are_refused_by_builds_with_and_without_previous() -> None:
    # Two toolkits merged: a provider takes each name once, and which of the two a call
    # means cannot be told, so neither is chosen silently.
    tool = {"type": "function", "function": {"name": "f", "description": "d",
                                             "parameters": {"type": "object", "properties": {}}}}
    builder, plan = ContextBuilder(), BuildPlan.named("tool_heavy")
    request = Request(user_input="hi", tools=[tool, tool])
    for previous in (None, builder.build(plan, Request(user_input="hi", tools=[tool])).fingerprint):
        with pytest.raises(InvalidInputError, match=r"tools\[1\] repeats the name 'f'"):
            builder.build(plan, request, previous=previous, cache=True)
    manager = ContextManager(background=False)
    with pytest.raises(InvalidInputError, match="repeats the name"):
        manager.prepare("u", "s", "hi", tools=[tool, tool])
    assert manager.store.count(SessionKey(user_id="u", session_id="s")) == 0  # nothing stored


@pytest.mark.parametrize("name", ["bad name!", "x" * 65, "天气", "get.weather"])
def test_a_tool_named_as_no_provider_takes_is_refused_naming_it_and_the_rule(name: str) -> None:
    schema = tool(name, "Weather of a city.")
    rule = (r"tools\[1\]: the tool name '.*'(… \(65 characters\))? must be 1 to 64 ASCII "
            "letters, digits, '_' or '-'")
    with pytest.raises(InvalidInputError, match=rule):
        BUILDER.build(BuildPlan.named("tool_heavy"),
                      Request(user_input="hi", tools=[WEATHER, schema]))
    manager = ContextManager(background=False)
    with pytest.raises(InvalidInputError, match=rule):
        manager.prepare("u", "s", "hi", tools=[WEATHER, schema])
    assert manager.store.count(SessionKey(user_id="u", session_id="s")) == 0  # nothing stored


def test_names_every_provider_takes_are_offered() -> None:
    names = ["x" * 64, "get-weather_2", "A"]
    ctx = BUILDER.build(plan(), Request(user_input="hi", tools=[tool(n, "d.") for n in names]))
    assert offered(ctx) == names


def test_every_rendering_refuses_a_tool_name_no_provider_takes_from_any_source() -> None:
    from contextwright.core.items import Message
    from contextwright.core.providers import (
        CallSettings,
        anthropic,
        openai_chat,
        openai_responses,
    )

    messages, settings = [Message(role="user", content="hi")], CallSettings(max_output_tokens=9)
    schemas = [WEATHER, tool("天气", "Weather.")]
    for render in (lambda: openai_chat(messages, schemas, settings),
                   lambda: openai_responses("", messages, schemas, settings),
                   lambda: anthropic("", messages, [None], [False], schemas, settings)):
        with pytest.raises(InvalidInputError, match=r"tools\[1\]: the tool name '天气'"):
            render()
