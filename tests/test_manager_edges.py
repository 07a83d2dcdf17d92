"""A session's edges: what a ``prepare`` reads, a failing classifier, a closed manager.

A session's log is read after the running summary, the newest ``max_read_messages`` of it; the
rounds read are shown verbatim. What lies before them is either summarised, recalled, shown
(a greeting before the first question) or reported as never read. Failures are typed and say
what was stored.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright import ClassifierError, ContextManager, ManagerClosed
from contextwright.modes.config import modes_from_mapping
from contextwright.session import MemoryStore
from contextwright.session.store import SessionKey


def _manager(**kwargs: Any) -> ContextManager:
    return ContextManager(store=MemoryStore(), background=False, **kwargs)


def test_a_greeting_before_the_first_question_is_shown() -> None:
    cm = _manager()
    cm.record("u", "s", assistant="Welcome! Your support ticket number is T-5531.")
    context = cm.prepare("u", "s", "what is my ticket number?")
    assert [m["role"] for m in context.to_messages()][-2:] == ["assistant", "user"]
    assert "T-5531" in str(context.to_messages())
    assert not [d for d in context.report.decisions if d.action != "kept"]


def test_a_turn_longer_than_the_read_window_is_still_built() -> None:
    cm = _manager(max_read_messages=40)
    tools = [{"type": "function", "function": {"name": "fetch_page", "parameters": {
        "type": "object", "properties": {}}}}]
    cm.prepare("u", "s", "Crawl the docs site and summarise every page", tools=tools)
    for page in range(30):  # 60 messages in one turn, after its question
        call = f"call_{page}"
        cm.record("u", "s", assistant={"role": "assistant", "content": None, "tool_calls": [
            {"id": call, "type": "function", "function": {
                "name": "fetch_page", "arguments": json.dumps({"page": page})}}]},
            tool_results=[{"tool_call_id": call, "content": f"page {page} text"}])
    context = cm.prepare("u", "s", tools=tools)  # the agent goes on with the same turn
    shown = context.to_messages()
    assert any(m["role"] == "user" and "Crawl the docs" in str(m["content"]) for m in shown)
    assert "page 29 text" in str(shown)


def test_stored_messages_neither_summarised_nor_read_are_reported_as_a_run() -> None:
    modes = modes_from_mapping({"modes": {"sliding_window": {
        "enable_summary": False, "recall": {"share": 0}}}})  # nothing brings them back
    cm = _manager(modes=modes, max_read_messages=20)
    for turn in range(20):
        cm.prepare("u", "s", f"small talk {turn}")
        cm.record("u", "s", assistant=f"ack {turn}")
    context = cm.prepare("u", "s", "what did we talk about first?")
    (run,) = [d for d in context.report.decisions if d.key == "session.*"]
    # 41 messages stored, the newest 20 read (seq 22–41); seq 22 is a reply whose question
    # was not read, so the rounds shown start at seq 23
    assert run.action == "dropped" and run.count == 22
    assert "not read (session seq 1–22)" in run.reason and "max_read_messages" in run.reason
    assert next(r for r in context.report.sources if r.source == "session").dropped == 22


class _FailingClassifier:
    name = "flaky"

    def classify(self, text: str) -> None:
        raise TimeoutError("embedding service timed out")


def test_a_failing_classifier_raises_a_typed_error_naming_the_stored_message() -> None:
    cm = _manager(classifier=_FailingClassifier())
    with pytest.raises(ClassifierError, match="classifier 'flaky' failed: TimeoutError") as raised:
        cm.prepare("u", "s", "hello, can you help me plan a trip?")
    assert raised.value.stored_seq == 1 and isinstance(raised.value.__cause__, TimeoutError)
    assert [m.message["content"] for m in cm.store.read(SessionKey(user_id="u", session_id="s"))
            ] == ["hello, can you help me plan a trip?"]


def test_a_closed_manager_refuses_calls_before_storing_anything() -> None:
    cm = _manager()
    cm.prepare("u", "s", "hello")
    cm.close()
    with pytest.raises(ManagerClosed):
        cm.record("u", "s", assistant="hi")
    with pytest.raises(ManagerClosed):
        cm.prepare("u", "s", "are you there?")
    assert len(cm.store.read(SessionKey(user_id="u", session_id="s"))) == 1
