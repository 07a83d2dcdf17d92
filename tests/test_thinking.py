"""An assistant's reasoning (Anthropic extended thinking) in an agent loop: read from the forms
SDK users hold, sent back as given while its tool loop is open, never cut or orphaned, left out
(and reported) once the turn is answered. Requests go through the official Anthropic SDK to the
local server, which enforces the API's thinking rules with thinking on."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, Request, chat_messages
from contextwright.convert import to_langchain
from contextwright.errors import BudgetError, InvalidInputError
from fakes.provider_server import ProviderServer, check_messages

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
THINKING_ON = {"type": "enabled", "budget_tokens": 1024}
OPENING = {"type": "thinking", "thinking": "Paris first, then Rome, then compare them.",
           "signature": "RXFRQkNnSVlBaElNc2lnbmF0dXJlLTE="}


def call(call_id: str, city: str, thinking: list[dict[str, Any]] | None = None
         ) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]}
    if thinking:
        message["thinking_blocks"] = thinking
    return message


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def agent_turn(results: int, interleaved: bool = False) -> list[dict[str, Any]]:
    """A loop of ``results`` calls; the first opens with reasoning (each does if interleaved)."""
    turn: list[dict[str, Any]] = []
    for index in range(results):
        thinking = [OPENING] if index == 0 else (
            [{"type": "thinking", "thinking": f"Now city {index}.", "signature": f"c2ln{index}"}]
            if interleaved else None)
        turn += [call(f"toolu_{index}", f"City{index}", thinking),
                 result(f"toolu_{index}", f"weather report {index}: " + "mild and dry " * 20)]
    return turn


HISTORY = [{"role": "user", "content": "hi"},
           {"role": "assistant", "content": "Hello! How can I help?", "thinking_blocks": [
               {"type": "thinking", "thinking": "A greeting.", "signature": "c2lnLW9sZA=="}]}]


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def send_with_thinking(server: ProviderServer, body: dict[str, Any]) -> None:
    client = anthropic.Anthropic(base_url=server.origin, api_key="test", max_retries=0)
    client.messages.create(**{**body, "max_tokens": 4096, "thinking": THINKING_ON})


def build(turn: list[dict[str, Any]], budget: int | None = None,
          history: list[dict[str, Any]] | None = None) -> Any:
    plan = BuildPlan.named("tool_heavy")
    if budget is not None:
        plan = plan.with_budget(available_override=budget)
    request = Request(user_input="Compare the weather in these cities.", system="Agent.",
                      tools=[WEATHER], history=HISTORY if history is None else history,
                      turn=turn)
    return ContextBuilder(model="claude-sonnet-4-5").build(plan, request)


def assistant_blocks(body: dict[str, Any]) -> list[list[str]]:
    return [[block["type"] for block in message["content"]] for message in body["messages"]
            if message["role"] == "assistant"]


def test_the_open_loop_sends_its_reasoning_first_as_given(server: ProviderServer) -> None:
    ctx = build(agent_turn(2))
    body = ctx.to_request("anthropic")
    send_with_thinking(server, body)
    opening = next(m for m in body["messages"] if m["role"] == "assistant"
                   and m["content"][0]["type"] == "thinking")
    assert opening["content"][0] == OPENING  # byte for byte: the API checks the signature
    assert [kinds[0] for kinds in assistant_blocks(body)] == ["text", "thinking", "tool_use"]
    # The answered turn's reasoning is not sent, and the report says so.
    assert not any("A greeting." in json.dumps(m) for m in body["messages"])
    [left_out] = [d for d in ctx.report.decisions if d.key == "history.m1"]
    assert left_out.action == "compacted" and "only while its tool loop is open" in (
        left_out.reason)


def test_its_tokens_are_counted(server: ProviderServer) -> None:
    with_reasoning = build(agent_turn(2))
    without = build([{k: v for k, v in m.items() if k != "thinking_blocks"}
                     for m in agent_turn(2)])
    thought = ContextBuilder().tokenizer.count(OPENING["thinking"])
    assert with_reasoning.total_tokens - without.total_tokens > thought


@pytest.mark.parametrize("interleaved", [False, True])
def test_a_cut_never_sends_a_loop_without_the_reasoning_it_opened_with(
        interleaved: bool, server: ProviderServer) -> None:
    turn = agent_turn(4, interleaved)
    stranded = partial = 0
    for budget in range(200, 1400, 40):
        ctx = build(turn, budget)
        body = ctx.to_request("anthropic")
        send_with_thinking(server, body)  # the server refuses a loop without its reasoning
        loop = [kinds for kinds in assistant_blocks(body) if "tool_use" in kinds]
        if loop:
            assert loop[0][0] == "thinking", budget
            partial += len(loop) < 4
        reasons = [d.reason for d in ctx.report.decisions if d.action == "dropped"]
        stranded += any("reasoning its tool loop opened with" in r for r in reasons)
    # Without interleaved reasoning the loop goes whole (its calls stranded by a cut that let
    # its reasoning go are dropped too); with it, the newest calls stay on their own.
    assert (stranded > 0) != interleaved and (partial > 0) == interleaved


def test_a_history_that_ends_in_an_open_loop_keeps_its_reasoning(
        server: ProviderServer) -> None:
    history = [*HISTORY, {"role": "user", "content": "Compare Paris and Rome."},
               *agent_turn(2)]
    plan = BuildPlan.named("tool_heavy")
    builder = ContextBuilder(model="claude-sonnet-4-5")
    ctx = builder.build(plan, Request(user_input="Go on.", tools=[WEATHER], system="Agent.",
                                      history=history))
    body = ctx.to_request("anthropic")
    send_with_thinking(server, body)
    assert any(m["content"][0] == OPENING for m in body["messages"]
               if m["role"] == "assistant")
    # Once the assistant answers, that loop is closed: its reasoning is not sent again.
    answered = [*history, {"role": "assistant", "content": "Paris is warmer."}]
    body = builder.build(plan, Request(user_input="Thanks", tools=[WEATHER],
                                       history=answered)).to_request("anthropic")
    assert "thinking" not in {kind for kinds in assistant_blocks(body) for kind in kinds}


def test_formats_without_a_place_for_reasoning_leave_it_out_and_say_so() -> None:
    ctx = build(agent_turn(2))
    for fmt in ("openai", "openai-responses"):
        assert "thinking" not in json.dumps(ctx.to_request(fmt))
        assert any("reasoning (thinking blocks)" in note for note in ctx.rendering_notes(fmt))
    assert not any("reasoning" in note for note in ctx.rendering_notes("anthropic"))


def test_reasoning_is_read_from_anthropic_and_langchain_messages() -> None:
    anthropic_reply = {"id": "msg_1", "type": "message", "role": "assistant",
                       "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
                       "content": [OPENING, {"type": "redacted_thinking", "data": "ZW5j"},
                                   {"type": "tool_use", "id": "toolu_9", "name": "get_weather",
                                    "input": {"city": "Oslo"}}]}
    [message] = chat_messages(anthropic.types.Message.model_validate(
        {**anthropic_reply, "usage": {"input_tokens": 1, "output_tokens": 1}}))
    assert message["thinking_blocks"] == [OPENING, {"type": "redacted_thinking",
                                                    "data": "ZW5j"}]
    # LangChain (ChatAnthropic keeps the blocks in the content, with a stream index) and back.
    [lc] = to_langchain([message])
    assert lc.content[:2] == message["thinking_blocks"]
    [again] = chat_messages([lc.model_copy(update={"content": [
        {**OPENING, "index": 0}, *lc.content[1:]]})])
    assert again["thinking_blocks"] == message["thinking_blocks"]
    assert again["tool_calls"] == message["tool_calls"]


@pytest.mark.parametrize(("blocks", "role", "complaint"), [
    ([OPENING], "user", "only allowed on assistant messages"),
    ([{"type": "thinking", "thinking": "x", "signature": 7}], "assistant",
     "signature must be a string"),
    ([{"type": "redacted_thinking", "data": " "}], "assistant", "data is empty"),
    ([{"type": "reasoning", "text": "x"}], "assistant", "must be 'thinking' or"),
    ({"type": "thinking"}, "assistant", "must be a list"),
])
def test_malformed_reasoning_is_refused_by_name(blocks: object, role: str,
                                                complaint: str) -> None:
    message = {"role": role, "content": "ok", "thinking_blocks": blocks}
    with pytest.raises(InvalidInputError, match=complaint):
        ContextBuilder().build(BuildPlan.named("chat"),
                               Request(user_input="hi", history=[message]))


REDIS_URL = os.environ.get("CONTEXTWRIGHT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("CONTEXTWRIGHT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgresql"])
def test_a_managed_session_sends_the_stored_loop_reasoning_back(
        kind: str, tmp_path: Any, server: ProviderServer) -> None:
    from contextwright import ContextManager, open_store

    name = f"cwtest_{uuid.uuid4().hex}"
    store = open_store({"sqlite": f"sqlite:///{tmp_path}/s.db",
                        "redis": f"{REDIS_URL}?prefix={name}",
                        "postgresql": f"{POSTGRES_DSN}?schema={name}"}[kind])
    manager = ContextManager(store=store, background=False)
    session = "thinking"
    manager.prepare("ada", session, "Weather in Paris?", tools=[WEATHER])
    reply = anthropic.types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [OPENING, {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                              "input": {"city": "Paris"}}]})
    manager.record("ada", session, assistant=reply, tool_results=[
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "sunny"}]}])
    body = manager.prepare("ada", session, tools=[WEATHER]).to_request(
        "anthropic", model="claude-sonnet-4-5")
    send_with_thinking(server, body)
    assert body["messages"][1]["content"][0] == OPENING
    assert manager.erase_session("ada", session)
    manager.close()
    store.close()
    if kind == "postgresql":
        import psycopg

        with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.integers(1, 6), thinking_at=st.sets(st.integers(0, 5), min_size=1),
       budget=st.integers(120, 2500), stable=st.booleans(),
       result_words=st.integers(1, 80), plan=st.sampled_from(["tool_heavy", "chat"]))
def test_no_build_sends_a_loop_without_its_reasoning(
        calls: int, thinking_at: set[int], budget: int, stable: bool, result_words: int,
        plan: str) -> None:
    """Any loop, any budget, fresh or continuing the last call's layout: the Messages API
    takes the request with thinking on (``check_messages`` holds its rules)."""
    opener = min(thinking_at)
    turn: list[dict[str, Any]] = []
    for index in range(opener, opener + calls):
        reasoning = ([{"type": "thinking", "thinking": f"Step {index}.",
                       "signature": f"c2ln{index}"}] if index in thinking_at else None)
        turn += [call(f"toolu_{index}", f"City{index}", reasoning),
                 result(f"toolu_{index}", "report " + "dry " * result_words)]
    builder = ContextBuilder(model="claude-sonnet-5-5")
    selected = BuildPlan.named(plan).with_budget(available_override=budget)
    previous = None
    for end in range(2, len(turn) + 1, 2):  # the loop grows call by call, as an agent runs
        request = Request(user_input="Compare them.", system="Agent.", tools=[WEATHER],
                          history=HISTORY, turn=turn[:end])
        try:
            ctx = builder.build(selected, request, previous=previous, cache=stable or None)
        except BudgetError:
            return
        previous = ctx if stable else None
        body = ctx.to_request("anthropic")
        check_messages({**body, "max_tokens": 4096, "thinking": {"type": "adaptive"}})
        shown = [m for m in body["messages"] if m["role"] == "assistant"
                 and any(b["type"] == "tool_use" for b in m["content"])]
        if shown:  # the loop as shown opens with the reasoning of its first kept call
            assert shown[0]["content"][0]["type"] == "thinking"


def test_a_snapshot_shows_the_reasoning_sent_and_what_it_cost() -> None:
    from contextwright.observe.replay import snapshot_of

    request = Request(user_input="Compare the weather in these cities.", system="Agent.",
                      tools=[WEATHER], history=HISTORY, turn=agent_turn(2))
    plain = snapshot_of(BuildPlan.named("tool_heavy"), request)
    [sent] = [m for m in plain.messages if "thinking" in m]
    [block] = sent["thinking"]
    assert block["text"] == OPENING["thinking"] and block["type"] == "thinking"
    assert block["signature_chars"] == len(OPENING["signature"])
    assert sent["tokens"] > block["tokens"] > 0
    assert sum(m["tokens"] for m in plain.messages) > sum(
        m["tokens"] for m in snapshot_of(BuildPlan.named("tool_heavy"), Request(
            user_input=request.user_input, system="Agent.", tools=[WEATHER], history=HISTORY,
            turn=[{k: v for k, v in m.items() if k != "thinking_blocks"}
                  for m in agent_turn(2)])).messages)
    redacted = snapshot_of(BuildPlan.named("tool_heavy"), request, redact=True)
    assert OPENING["thinking"] not in redacted.to_json()
    assert OPENING["signature"] not in json.dumps(plain.messages)


def test_the_html_report_shows_the_reasoning_a_message_sent() -> None:
    from contextwright.observe.html import render_html
    from contextwright.observe.replay import snapshot_of

    request = Request(user_input="Compare the weather in these cities.", system="Agent.",
                      tools=[WEATHER], history=HISTORY, turn=agent_turn(2))
    page = render_html(snapshot_of(BuildPlan.named("tool_heavy"), request))
    assert '<div class="thinking">thinking (' in page and OPENING["thinking"] in page
    assert OPENING["signature"] not in page
    redacted = render_html(snapshot_of(BuildPlan.named("tool_heavy"), request, redact=True))
    assert '<div class="thinking">' in redacted and OPENING["thinking"] not in redacted


def test_unsigned_reasoning_is_read_and_not_sent(server: ProviderServer) -> None:
    # Another provider's reasoning (or a stream cut short) has no signature: the Messages API
    # would refuse it, so it is left out, reported, while the signed block goes.
    unsigned = {"type": "thinking", "thinking": "A draft.", "signature": None}
    turn = agent_turn(2)
    turn[0] = {**turn[0], "thinking_blocks": [OPENING, unsigned]}
    ctx = build(turn)
    body = ctx.to_request("anthropic")
    send_with_thinking(server, body)
    opening = next(m for m in body["messages"] if m["role"] == "assistant"
                   and m["content"][0]["type"] == "thinking")
    assert [b["type"] for b in opening["content"]] == ["thinking", "tool_use"]
    [reported] = [d for d in ctx.report.decisions if d.key == "tool_results.m0"
                  and d.action == "compacted"]
    assert "1 thinking block(s) without a signature" in reported.reason


def test_merged_assistant_messages_keep_all_reasoning_at_the_head_in_order() -> None:
    # Two assistant messages in a row become one Anthropic turn; the turn must open with
    # reasoning, so the second's joins the first's, before any text.
    from contextwright.core.items import parse_message
    from contextwright.core.providers import ANTHROPIC_IDS, CallIds, ImageNotes, _anthropic_turns

    messages = [parse_message({"role": "assistant", "content": "One.",
                               "thinking_blocks": [OPENING]}, "m0"),
                parse_message({"role": "assistant", "content": "Two.", "thinking_blocks": [
                    {"type": "redacted_thinking", "data": "ZW5j"}]}, "m1")]
    merged, _ = _anthropic_turns(messages, [None, None], [False, False], True,
                                 CallIds(ANTHROPIC_IDS), set(), [], ImageNotes())
    assert [b["type"] for b in merged[0]["content"]] == [
        "thinking", "redacted_thinking", "text", "text"]
    assert merged[0]["content"][0] == OPENING
