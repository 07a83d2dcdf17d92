"""What ``LLMSummarizer`` sends is bounded: a message over its share of the request is shortened
(a tool result to its key facts or one line, as history's tool tiers show it; other text cut
at its head), the facts it no longer shows are kept by rule, and the shortening is logged. The
summary model is a local chat-completions server that copies the facts it is asked to keep."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from contextwright.compress.summarize import Summary, verified
from contextwright.compress.summary_llm import LLMSummarizer
from contextwright.core.items import Message, ToolCall
from contextwright.errors import ConfigurationError
from contextwright.llm import OpenAIChatClient
from contextwright.tokens import get_tokenizer
from fakes.openai_server import FakeOpenAIServer, Reply, text

TOKENIZER = get_tokenizer("o200k_base")


def copying_model(body: dict[str, Any]) -> Reply:
    """A summary model that keeps exactly the facts it was told to keep."""
    asked = json.loads(body["messages"][1]["content"])
    return text(json.dumps({"need": "Audit the refunds", "facts": asked["required_facts"],
                            "unresolved": [], "corrected": [], "notes": ["Refunds listed."]}))


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=copying_model) as fake:
        yield fake


def summarizer(server: FakeOpenAIServer, **limits: int) -> LLMSummarizer:
    client = OpenAIChatClient(server.base_url, max_retries=0, timeout=30)
    return LLMSummarizer(client, model="m", **limits)


def sent_tokens(server: FakeOpenAIServer) -> int:
    return sum(TOKENIZER.count(m["content"]) for m in server.requests[-1].body["messages"])


def refund_turn(records: int) -> list[Message]:
    rows = [{"refund_id": f"RF-{i:05d}", "status": "done",
             "note": "refund issued to the original card after the warehouse check"}
            for i in range(records)]
    call = ToolCall(id="c1", name="list_refunds", arguments='{"order": "ORD-77"}')
    return [Message(role="user", content="Which refunds of ORD-77 went through?"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", tool_call_id="c1", name="list_refunds",
                    content=json.dumps({"refunds": rows})),
            Message(role="assistant", content="All refunds of ORD-77 went through.")]


def test_a_huge_tool_result_is_sent_shortened_within_the_default_bound(
        server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    messages = refund_turn(1_500)  # some 50,000 tokens of JSON
    assert TOKENIZER.count(messages[2].content) > 40_000
    with caplog.at_level(logging.WARNING, logger="contextwright.summary"):
        summary = verified(summarizer(server), None, messages, language="en",
                           max_tokens=300, tokenizer=TOKENIZER)
    assert sent_tokens(server) <= 16_000
    body = server.requests[-1].body["messages"][1]["content"]
    assert len(body) < 16_000 * 8  # the request body, in characters, is bounded too
    sent = json.loads(body)["new_messages"]
    assert "tool result (list_refunds): RF-00000 RF-00001" in sent[2]["content"]
    assert sent[0]["content"] == messages[0].content  # small messages go whole
    # The facts the request no longer shows are kept by rule: the cap, not the bound, decides.
    assert "ORD-77" in summary.facts
    assert summary.truncated_facts > 0
    assert TOKENIZER.count(summary.render("en")) <= 300
    (record,) = [r for r in caplog.records
                 if getattr(r, "contextwright", {}).get("event") == "summary_input_shortened"]
    shortened = record.contextwright["shortened"]  # type: ignore[attr-defined]
    assert [(s["index"], s["role"], s["name"]) for s in shortened] == [
        (2, "tool", "list_refunds")]
    assert shortened[0]["tokens"] > 40_000 and shortened[0]["sent_tokens"] <= 4_000
    assert record.contextwright["facts_kept_by_rule"] > 0  # type: ignore[attr-defined]


def test_without_a_cap_every_fact_of_a_shortened_result_stays_in_the_summary(
        server: FakeOpenAIServer) -> None:
    messages = refund_turn(400)
    summary = verified(summarizer(server, max_input_tokens=2_000, max_message_tokens=500),
                       None, messages, language="en")
    assert sent_tokens(server) <= 2_000
    assert {f"RF-{i:05d}" for i in range(400)} <= set(summary.facts)


def test_many_results_within_the_message_bound_share_the_total(
        server: FakeOpenAIServer) -> None:
    messages = [Message(role="user", content="List the refunds of ORD-77 page by page.")]
    for page in range(12):
        call = ToolCall(id=f"c{page}", name="list_refunds", arguments=f'{{"page": {page}}}')
        rows = [{"refund_id": f"RF-{page:02d}{i:03d}", "status": "done",
                 "note": "refund issued to the original card"} for i in range(40)]
        messages += [Message(role="assistant", content="", tool_calls=(call,)),
                     Message(role="tool", tool_call_id=f"c{page}", name="list_refunds",
                             content=json.dumps(rows))]
    each = TOKENIZER.count(messages[2].content)
    assert 1_000 < each < 4_000 and 12 * each > 8_000
    verified(summarizer(server, max_input_tokens=8_000, max_message_tokens=4_000), None,
             messages, language="en")
    assert sent_tokens(server) <= 8_000


def test_a_huge_user_message_is_cut_at_its_head_and_its_facts_kept(
        server: FakeOpenAIServer) -> None:
    pasted = "Please check these orders. " + " ".join(
        f"Order ORD-{i:05d} was charged twice." for i in range(3_000))
    messages = [Message(role="user", content=pasted),
                Message(role="assistant", content="I will check them.")]
    summary = verified(summarizer(server, max_input_tokens=4_000, max_message_tokens=1_000),
                       None, messages, language="en")
    assert sent_tokens(server) <= 4_000
    sent = json.loads(server.requests[-1].body["messages"][1]["content"])["new_messages"]
    assert sent[0]["content"].startswith("Please check these orders. Order ORD-00000")
    assert sent[0]["content"].endswith("[…]")
    assert "ORD-02999" in summary.facts


def test_messages_within_the_bound_are_sent_as_they_are(
        server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    messages = refund_turn(3)
    with caplog.at_level(logging.WARNING, logger="contextwright.summary"):
        verified(summarizer(server), Summary(need="Audit the refunds"), messages,
                 language="en")
    sent = json.loads(server.requests[-1].body["messages"][1]["content"])["new_messages"]
    assert json.loads(sent[2]["content"].split("\n")[1]) == json.loads(messages[2].content)
    assert not caplog.records


def test_a_request_the_previous_summary_alone_fills_is_sent_and_said_to_be_over(
        server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    previous = Summary(need="Audit the refunds", facts=tuple(f"RF-{i:05d}" for i in range(600)))
    messages = [Message(role="user", content="Any news on RF-00001?")]
    with caplog.at_level(logging.WARNING, logger="contextwright.summary"):
        verified(summarizer(server, max_input_tokens=1_000, max_message_tokens=500), previous,
                 messages, language="en")
    (record,) = caplog.records
    report = record.contextwright  # type: ignore[attr-defined]
    assert report["shortened"] == [] and report["request_tokens"] > 1_000
    assert "over max_input_tokens" in record.getMessage()


@pytest.mark.parametrize("limits", [
    {"max_input_tokens": 0}, {"max_input_tokens": "16000"}, {"max_input_tokens": True},
    {"max_message_tokens": 10}, {"max_message_tokens": 1.5},
    {"max_input_tokens": 1_000, "max_message_tokens": 2_000},
], ids=["zero", "text", "bool", "tiny-message", "fraction", "message-over-total"])
def test_bounds_that_cannot_be_used_are_refused_when_the_summarizer_is_made(
        limits: dict[str, Any]) -> None:
    client = OpenAIChatClient("http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(ConfigurationError, match="max_"):
        LLMSummarizer(client, model="m", **limits)
    client.close()


def test_a_session_with_a_huge_tool_result_gets_its_summary_from_a_small_context_model() -> None:
    # The summary model refuses a request over its context (16,000 tokens here), as a real
    # endpoint does: sent whole, the result failed every later summary of the session.
    from contextwright.manager import ContextManager
    from contextwright.session.memory import MemoryStore

    def small_context_model(body: dict[str, Any]) -> Reply:
        if sum(TOKENIZER.count(m["content"]) for m in body["messages"]) > 16_000:
            return Reply(status=400, content="context length exceeded")
        return copying_model(body)

    turn = refund_turn(1_500)
    call = {"id": "c1", "type": "function",
            "function": {"name": "list_refunds", "arguments": '{"order": "ORD-77"}'}}
    with FakeOpenAIServer(responder=small_context_model) as fake:
        client = OpenAIChatClient(fake.base_url, max_retries=0, timeout=30)
        cm = ContextManager(store=MemoryStore(), background=False,
                            summarizer=LLMSummarizer(client, model="m"))
        cm.prepare("u", "s", turn[0].content)
        cm.record("u", "s", assistant={"role": "assistant", "content": None,
                                       "tool_calls": [call]},
                  tool_results=[{"tool_call_id": "c1", "content": turn[2].content}])
        cm.record("u", "s", assistant=turn[3].content)
        for i in range(12):
            cm.prepare("u", "s", f"Round {i}: please note booking code BK{7000 + i}.")
            cm.record("u", "s", assistant=f"Noted booking BK{7000 + i}.")
        state = cm.state("u", "s")
        cm.close()
        client.close()
        sizes = [sum(TOKENIZER.count(m["content"]) for m in r.body["messages"])
                 for r in fake.requests]
    assert fake.requests and max(sizes) <= 16_000
    assert state.summary is not None and state.summary_failures == 0
    assert "ORD-77" in json.dumps(state.summary)
