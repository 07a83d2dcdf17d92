"""Provider requests: every rendering validates against the official SDK types and is accepted,
sent through the official SDKs, by a local server that enforces each API's documented rules."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from contextwright import BuildPlan, ContextBuilder, ContextManager, Document, Request, select_plan
from contextwright.core.final import FinalContext
from contextwright.core.providers import PROVIDER_FORMATS
from contextwright.core.validate import validate_anthropic
from contextwright.errors import BudgetError, InvalidInputError, ValidationError
from fakes.provider_server import ProviderServer

SDK_TYPES: dict[str, TypeAdapter[Any]] = {
    "openai": TypeAdapter(CompletionCreateParamsNonStreaming),
    "openai-responses": TypeAdapter(ResponseCreateParamsNonStreaming),
    "anthropic": TypeAdapter(MessageCreateParamsNonStreaming),
}
MODELS = {"openai": "gpt-4o", "openai-responses": "gpt-4o", "anthropic": "claude-sonnet-4-5"}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
NO_ARGS = {"type": "function", "function": {"name": "list_memos", "parameters": {}}}
BARE = {"type": "function", "function": {"name": "ping"}}


def call(call_id: str, name: str = "get_weather", **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


HISTORY_WITH_CALLS = [
    {"role": "user", "content": "What is the weather in Hangzhou?"},
    call("c_old", city="Hangzhou"), result("c_old", '{"weather": "rain", "temp": 18}'),
    {"role": "assistant", "content": "It is raining, 18°C."},
]
DOCS = [Document(id="refund", text="Refunds within 15 days of delivery.", source="policy.md"),
        Document(id="ship", text="Orders ship in 2 days.", source="shipping.md §2")]

SUITE: dict[str, Request] = {
    "plain question": Request(user_input="hi"),
    "no system, chat": Request(user_input="and now?", history=[
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]),
    "empty assistant in history": Request(user_input="again?", system="Be brief.", history=[
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": ""},
        {"role": "user", "content": "are you there?"},
        {"role": "assistant", "content": "yes "}]),
    "tools with empty parameters": Request(user_input="list my memos", tools=[NO_ARGS, BARE],
                                           system="You keep memos."),
    "agent turn": Request(user_input="Weather in Shanghai, and save it", system="Agent.",
                          tools=[WEATHER], history=HISTORY_WITH_CALLS,
                          turn=[call("c1", city="上海"), result("c1", '{"weather": "多云"}')]),
    "history calls without tools": Request(user_input="and tomorrow?",
                                           history=HISTORY_WITH_CALLS),
    "documents only": Request(user_input="How long do refunds take?", documents=DOCS),
    "documents and tools": Request(user_input="Refund my order", tools=[WEATHER],
                                   documents=DOCS, system="Support agent."),
    "history starts with the assistant": Request(user_input="ok", history=[
        {"role": "assistant", "content": "Welcome back!"}]),
    "blank system prompt": Request(user_input="hi", system="\n"),
    "blank user input": Request(user_input=" ", system="Be terse."),
    "named speakers": Request(user_input="and you?", history=[
        {"role": "user", "content": "I am fine", "name": "alice"},
        {"role": "assistant", "content": "Good.", "name": "support_bot"},
        {"role": "user", "content": "Me too", "name": "Bob Smith"},
        {"role": "assistant", "content": "Great."}]),
    "blank user input after a round": Request(user_input="\n", history=[
        {"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."}]),
    "a failed tool call": Request(user_input="Try Beijing then", tools=[WEATHER], history=[
        {"role": "user", "content": "Weather in Atlantis?"}, call("c_bad", city="Atlantis"),
        result("c_bad", "(tool error) no such city: Atlantis"),
        {"role": "assistant", "content": "I could not find Atlantis."}],
        turn=[call("c2", city="Beijing"), result("c2", '{"weather": "sunny"}')]),
    "an agent turn with thinking": Request(
        user_input="Weather in Paris and Rome?", tools=[WEATHER], system="Agent.",
        history=[{"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "Hello!", "thinking_blocks": [
                     {"type": "thinking", "thinking": "Greet back.", "signature": "c2lnMA=="}]}],
        turn=[{**call("toolu_1", city="Paris"), "thinking_blocks": [
                  {"type": "thinking", "thinking": "Paris first, then Rome.",
                   "signature": "c2lnMQ=="},
                  {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}]},
              result("toolu_1", "sunny"), call("toolu_2", city="Rome"),
              result("toolu_2", "rain")]),
}


def contexts() -> Iterator[tuple[str, FinalContext]]:
    builder = ContextBuilder()
    for name, request in SUITE.items():
        yield f"{name} (auto plan)", builder.build(select_plan(request), request)
        for plan in ("chat", "tool_heavy", "rag_qa", "simple_qa"):
            yield f"{name} ({plan})", builder.build(BuildPlan.named(plan), request)


CONTEXTS = list(contexts())


def consume(value: Any) -> Any:
    """Walk a validated value; the SDK types' iterables validate only when read."""
    if isinstance(value, dict):
        return {k: consume(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [consume(v) for v in value]
    return value


def check_sdk_type(fmt: str, body: dict[str, Any]) -> None:
    consume(SDK_TYPES[fmt].validate_python(body))


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def send(server: ProviderServer, fmt: str, body: dict[str, Any]) -> None:
    """Send ``body`` through the official SDK; raises the SDK's error on a rejection."""
    if fmt == "anthropic":
        client = anthropic.Anthropic(base_url=server.origin, api_key="test", max_retries=0)
        client.messages.create(**body)
        return
    oa = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    if fmt == "openai":
        oa.chat.completions.create(**body)
    else:
        oa.responses.create(**body)


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
def test_every_rendering_is_of_the_sdk_types_and_accepted_through_the_sdk(
        fmt: str, server: ProviderServer) -> None:
    for name, ctx in CONTEXTS:
        body = ctx.to_request(fmt, model=MODELS[fmt])  # type: ignore[arg-type]
        check_sdk_type(fmt, body)
        try:
            send(server, fmt, body)
        except (openai.BadRequestError, anthropic.BadRequestError) as exc:
            pytest.fail(f"{name}: {fmt} rejected it: {exc}")


def build(request: Request, plan: str = "tool_heavy") -> FinalContext:
    return ContextBuilder().build(BuildPlan.named(plan), request)


def test_a_failed_tool_result_is_flagged_as_an_error_for_anthropic() -> None:
    body = build(SUITE["a failed tool call"]).to_request("anthropic")
    results = {block["tool_use_id"]: block for message in body["messages"]
               if isinstance(message["content"], list)
               for block in message["content"] if block["type"] == "tool_result"}
    assert set(results) == {"c_bad", "c2"}
    assert results["c_bad"]["is_error"] is True and "no such city" in results["c_bad"]["content"]
    assert "is_error" not in results["c2"]


def test_anthropic_request_has_model_and_max_tokens_from_the_reserved_output() -> None:
    body = build(SUITE["plain question"], "simple_qa").to_request("anthropic",
                                                                  model="claude-sonnet-4-5")
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 1024
    plan = BuildPlan.named("simple_qa").with_budget(reserved_reasoning=512)
    ctx = ContextBuilder().build(plan, SUITE["plain question"])
    assert ctx.to_request("anthropic")["max_tokens"] == 1536
    assert ctx.to_request("openai")["max_completion_tokens"] == 1536
    assert ctx.to_request("openai-responses")["max_output_tokens"] == 1536
    assert ctx.to_request("anthropic", max_tokens=50)["max_tokens"] == 50


def test_the_output_limit_may_go_in_max_tokens_for_compatible_servers(
        server: ProviderServer) -> None:
    ctx = build(SUITE["plain question"], "simple_qa")
    body = ctx.to_request("openai", model="llama3", max_tokens_field="max_tokens")
    assert body["max_tokens"] == 1024 and "max_completion_tokens" not in body
    check_sdk_type("openai", body)
    send(server, "openai", body)
    assert server.received[-1].body["max_tokens"] == 1024 and server.received[-1].status == 200
    with pytest.raises(ValueError, match="max_tokens_field"):
        ctx.to_request("openai", max_tokens_field="n_predict")  # type: ignore[arg-type]


def test_a_plan_without_reserved_output_needs_max_tokens_for_anthropic() -> None:
    plan = BuildPlan.named("simple_qa").with_budget(reserved_output=0)
    ctx = ContextBuilder().build(plan, SUITE["plain question"])
    with pytest.raises(InvalidInputError, match="max_tokens"):
        ctx.to_request("anthropic")
    assert ctx.to_request("anthropic", max_tokens=100)["max_tokens"] == 100
    assert ctx.to_messages("anthropic")  # the messages alone need no max_tokens
    assert "max_completion_tokens" not in ctx.to_request("openai")


def test_empty_tool_parameters_become_an_object_schema_everywhere() -> None:
    ctx = build(SUITE["tools with empty parameters"])
    schemas = [t["input_schema"] for t in ctx.to_request("anthropic")["tools"]]
    assert schemas == [{"type": "object"}, {"type": "object", "properties": {}}]
    responses = [t["parameters"] for t in ctx.to_request("openai-responses")["tools"]]
    assert all(p["type"] == "object" for p in responses)


@pytest.mark.parametrize(("function", "message"), [
    ({"name": "f", "parameters": 5}, r"tools\[0\]\.function\.parameters must be a JSON schema"),
    ({"name": "f", "parameters": {"type": "string"}},
     r"tools\[0\]\.function\.parameters must be a schema of type object"),
    ({"name": "f", "paramters": {"type": "object"}},
     r"tools\[0\]\.function: unknown field 'paramters'"),
    ({"name": "f", "description": 5}, r"tools\[0\]\.function\.description must be a string"),
    ({"name": "f", "strict": "yes"}, r"tools\[0\]\.function\.strict must be true or false"),
])
def test_a_bad_tool_definition_is_refused_the_same_for_every_format(
        function: dict[str, Any], message: str) -> None:
    # OpenAI used to get it as given while the others refused it (or, misspelt, sent no
    # arguments at all): one rule, checked when the build reads the tools.
    request = Request(user_input="hi", tools=[{"type": "function", "function": function}])
    with pytest.raises(InvalidInputError, match=message):
        build(request)


def test_documents_are_native_search_results_for_anthropic_and_no_made_up_tool() -> None:
    for plan in ("rag_qa", "doc_analysis"):
        ctx = build(SUITE["documents only"], plan)
        body = ctx.to_request("anthropic")
        assert "tools" not in body
        blocks = [b for m in body["messages"] for b in m["content"]]
        results = [b for b in blocks if b["type"] == "search_result"]
        assert {r["title"] for r in results} == {"policy.md", "shipping.md §2"}
        assert not [b for b in blocks if b["type"] in ("tool_use", "tool_result")]
        for fmt in ("openai", "openai-responses"):
            text = json.dumps(ctx.to_request(fmt), ensure_ascii=False)  # type: ignore[arg-type]
            assert "retrieve_documents" not in text and "tool_calls" not in text
            assert "function_call" not in text and "15 days" in text


def test_an_empty_assistant_message_is_left_out_for_anthropic_and_said() -> None:
    ctx = build(SUITE["empty assistant in history"], "chat")
    body = ctx.to_request("anthropic")
    assert all(m["content"] for m in body["messages"])
    assert any("empty assistant message" in n for n in ctx.rendering_notes("anthropic"))
    assert ctx.to_request("openai")["messages"]  # OpenAI takes an empty assistant text


def test_no_system_prompt_means_no_system_field() -> None:
    body = build(SUITE["no system, chat"], "chat").to_request("anthropic")
    assert "system" not in body
    assert "instructions" not in build(SUITE["no system, chat"], "chat").to_request(
        "openai-responses")


def test_our_validator_refuses_empty_anthropic_content() -> None:
    with pytest.raises(ValidationError, match="empty content"):
        validate_anthropic([{"role": "user", "content": []}])
    with pytest.raises(ValidationError, match="blank text"):
        validate_anthropic([{"role": "user", "content": [{"type": "text", "text": " "}]}])


def test_tool_choice_and_parallel_calls_are_translated_per_provider() -> None:
    ctx = build(SUITE["agent turn"])
    chosen = {"type": "function", "function": {"name": "get_weather"}}
    body = ctx.to_request("openai", tool_choice=chosen, parallel_tool_calls=False)
    assert body["tool_choice"] == chosen and body["parallel_tool_calls"] is False
    body = ctx.to_request("anthropic", tool_choice="required", parallel_tool_calls=False)
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    body = ctx.to_request("anthropic", tool_choice="get_weather")
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    body = ctx.to_request("openai-responses", tool_choice=chosen)
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    with pytest.raises(InvalidInputError, match="not among the tools"):
        ctx.to_request("anthropic", tool_choice="send_email")


def test_tool_settings_that_mean_nothing_without_tools_are_not_sent() -> None:
    ctx = build(SUITE["plain question"], "simple_qa")
    for fmt in PROVIDER_FORMATS:
        body = ctx.to_request(fmt, tool_choice="auto", parallel_tool_calls=True)
        assert "tool_choice" not in body and "parallel_tool_calls" not in body
    assert ctx.rendering_notes("openai") == []
    with pytest.raises(InvalidInputError, match="needs tools"):
        ctx.to_request("anthropic", tool_choice="required")


def test_prepare_without_tools_after_tool_calls_is_accepted_by_anthropic(
        server: ProviderServer) -> None:
    manager = ContextManager()
    manager.prepare("u", "s", "Weather in Paris?", tools=[WEATHER])
    manager.record("u", "s", assistant=call("c9", city="Paris"),
                   tool_results=[result("c9", '{"weather": "sun"}')])
    prepared = manager.prepare("u", "s", None)  # the agent loop continues without tools=
    body = prepared.to_request("anthropic", model=MODELS["anthropic"])
    check_sdk_type("anthropic", body)
    send(server, "anthropic", body)
    text = json.dumps(body, ensure_ascii=False)
    assert "get_weather" in text and "sun" in text  # shown, as text, not lost


GOOD_ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5", "max_tokens": 64,
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}


@pytest.mark.parametrize(("change", "rule"), [
    ({"max_tokens": None}, "max_tokens"),
    ({"system": ""}, "system"),
    ({"messages": [{"role": "user", "content": []}]}, "non-empty content"),
    ({"tools": [{"name": "f", "input_schema": {}}]}, "input_schema"),
    ({"messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": "sun"}]}]}, "must define tools"),
    ({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 1024},
      "tools": [{"name": "f", "input_schema": {"type": "object"}}], "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": "sun"}]}]}, "must start with a thinking block"),
    ({"messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me see."},
            {"type": "thinking", "thinking": "hm", "signature": "c2ln"}]},
        {"role": "user", "content": "and?"}]}, "must come first"),
])
def test_the_local_server_rejects_what_the_api_rejects(change: dict[str, Any], rule: str,
                                                        server: ProviderServer) -> None:
    """The renderings used to break these rules; the server must catch each of them."""
    send(server, "anthropic", GOOD_ANTHROPIC)
    body = {k: v for k, v in {**GOOD_ANTHROPIC, **change}.items() if v is not None}
    if "max_tokens" not in body:  # the SDK itself refuses a call without it
        with pytest.raises(TypeError):
            send(server, "anthropic", body)
        return
    with pytest.raises(anthropic.BadRequestError, match=rule):
        send(server, "anthropic", body)


REUSED_IDS = [
    {"role": "user", "content": "Weather in Paris?"},
    call("call_0", city="Paris"), result("call_0", "sun"),
    {"role": "assistant", "content": "Sunny."},
    {"role": "user", "content": "And Rome?"},
    call("functions.get_weather:0", city="Rome"), result("functions.get_weather:0", "rain"),
    {"role": "assistant", "content": "Rainy."},
    {"role": "user", "content": "And Oslo?"},
    call("call_0", city="Oslo"), result("call_0", "snow"),
    {"role": "assistant", "content": "Snowy."},
]


def test_reused_and_odd_call_ids_are_renamed_and_results_follow(server: ProviderServer) -> None:
    ctx = build(Request(user_input="Thanks", tools=[WEATHER], history=REUSED_IDS))
    body = ctx.to_request("anthropic", model=MODELS["anthropic"])
    blocks = [b for m in body["messages"] for b in m["content"]]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    assert len(uses) == len(set(uses)) == 3 and all(":" not in i for i in uses)
    assert [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"] == uses
    send(server, "anthropic", body)
    responses = ctx.to_request("openai-responses", model="gpt-4o")
    calls = [i["call_id"] for i in responses["input"] if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in responses["input"]
               if i.get("type") == "function_call_output"]
    assert calls == outputs and len(set(calls)) == 3
    send(server, "openai-responses", responses)
    assert any("renamed" in note for note in ctx.rendering_notes("anthropic"))


GATEWAY_ID = "portkey-6aa6db90-1b84-4155-9f32-f658c97d6b1b"  # 44 characters
LONG_ID = "call_4498671d257346d4baa6f58c1dbb__thought__ZTI0ODMwYTctNWNkNi00MmZlLTk5OGItZWU1"
LONG_IDS = [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": LONG_ID + "A", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": LONG_ID + "B", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
    result(LONG_ID + "A", "sun"), result(LONG_ID + "B", "rain"),
    {"role": "assistant", "content": "Sunny and rainy."},
    {"role": "user", "content": "And Oslo?"},
    call(GATEWAY_ID, city="Oslo"), result(GATEWAY_ID, "snow"),
    {"role": "assistant", "content": "Snowy."},
]


def chat_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(call ids, result ids) of a Chat Completions body, in order."""
    messages = body["messages"]
    return ([c["id"] for m in messages for c in m.get("tool_calls") or []],
            [m["tool_call_id"] for m in messages if m["role"] == "tool"])


def responses_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(call ids, output ids) of a Responses body, in order."""
    items = body["input"]
    return ([i["call_id"] for i in items if i.get("type") == "function_call"],
            [i["call_id"] for i in items if i.get("type") == "function_call_output"])


@pytest.mark.parametrize(("fmt", "limit", "ids_of"), [("openai", 40, chat_ids),
                                                      ("openai-responses", 64, responses_ids)])
def test_over_long_call_ids_are_shortened_alike_and_results_follow(
        fmt: str, limit: int, ids_of: Any, server: ProviderServer) -> None:
    ctx = build(Request(user_input="Thanks", tools=[WEATHER], history=LONG_IDS))
    body = ctx.to_request(fmt, model=MODELS[fmt])  # type: ignore[arg-type]
    calls, results = ids_of(body)
    assert calls == results and len(set(calls)) == 3  # two ids sharing a long start stay apart
    assert all(len(i) <= limit for i in calls)
    assert calls[0].startswith("call_4498671d") and calls[0] != LONG_ID[:limit]
    assert ids_of(ctx.to_request(fmt, model=MODELS[fmt])) == (calls, results)  # the same again
    assert any(f"renamed: longer than the API takes ({limit} characters)" in note
               for note in ctx.rendering_notes(fmt))  # type: ignore[arg-type]
    send(server, fmt, body)


def test_chat_keeps_reused_and_odd_call_ids_it_takes() -> None:
    ctx = build(Request(user_input="Thanks", tools=[WEATHER], history=REUSED_IDS))
    assert chat_ids(ctx.to_request("openai")) == (["call_0", "functions.get_weather:0",
                                                   "call_0"],) * 2
    assert not ctx.rendering_notes("openai")


def test_long_call_ids_go_to_anthropic_as_they_are(server: ProviderServer) -> None:
    ctx = build(Request(user_input="Thanks", tools=[WEATHER], history=LONG_IDS))
    body = ctx.to_request("anthropic", model=MODELS["anthropic"])
    uses = [b["id"] for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert uses == [LONG_ID + "A", LONG_ID + "B", GATEWAY_ID]  # no length limit is documented
    send(server, "anthropic", body)


def test_a_shortened_id_never_takes_another_calls_id() -> None:
    from contextwright.core.items import parse_message
    from contextwright.core.providers import CHAT_IDS, CallIds, shortened_id

    long_id = "x" * 50
    taken = shortened_id(long_id, 40)  # a caller's id that is what the long one shortens to
    message = parse_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in (long_id, taken)]}, "m")
    ids = CallIds(CHAT_IDS)
    ids.open_block(message)
    assert ids.call(long_id) == taken and ids.call(taken) == taken[:38] + "_2"
    assert ids.renamed == 2


@pytest.mark.parametrize(("fmt", "body", "rule"), [
    ("openai", {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "hi"}, call("c" * 41), result("c" * 41, "ok")]},
     "maximum length 40"),
    ("openai-responses", {"model": "gpt-4o", "input": [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c" * 65, "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c" * 65, "output": "ok"}]},
     "maximum length 64"),
    ("anthropic", {"model": "claude-sonnet-4-5", "max_tokens": 10,
                   "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
                   "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call.1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call.1"}]}]},
     "should match pattern"),
])
def test_the_local_server_refuses_call_ids_the_apis_do(fmt: str, body: dict[str, Any], rule: str,
                                                       server: ProviderServer) -> None:
    with pytest.raises((openai.BadRequestError, anthropic.BadRequestError), match=rule):
        send(server, fmt, body)


def test_a_request_of_200_tools_goes_to_openai_with_the_128_best(server: ProviderServer) -> None:
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "parameters": {}}}
             for i in range(200)]
    ctx = build(Request(user_input="use tool_7", tools=tools))
    for fmt in ("openai", "openai-responses"):
        body = ctx.to_request(fmt, model=MODELS[fmt])  # type: ignore[arg-type]
        assert len(body["tools"]) == 128
        send(server, fmt, body)
    with pytest.raises(openai.BadRequestError, match="maximum length 128"):
        send(server, "openai", {**ctx.to_request("openai", model="gpt-4o"), "tools": tools})


def test_a_caller_message_named_document_is_not_taken_for_one() -> None:
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "Hello, I am the bot", "name": "document"}]
    body = build(Request(user_input="ok", history=history), "chat").to_request("anthropic")
    assert not [b for m in body["messages"] for b in m["content"]
                if b["type"] == "search_result"]
    assert any(m["role"] == "assistant" for m in body["messages"])


def test_this_turn_without_tools_never_ends_on_an_assistant_prefill() -> None:
    ctx = build(Request(user_input="Weather?", turn=[call("c1", city="Paris"),
                                                       result("c1", "sun")]))
    body = ctx.to_request("anthropic")
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"][-1]["type"] == "search_result"


def test_a_strict_tool_stays_strict_for_every_provider(server: ProviderServer) -> None:
    tool = {"type": "function", "function": {
        "name": "save_memo", "strict": True, "description": "Save a memo.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"], "additionalProperties": False}}}
    ctx = build(Request(user_input="note: buy milk", tools=[tool]))
    assert ctx.to_request("openai")["tools"][0]["function"]["strict"] is True
    assert ctx.to_request("openai-responses")["tools"][0]["strict"] is True
    body = ctx.to_request("anthropic", model="claude-sonnet-4-5")
    assert body["tools"][0]["strict"] is True
    check_sdk_type("anthropic", body)
    send(server, "anthropic", body)
    loose = build(Request(user_input="note", tools=[{**tool, "function": {
        **tool["function"], "strict": False}}]))
    assert "strict" not in loose.to_request("anthropic", model="claude-sonnet-4-5")["tools"][0]


def test_a_blank_system_prompt_is_left_out_of_the_anthropic_request(
        server: ProviderServer) -> None:
    for plan in ("chat", "simple_qa"):
        body = build(SUITE["blank system prompt"], plan).to_request(
            "anthropic", model="claude-sonnet-4-5")
        assert "system" not in body
        check_sdk_type("anthropic", body)
        send(server, "anthropic", body)


@pytest.mark.parametrize("name", ["blank user input", "blank user input after a round"])
def test_a_blank_user_input_stays_the_last_message_in_every_format(
        name: str, server: ProviderServer) -> None:
    ctx = build(SUITE[name], "chat")
    body = ctx.to_request("anthropic", model="claude-sonnet-4-5")
    assert body["messages"][-1] == {"role": "user", "content": [
        {"type": "text", "text": "(empty message)"}]}
    assert any("(empty message)" in note for note in ctx.rendering_notes("anthropic"))
    assert ctx.to_request("openai")["messages"][-1]["role"] == "user"
    assert ctx.to_request("openai-responses")["input"][-1]["role"] == "user"
    for fmt in PROVIDER_FORMATS:
        body = ctx.to_request(fmt, model=MODELS[fmt])
        check_sdk_type(fmt, body)
        send(server, fmt, body)


def test_our_validator_refuses_no_messages_and_a_final_assistant_message() -> None:
    with pytest.raises(ValidationError, match="no messages"):
        validate_anthropic([])
    with pytest.raises(ValidationError, match="prefill"):
        validate_anthropic([{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                            {"role": "assistant", "content": [{"type": "text", "text": "So"}]}])


def crowded_turn() -> Request:
    """Three calls of this turn whose results are far too long for a small budget."""
    tool = {"type": "function", "function": {"name": "get_order", "parameters": {
        "type": "object", "properties": {"order_id": {"type": "string"}}}}}
    turn: list[dict[str, Any]] = []
    for number in range(3):
        turn += [call(f"call_{number}", "get_order", order_id=f"KST{number}"),
                 result(f"call_{number}", json.dumps({"order_id": f"KST{number}",
                                                      "status": "shipped",
                                                      "log": "x " * 400}))]
    return Request(user_input="Where are my orders?", tools=[tool], turn=turn)


def test_a_turn_that_keeps_only_its_digest_still_ends_with_the_question(
        server: ProviderServer) -> None:
    plan = BuildPlan.named("tool_heavy").with_budget(available_override=200)
    ctx = ContextBuilder().build(plan, crowded_turn())
    assert any(d.key == "tool_results.digest" and d.action == "compacted"
               for d in ctx.report.decisions)
    assert ctx.sections[-2:] == ("tool_results", "user")  # the digest goes before the question
    openai_messages = ctx.to_request("openai")["messages"]
    assert openai_messages[-1] == {"role": "user", "content": "Where are my orders?"}
    assert "KST0" in openai_messages[-2]["content"]  # the digest, in the assistant's voice
    assert openai_messages[-2]["role"] == "assistant"
    assert ctx.to_request("openai-responses")["input"][-1]["role"] == "user"
    body = ctx.to_request("anthropic")
    last = body["messages"][-1]
    assert last["role"] == "user"
    assert [b["type"] for b in last["content"]] == ["search_result", "text"]
    assert "KST0" in last["content"][0]["content"][0]["text"]
    for fmt in PROVIDER_FORMATS:
        request = ctx.to_request(fmt, model=MODELS[fmt])
        check_sdk_type(fmt, request)
        send(server, fmt, request)


def test_a_turn_that_ends_with_the_assistant_answer_is_refused_for_anthropic_only() -> None:
    ctx = build(Request(user_input="Where is my order?", tools=[WEATHER], turn=[
        call("c1", city="Paris"), result("c1", "sun"),
        {"role": "assistant", "content": "It is sunny."}]))
    assert ctx.to_request("openai")["messages"][-1]["role"] == "assistant"
    with pytest.raises(InvalidInputError, match=r"shown by the tool_results source, is the "
                                               r"assistant's.*prefill"):
        ctx.to_request("anthropic")


def test_a_build_that_fits_renders_for_anthropic_within_its_budget() -> None:
    # A blank user message first: the Anthropic rendering shows it as "(empty message)" and
    # needs no lead message; the build sets aside what that rendering adds.
    history = [{"role": "user", "content": ""}, {"role": "assistant", "content": "word " * 60}]
    for budget in range(60, 140):
        plan = BuildPlan.named("chat").with_budget(available_override=budget)
        try:
            ctx = ContextBuilder().build(plan, Request(user_input="And then?", history=history))
        except BudgetError:
            continue
        ctx.to_request("anthropic")  # ValidationError if it were over the budget
        ctx.to_request("openai")


def test_speakers_names_reach_chat_completions_and_the_other_formats_say_they_cannot(
        server: ProviderServer) -> None:
    history = [{"role": "user", "content": "I am fine", "name": "alice"},
               {"role": "assistant", "content": "Good."},
               {"role": "user", "content": "Me too", "name": "bob"},
               {"role": "assistant", "content": "Great."}]
    named = build(Request(user_input="and you?", history=history), "chat")
    body = named.to_request("openai", model=MODELS["openai"])
    send(server, "openai", body)
    assert [m.get("name") for m in body["messages"]] == ["alice", None, "bob", None, None]
    assert named.rendering_notes("openai") == []
    for fmt, api in (("openai-responses", "Responses API"), ("anthropic", "Messages API")):
        assert named.rendering_notes(fmt) == [  # type: ignore[arg-type]
            f"2 speaker name(s) left out: a {api} message has no name field"]
    # A name Chat Completions refuses is left out, and said; names count in the budget.
    odd = build(Request(user_input="and you?", history=[{**history[0], "name": "Bob Smith"}]),
                "chat")
    assert "name" not in odd.to_messages("openai")[0]
    assert odd.rendering_notes("openai") == [
        "1 speaker name(s) left out: Chat Completions takes a message name of 1 to 64 "
        "A-Z a-z 0-9 _ -"]
    plain = build(Request(user_input="and you?", history=[
        {k: v for k, v in m.items() if k != "name"} for m in history]), "chat")
    assert named.total_tokens == plain.total_tokens + 2 * 2  # each name: 1 token + 1 of framing
