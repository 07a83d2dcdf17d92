"""The OpenAI Agents SDK session and input filter inside real ``Runner.run`` loops, no network.

The model is the SDK's own ``ScriptedModel`` (it records every call's instructions and input),
or ``OpenAIResponsesModel`` talking to the local fake OpenAI server, which rejects what the
Responses API would. Sessions run on every contextwright store, and behave like the SDK's own
``SQLiteSession``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from agents.testing import ScriptedModel, assistant_message, function_call
from conversations import (
    DATA_NOTE,
    SYSTEM,
    Chat,
    Conversation,
    conversations,
    long_conversation,
    provider_accepts_responses,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import AsyncOpenAI
from scripted_openai import ScriptedOpenAI, Turn

from contextwright import MemoryStore, Store, chat_messages
from contextwright.integrations.openai_agents import (
    ContextwrightInputFilter,
    ContextwrightSession,
)
from fakes.provider_server import ProviderServer

QUIET = {"tracing_disabled": True}


@function_tool
def get_booking(code: str) -> str:
    """Look up a booking by its code."""
    return json.dumps({"code": code, "status": "confirmed", "seat": "12C"})


def script() -> ScriptedModel:
    return ScriptedModel([
        [function_call("get_booking", {"code": "KST7"}, call_id="call_a")],
        [assistant_message("KST7 is confirmed.")],
        [assistant_message("You are welcome.")],
    ])


async def two_turns(session: Any, model: ScriptedModel,
                    config: RunConfig | None = None) -> list[Any]:
    agent = Agent(name="support", instructions=SYSTEM, model=model, tools=[get_booking])
    config = config or RunConfig(**QUIET)
    await Runner.run(agent, "Is KST7 confirmed?", session=session, run_config=config)
    await Runner.run(agent, "Thanks!", session=session, run_config=config)
    return await session.get_items()  # type: ignore[no-any-return]


def as_items(messages: list[Chat]) -> list[Chat]:
    """Responses input items for OpenAI chat dicts, as the SDK keeps a conversation."""
    items: list[Chat] = []
    for message in messages:
        if message["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        elif message.get("tool_calls"):
            items += [{"type": "function_call", "call_id": call["id"],
                       "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]}
                      for call in message["tool_calls"]]
        else:
            items.append({"role": message["role"], "content": message["content"]})
    return items


def test_runs_keep_the_same_items_as_the_sdks_own_sqlite_session(store: Store) -> None:
    ours = asyncio.run(two_turns(ContextwrightSession(store, user_id="u1", session_id="s1"),
                                 script()))
    theirs = asyncio.run(two_turns(SQLiteSession("s1"), script()))
    assert json.loads(json.dumps(ours)) == json.loads(json.dumps(theirs, default=str))
    assert len(ours) == 6


def test_pop_limit_and_clear_behave_like_the_sdks_session(store: Store) -> None:
    async def exercise(session: Any) -> list[Any]:
        seen: list[Any] = []
        await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)])
        seen.append(await session.pop_item())
        seen.append(await session.pop_item())
        await session.add_items([{"role": "user", "content": "m9"}])
        seen += [await session.get_items(), await session.get_items(limit=2),
                 await session.get_items(limit=0)]
        seen.append(await session.pop_item())
        await session.clear_session()
        seen += [await session.get_items(), await session.pop_item()]
        return seen

    ours = asyncio.run(exercise(ContextwrightSession(store, user_id="u", session_id="s")))
    assert ours == asyncio.run(exercise(SQLiteSession("s")))


def test_sessions_of_two_users_never_see_each_other(store: Store) -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        alice = ContextwrightSession(store, user_id="alice", session_id="same")
        bob = ContextwrightSession(store, user_id="bob", session_id="same")
        await alice.add_items([{"role": "user", "content": "alice's secret"}])
        await bob.add_items([{"role": "user", "content": "bob's question"}])
        await bob.clear_session()
        return await alice.get_items(), await bob.get_items()

    alice_items, bob_items = asyncio.run(run())
    assert alice_items == [{"role": "user", "content": "alice's secret"}] and bob_items == []


def test_filter_builds_each_call_and_the_note_goes_into_the_instructions() -> None:
    store = MemoryStore()
    session = ContextwrightSession(store, user_id="u", session_id="long")
    asyncio.run(session.add_items(as_items(long_conversation(400))))
    model, context = script(), {}
    config = RunConfig(call_model_input_filter=ContextwrightInputFilter(budget=1500), **QUIET)
    agent = Agent(name="support", instructions=SYSTEM, model=model, tools=[get_booking])
    result = asyncio.run(Runner.run(agent, "Is KST7 confirmed?", session=session,
                                    run_config=config, context=context))
    first, second = model.calls
    assert len(first.input) < 150 and first.input[-1]["content"] == "Is KST7 confirmed?"
    assert SYSTEM in str(first.system_instructions)
    assert DATA_NOTE in str(first.system_instructions)
    assert second.input[-1]["type"] == "function_call_output"
    assert "12C" in second.input[-1]["output"] and "<<data " in second.input[-1]["output"]
    for call in model.calls:
        provider_accepts_responses(call.input, call.system_instructions)
    report = result.context_wrapper.context["contextwright_report"]
    assert report["total_tokens"] <= 1500 and report["plan"].startswith("tool_heavy")
    assert len(asyncio.run(session.get_items())) == len(as_items(long_conversation(400))) + 4


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_tool_pairs_stay_whole_under_any_budget(conversation: Conversation) -> None:
    model = ScriptedModel([[assistant_message("done")]])
    agent = Agent(name="support", instructions=SYSTEM, model=model)
    apply = ContextwrightInputFilter(budget=conversation.budget)
    asyncio.run(Runner.run(agent, as_items(conversation.messages),
                           run_config=RunConfig(call_model_input_filter=apply, **QUIET)))
    sent = model.calls[0].input
    provider_accepts_responses(sent, model.calls[0].system_instructions)
    calls = {i["call_id"] for i in sent if i.get("type") == "function_call"}
    assert calls == {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
    for message in conversation.messages:
        ids = {call["id"] for call in message.get("tool_calls") or ()}
        assert ids <= calls or not ids & calls
    assert apply.last_report is not None
    assert apply.last_report.total_tokens <= conversation.budget


def test_reasoning_items_go_back_in_front_of_their_kept_calls() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [],
                 "encrypted_content": "opaque"}
    items = [{"role": "user", "content": "Is KST7 confirmed?"},
             {"type": "reasoning", "id": "rs_0", "summary": []},
             {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "Let me look."}]},
             reasoning,
             {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_booking",
              "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_a", "output": "confirmed"}]
    built = asyncio.run(ContextwrightInputFilter()(_call_data(items)))
    kinds = [item.get("type", "message") for item in built.input]
    assert kinds == ["message", "message", "reasoning", "function_call", "function_call_output"]
    assert built.input[2] is reasoning
    assert built.input[3]["id"] == "fc_1"  # the API pairs the reasoning with its call by id


def test_a_reasoning_models_tool_loop_goes_through_the_responses_api() -> None:
    with ScriptedOpenAI(Turn(reasoning="Look the booking up.",
                             calls=(("get_booking", {"code": "KST7"}),)),
                        Turn(text="KST7 is confirmed, seat 12C.")) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="support", instructions=SYSTEM, tools=[get_booking],
                      model=OpenAIResponsesModel(model="o4-mini", openai_client=client))
        config = RunConfig(call_model_input_filter=ContextwrightInputFilter(), **QUIET)
        result = asyncio.run(Runner.run(agent, "Is KST7 confirmed?", run_config=config))
    assert server.errors == [] and result.final_output == "KST7 is confirmed, seat 12C."
    second = server.received[1].body["input"]
    assert [(item.get("type"), item.get("id")) for item in second[1:3]] == [
        ("reasoning", "rs_1"), ("function_call", "fc_1_0")]


def test_a_call_whose_reasoning_is_gone_is_sent_without_its_item_id() -> None:
    items = [{"role": "user", "content": "Is KST7 confirmed?"},
             {"type": "function_call", "id": "fc_1", "call_id": "call_a",
              "name": "get_booking", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_a", "output": "confirmed"}]
    built = asyncio.run(ContextwrightInputFilter()(_call_data(items)))
    assert "id" not in built.input[1]  # an fc_ id without its reasoning item is refused


def _call_data(items: list[Chat]) -> Any:
    from agents.run_config import CallModelData, ModelInputData

    return CallModelData(model_data=ModelInputData(input=items, instructions=SYSTEM),
                         agent=Agent(name="a"), context=None)


def test_requests_reach_the_responses_api_valid() -> None:
    with ProviderServer() as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="support", instructions=SYSTEM, tools=[get_booking],
                      model=OpenAIResponsesModel(model="gpt-4o", openai_client=client))
        session = ContextwrightSession(MemoryStore(), user_id="u", session_id="http")
        asyncio.run(session.add_items(as_items(long_conversation(150))))
        config = RunConfig(call_model_input_filter=ContextwrightInputFilter(budget=1200),
                           **QUIET)
        result = asyncio.run(Runner.run(agent, "Is KST449 confirmed?", session=session,
                                        run_config=config))
    assert [r.status for r in server.received] == [200], server.received[-1].error
    assert DATA_NOTE in server.received[0].body["instructions"]
    assert result.final_output == "ok"


def sdk_items(messages: list[Chat], draw_flags: list[bool]) -> list[Chat]:
    """Items as the SDK's own runs leave them: typed output messages, call ids, reasoning."""
    items: list[Chat] = []
    for index, item in enumerate(as_items(messages)):
        typed = draw_flags[index % len(draw_flags)]
        if typed and item.get("role") == "assistant":
            items.append({"id": f"msg_{index}", "type": "message", "role": "assistant",
                          "status": "completed", "content": [
                              {"type": "output_text", "text": item["content"] or "",
                               "annotations": []}]})
        elif typed and item.get("type") == "function_call":
            items += [{"type": "reasoning", "id": f"rs_{index}", "summary": []},
                      {**item, "id": f"fc_{index}", "status": "completed"}]
        else:
            items.append(item)
    return items


@settings(max_examples=40, deadline=None)
@given(conversations(), st.lists(st.booleans(), min_size=1, max_size=5))
def test_the_direct_reading_of_plain_items_matches_chat_messages(
        conversation: Conversation, flags: list[bool]) -> None:
    from contextwright.integrations.openai_agents import _units, unit_chats

    items = sdk_items(conversation.messages, flags)
    assert [c for unit in _units(items) for c in unit_chats(unit)] == chat_messages(items)


def test_an_item_changed_between_calls_is_read_again() -> None:
    apply = ContextwrightInputFilter()
    items = [{"role": "user", "content": "Is KST7 confirmed?"},
             {"type": "function_call", "call_id": "call_a", "name": "get_booking",
              "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_a", "output": "pending"}]
    assert "pending" in str(apply.build(items, SYSTEM).to_messages("openai"))
    items[2]["output"] = "confirmed"
    text = str(apply.build(items, SYSTEM).to_messages("openai"))
    assert "confirmed" in text and "pending" not in text


def test_every_answer_of_a_chat_completions_model_reaches_the_next_call() -> None:
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel

    turns = [Turn(text=f"Answer number {n}.") for n in range(4)]
    with ScriptedOpenAI(*turns) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="support", instructions=SYSTEM,
                      model=OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client))
        session = ContextwrightSession(MemoryStore(), user_id="u", session_id="chat")
        apply = ContextwrightInputFilter()
        config = RunConfig(call_model_input_filter=apply, **QUIET)
        for question in ("First?", "Second?", "Third?", "Fourth?"):
            asyncio.run(Runner.run(agent, question, session=session, run_config=config))
    assert server.errors == []
    # The SDK gives each of these answers the same placeholder id: they are still four answers.
    assert {item.get("id") for item in asyncio.run(session.get_items())
            if item.get("role") == "assistant"} == {"__fake_id__"}
    sent = [(m["role"], m["content"]) for m in server.received[-1].body["messages"][1:]]
    assert sent == [("user", "First?"), ("assistant", "Answer number 0."),
                    ("user", "Second?"), ("assistant", "Answer number 1."),
                    ("user", "Third?"), ("assistant", "Answer number 2."),
                    ("user", "Fourth?")]
    assert apply.last_report is not None and apply.last_report.cuts() == ()


def test_hosted_tool_items_are_left_out_and_the_conversation_goes_on() -> None:
    from agents import WebSearchTool

    with ScriptedOpenAI(Turn(web_search="KST418 status", text="KST418 left on time."),
                        Turn(web_search="KST418 gate", text="Gate B12.")) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="support", instructions=SYSTEM, tools=[WebSearchTool()],
                      model=OpenAIResponsesModel(model="gpt-4o", openai_client=client))
        session = ContextwrightSession(MemoryStore(), user_id="u", session_id="web")
        apply = ContextwrightInputFilter()
        config = RunConfig(call_model_input_filter=apply, **QUIET)
        asyncio.run(Runner.run(agent, "Did KST418 leave on time?", session=session,
                               run_config=config))
        result = asyncio.run(Runner.run(agent, "And its gate?", session=session,
                                        run_config=config))
    assert server.errors == [] and result.final_output == "Gate B12."
    kinds = [item.get("type", "message") for item in asyncio.run(session.get_items())]
    assert kinds.count("web_search_call") == 2  # the session keeps what the SDK gave it
    second = server.received[-1].body["input"]
    assert [item.get("type", "message") for item in second] == ["message"] * 3
    assert "KST418 left on time." in json.dumps(second)
    assert apply.last_report is not None
    assert any("web_search_call" in warning for warning in apply.last_report.warnings)


def test_an_item_a_chat_message_has_no_place_for_is_refused_by_type_and_position() -> None:
    import pytest

    from contextwright import InvalidInputError

    items = [{"role": "user", "content": "Click the blue button."},
             {"type": "web_search_call", "id": "ws_1", "status": "completed",
              "action": {"type": "search", "query": "blue button"}},
             {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "Clicking."}]},
             {"type": "computer_call", "id": "cu_1", "call_id": "call_c", "status": "completed",
              "action": {"type": "click", "x": 10, "y": 20, "button": "left"},
              "pending_safety_checks": []},
             {"role": "user", "content": "Done?"}]
    with pytest.raises(InvalidInputError, match=r"input\[3\] is a 'computer_call' item"):
        ContextwrightInputFilter().build(items, SYSTEM)
