"""The LangChain middleware inside a real ``create_agent`` loop (LangGraph), with no network.

The model is LangChain's own ``GenericFakeChatModel`` (a callback records what it received) or
``ChatOpenAI`` talking to the local fake OpenAI server, which rejects what the API would.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conversations import (
    DATA_NOTE,
    SYSTEM,
    Conversation,
    call_ids,
    conversations,
    long_conversation,
    provider_accepts_chat,
    result_ids,
)
from hypothesis import HealthCheck, given, settings
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from scripted_openai import ScriptedOpenAI, Turn

from contextwright import BuildPlan, ContextBuilder, InvalidInputError
from contextwright.integrations.langchain import (
    ContextwrightMiddleware,
    from_langchain,
    report_from_state,
    to_langchain,
)
from fakes.provider_server import ProviderServer, check_chat, check_messages, check_responses


class ToolCallingFake(GenericFakeChatModel):
    """LangChain's fake chat model, accepting tools as a tool-calling model does."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:  # type: ignore[override]
        return self


class Received(BaseCallbackHandler):
    """Records the messages of every chat model call."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]],
                            **kwargs: Any) -> None:
        self.calls.append(messages[0])


@tool
def get_booking(code: str) -> str:
    """Look up a booking by its code."""
    return json.dumps({"code": code, "status": "confirmed", "seat": "12C"})


def fake(*replies: AIMessage) -> ToolCallingFake:
    return ToolCallingFake(messages=iter(replies or [AIMessage("All set.")]))


def openai_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return convert_to_openai_messages(messages)  # type: ignore[return-value]


def test_model_sees_the_build_while_the_state_keeps_the_whole_conversation() -> None:
    history = to_langchain(long_conversation(400))
    received = Received()
    agent = create_agent(fake(), [get_booking], system_prompt=SYSTEM,
                         middleware=[ContextwrightMiddleware(budget=1500)])
    state = agent.invoke({"messages": [*history, HumanMessage("Where is KST499?")]},
                         {"callbacks": [received]})
    sent = received.calls[0]
    assert len(state["messages"]) == len(history) + 2  # everything kept, plus the answer
    assert len(sent) < len(history) / 4
    assert sent[0].type == "system" and SYSTEM in sent[0].text and DATA_NOTE in sent[0].text
    assert sent[-1].type == "human" and sent[-1].text == "Where is KST499?"
    report = report_from_state(state)
    assert report.total_tokens <= 1500 and report.cuts()
    assert all("<<data " in m.text for m in sent if isinstance(m, ToolMessage))
    provider_accepts_chat(openai_dicts(sent))


def test_tool_loop_builds_every_call_and_keeps_this_turns_results() -> None:
    received = Received()
    model = fake(AIMessage("", tool_calls=[{"name": "get_booking", "args": {"code": "KST7"},
                                            "id": "call_a"}]),
                 AIMessage("KST7 is confirmed, seat 12C."))
    agent = create_agent(model, [get_booking], middleware=[ContextwrightMiddleware()])
    state = agent.invoke({"messages": [*to_langchain(long_conversation(30)),
                                       HumanMessage("And KST7?")]}, {"callbacks": [received]})
    second = received.calls[1]
    assert [m.type for m in second[-3:]] == ["human", "ai", "tool"]
    assert "12C" in second[-1].text and "<<data " in second[-1].text
    assert state["messages"][-1].text == "KST7 is confirmed, seat 12C."
    assert report_from_state(state).plan.startswith("tool_heavy")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_tool_pairs_stay_whole_under_any_budget(conversation: Conversation) -> None:
    received = Received()
    agent = create_agent(fake(), [get_booking], system_prompt=SYSTEM,
                         middleware=[ContextwrightMiddleware(budget=conversation.budget)])
    state = agent.invoke({"messages": to_langchain(conversation.messages)},
                         {"callbacks": [received]})
    sent = openai_dicts(received.calls[0])
    provider_accepts_chat(sent)  # every result right after its call, every call answered
    kept = set(call_ids(sent))
    assert set(result_ids(sent)) == kept
    for message in conversation.messages:  # a call is kept with all of its results or not
        ids = {call["id"] for call in message.get("tool_calls") or ()}
        assert ids <= kept or not ids & kept
    assert report_from_state(state).total_tokens <= conversation.budget


def test_requests_reach_the_openai_api_valid_through_chat_openai() -> None:
    from langchain_openai import ChatOpenAI

    with ProviderServer() as server:
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test-key",
                           max_retries=0)
        agent = create_agent(model, [get_booking], system_prompt=SYSTEM,
                             middleware=[ContextwrightMiddleware(budget=1200)])
        state = agent.invoke({"messages": [*to_langchain(long_conversation(120)),
                                           HumanMessage("Is KST219 confirmed?")]})
    assert [r.status for r in server.received] == [200], server.received[-1].error
    body = server.received[0].body
    assert body["messages"][0]["role"] == "system" and DATA_NOTE in body["messages"][0]["content"]
    assert [t["function"]["name"] for t in body["tools"]] == ["get_booking"]
    assert state["messages"][-1].text == "ok"


def test_report_survives_a_checkpointer_and_the_thread_goes_on() -> None:
    agent = create_agent(fake(AIMessage("one"), AIMessage("two")), [get_booking],
                         middleware=[ContextwrightMiddleware(budget=800)],
                         checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t-1"}}
    agent.invoke({"messages": [*to_langchain(long_conversation(60)), HumanMessage("Hi")]},
                 thread)
    state = agent.invoke({"messages": [HumanMessage("Still there?")]}, thread)
    saved = agent.get_state(thread).values
    assert report_from_state(saved) == report_from_state(state)
    assert len(saved["messages"]) == len(long_conversation(60)) + 4


def test_async_agent_builds_the_same_context() -> None:
    received_sync, received_async = Received(), Received()
    messages = [*to_langchain(long_conversation(50)), HumanMessage("KST120?")]
    for handler, run in ((received_sync, False), (received_async, True)):
        agent = create_agent(fake(), [get_booking], middleware=[ContextwrightMiddleware(
            budget=900)])
        if run:
            asyncio.run(agent.ainvoke({"messages": messages}, {"callbacks": [handler]}))
        else:
            agent.invoke({"messages": messages}, {"callbacks": [handler]})
    assert openai_dicts(received_sync.calls[0]) == openai_dicts(received_async.calls[0])


def test_a_plan_with_a_small_tool_budget_offers_the_model_only_the_tools_it_kept() -> None:
    @tool
    def cancel_booking(code: str) -> str:
        """Cancel a booking by its code and refund the fare to the original card."""
        return "cancelled"

    plan = BuildPlan.named("tool_heavy")
    seen: list[list[str]] = []

    class Recording(ToolCallingFake):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
            seen.append([t.name for t in tools])
            return self

    builder = ContextBuilder()
    middleware = ContextwrightMiddleware(builder=builder, plan=plan, budget=4000)
    agent = create_agent(Recording(messages=iter([AIMessage("ok")])),
                         [get_booking, cancel_booking], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Look up booking KST1")]})
    kept = [row for row in report_from_state(state).sources if row.source == "tools"]
    assert seen and len(seen[0]) == kept[0].items


def test_a_conversation_without_a_user_message_is_refused() -> None:
    agent = create_agent(fake(), [], middleware=[ContextwrightMiddleware()])
    with pytest.raises(InvalidInputError, match="no user message"):
        agent.invoke({"messages": [AIMessage("Hello, how can I help?")]})


def test_from_langchain_and_to_langchain_keep_ids_and_pairs() -> None:
    chats = long_conversation(9)
    messages = to_langchain(chats)
    back = from_langchain(messages)
    assert call_ids(back) == call_ids(chats) and result_ids(back) == result_ids(chats)
    assert [m["role"] for m in back] == [m["role"] for m in chats]
    assert [json.loads(c["function"]["arguments"]) for m in back for c in m.get("tool_calls", ())
            ] == [json.loads(c["function"]["arguments"]) for m in chats
                  for c in m.get("tool_calls", ())]


@pytest.mark.parametrize("responses_api", [False, True])
def test_a_call_with_malformed_arguments_stays_paired_with_its_error(responses_api: bool) -> None:
    from langchain_openai import ChatOpenAI

    truncated = '{"code": "KS'  # a model's arguments cut short: LangChain's invalid_tool_calls
    with ScriptedOpenAI(Turn(calls=(("get_booking", {}),), raw_arguments=truncated),
                        Turn(text="KST7 is confirmed.")) as server:
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test-key",
                           max_retries=0, use_responses_api=responses_api)
        agent = create_agent(model, [get_booking], system_prompt=SYSTEM,
                             middleware=[ContextwrightMiddleware()],
                             checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": "t-1"}}
        agent.invoke({"messages": [HumanMessage("Is my booking confirmed?")]}, thread)
        state = agent.invoke({"messages": [HumanMessage("It is KST7.")]}, thread)
    assert server.errors == [] and state["messages"][-1].text == "KST7 is confirmed."
    assert [type(m).__name__ for m in state["messages"]] == [
        "HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "AIMessage"]
    assert state["messages"][1].invalid_tool_calls  # what LangChain made of the reply
    chats = from_langchain(state["messages"])
    (call,) = chats[1]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"malformed_arguments": truncated}
    assert chats[2]["tool_call_id"] == call["id"] and "(tool error)" in chats[2]["content"]
    # Every provider's rendering takes the pair (Anthropic's tool_use input is an object).
    schema = {"type": "function", "function": {"name": "get_booking", "parameters": {
        "type": "object", "properties": {"code": {"type": "string"}}}}}
    context = ContextwrightMiddleware().shaper.build(chats[:-1], tools=[schema])
    check_chat(context.to_request("openai", model="gpt-4o"))
    check_responses(context.to_request("openai-responses", model="gpt-4o"))
    body = context.to_request("anthropic", model="claude-sonnet-4-5")
    check_messages(body)
    uses = [b for m in body["messages"] for b in m["content"] if isinstance(b, dict)
            and b.get("type") == "tool_use"]
    assert [b["input"] for b in uses] == [{"malformed_arguments": truncated}]
    sent = server.received[1].body  # the model saw what it wrote, answered by the error
    sent_calls = ([c["function"] for m in sent["messages"] for c in m.get("tool_calls") or ()]
                  if "messages" in sent else
                  [i for i in sent["input"] if i.get("type") == "function_call"])
    assert [json.loads(c["arguments"]) for c in sent_calls] == [{"malformed_arguments": truncated}]
    # A call without an id has nothing answering it, in LangChain's agent too: it is left out.
    unanswerable = AIMessage("", invalid_tool_calls=[
        {"type": "invalid_tool_call", "id": None, "name": "get_booking", "args": truncated,
         "error": "malformed"}])
    assert "tool_calls" not in from_langchain([unanswerable])[0]


@pytest.mark.data
def test_tau_bench_through_the_middleware_keeps_pairs_and_the_direct_builds_facts(
        shared_data: Path) -> None:
    from contextwright.evaluate.tau import build_tau, history_budget_plan, load_tau, tau_scores

    data = load_tau(shared_data / "tau-bench-airline-dev")
    builder, base = ContextBuilder(), BuildPlan.named("tool_heavy")
    count = builder.tokenizer.count
    for case in data.cases:
        received = Received()
        middleware = ContextwrightMiddleware(
            builder=builder, plan=lambda request: history_budget_plan(builder, base, request,
                                                                      1000))
        agent = create_agent(fake(), system_prompt=data.policy, middleware=[middleware])
        agent.invoke({"messages": to_langchain(list(case.conversation))},
                     {"callbacks": [received]})
        ours = tau_scores(case, openai_dicts(received.calls[0]), count)
        direct = tau_scores(case, build_tau(builder, base, data.policy, case, 1000)
                            .to_messages("openai"), count)
        assert ours["pair_integrity"].numerator == 1, case.traj_index
        assert ours["fact_survival"].numerator >= direct["fact_survival"].numerator, (
            case.traj_index)


@pytest.mark.parametrize("reasoning", [None, "The booking tool knows."])
def test_a_tool_loop_through_chat_openais_responses_api_goes_through(
        reasoning: str | None) -> None:
    from langchain_openai import ChatOpenAI

    with ScriptedOpenAI(Turn(reasoning=reasoning, calls=(("get_booking", {"code": "KST7"}),)),
                        Turn(text="KST7 is confirmed, seat 12C.")) as server:
        model = ChatOpenAI(model="o4-mini", base_url=server.base_url, api_key="test-key",
                           max_retries=0, use_responses_api=True)
        agent = create_agent(model, [get_booking], system_prompt=SYSTEM,
                             middleware=[ContextwrightMiddleware()])
        state = agent.invoke({"messages": [HumanMessage("Is KST7 confirmed?")]})
    assert server.errors == [] and len(server.received) == 2
    assert state["messages"][-1].text == "KST7 is confirmed, seat 12C."
    kinds = [block.get("type") for block in state["messages"][1].content]
    assert "function_call" in kinds  # LangChain keeps the call in the content too
    second = server.received[1].body["input"]
    calls = [item for item in second if item.get("type") == "function_call"]
    assert [(c["name"], c["arguments"]) for c in calls] == [("get_booking", '{"code": "KST7"}')]
    assert "12C" in second[-1]["output"] and "<<data " in second[-1]["output"]


def test_anthropic_thinking_blocks_are_left_out_of_what_the_model_sees() -> None:
    received = Received()
    history = [HumanMessage("Is KST7 confirmed?"),
               AIMessage(content=[
                   {"type": "thinking", "thinking": "Check the booking.", "signature": "EqQB"},
                   {"type": "redacted_thinking", "data": "EmwKAhgB"},
                   {"type": "text", "text": "Let me look."},
                   {"type": "tool_use", "id": "toolu_1", "name": "get_booking",
                    "input": {"code": "KST7"}}],
                   tool_calls=[{"name": "get_booking", "args": {"code": "KST7"},
                                "id": "toolu_1"}]),
               ToolMessage('{"status": "confirmed"}', tool_call_id="toolu_1"),
               AIMessage(content=[{"type": "thinking", "thinking": "Done.", "signature": "x"},
                                  {"type": "text", "text": "Yes, KST7 is confirmed."}])]
    agent = create_agent(fake(AIMessage("Seat 12C.")), [get_booking],
                         middleware=[ContextwrightMiddleware()])
    state = agent.invoke({"messages": [*history, HumanMessage("Which seat?")]},
                         {"callbacks": [received]})
    sent = openai_dicts(received.calls[0])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant",
                                         "user"]
    assert sent[2]["content"] == "Let me look." and sent[2]["tool_calls"][0]["id"] == "toolu_1"
    assert sent[4]["content"] == "Yes, KST7 is confirmed."
    assert "Check the booking" not in json.dumps(sent)
    assert state["messages"][-1].text == "Seat 12C."


def test_an_open_tool_loop_keeps_its_thinking_for_the_next_call() -> None:
    # With extended thinking on, Anthropic refuses the loop's next call without the thinking
    # block it opened with: the middleware hands it back in the AIMessage's content.
    received = Received()
    thinking = {"type": "thinking", "thinking": "Look the booking up.", "signature": "EqQBsig"}
    first = AIMessage(content=[thinking, {"type": "text", "text": "Checking."}],
                      tool_calls=[{"name": "get_booking", "args": {"code": "KST7"},
                                   "id": "toolu_1"}])
    agent = create_agent(fake(first, AIMessage("Seat 12C.")), [get_booking],
                         middleware=[ContextwrightMiddleware()])
    agent.invoke({"messages": [HumanMessage("Is KST7 confirmed?")]}, {"callbacks": [received]})
    second = received.calls[1]
    calling = next(m for m in second if isinstance(m, AIMessage) and m.tool_calls)
    assert calling.content[0] == thinking
    assert [m.type for m in second] == ["system", "human", "ai", "tool"]
