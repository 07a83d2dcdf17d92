"""SDK replies that used a tool the provider ran, as ``chat_messages`` and ``record`` read them.

A ``Response`` with a hosted web search and an Anthropic ``Message`` with a server web search:
the search's items and blocks are left out (the answer after them says what they found), the
answer is kept, and ``left_out`` counts what went.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from anthropic.types import Message
from openai.types.responses import Response

from contextwright import ContextManager, chat_messages

SEARCH_RESULT = {"type": "web_search_result", "url": "https://example.com", "title": "KST7",
                 "encrypted_content": "abc", "page_age": None}


def response(*output: dict[str, Any]) -> Response:
    return Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4o",
        "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [{"type": "web_search"}], "output": list(output)})


def message(*content: dict[str, Any]) -> Message:
    return Message.model_validate({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}, "content": list(content)})


WEB_SEARCH_CALL = {"type": "web_search_call", "id": "ws_1", "status": "completed",
                   "action": {"type": "search", "query": "KST7 status"}}
ANSWER = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
          "content": [{"type": "output_text", "text": "KST7 left on time.", "annotations": []}]}
SERVER_SEARCH = ({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                  "input": {"query": "KST7"}},
                 {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                  "content": [SEARCH_RESULT]})


def test_a_responses_hosted_search_is_left_out_and_counted() -> None:
    left_out: dict[str, int] = {}
    assert chat_messages(response(WEB_SEARCH_CALL, ANSWER), left_out=left_out) == [
        {"role": "assistant", "content": "KST7 left on time.", "id": "msg_1"}]
    assert left_out == {"web_search_call": 1}


def test_an_anthropic_server_search_is_left_out_and_counted() -> None:
    left_out: dict[str, int] = {}
    reply = message(*SERVER_SEARCH, {"type": "text", "text": "KST7 left on time."})
    assert chat_messages(reply, left_out=left_out) == [
        {"role": "assistant", "content": "KST7 left on time."}]
    assert left_out == {"server_tool_use": 1, "web_search_tool_result": 1}
    # A reply that paused after the search has no answer yet: no message, not an empty one.
    assert chat_messages(message(*SERVER_SEARCH)) == []
    as_param = {"role": "assistant", "content": [*SERVER_SEARCH, {"type": "text", "text": "Ok"}]}
    assert chat_messages([as_param]) == [{"role": "assistant", "content": "Ok"}]


def test_record_takes_sdk_replies_that_used_the_providers_search(
        caplog: pytest.LogCaptureFixture) -> None:
    for reply in (response(WEB_SEARCH_CALL, ANSWER),
                  message(*SERVER_SEARCH, {"type": "text", "text": "KST7 left on time."})):
        manager = ContextManager(background=False)
        manager.prepare("U1", "S1", "Did KST7 leave on time?")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="contextwright.session"):
            manager.record("U1", "S1", assistant=reply)
        events = [getattr(r, "contextwright", {}) for r in caplog.records]
        left_out = [e["left_out"] for e in events if e.get("event") == "record_left_out"]
        assert left_out and all(count > 0 for count in left_out[0].values()), (
            "what the stored answer leaves out is said, not lost silently")
        built = manager.prepare("U1", "S1", "Which gate?").to_messages("openai")
        assert {"role": "assistant", "content": "KST7 left on time."} in [
            {key: m[key] for key in ("role", "content")} for m in built]
        manager.close()
