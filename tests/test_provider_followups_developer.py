"""A ``developer`` message (OpenAI's name for the system role of its newer models) in a
request's history or turn is read as a system message, as ``chat_messages`` reads it, and shown
as any system message of the history is: joined into the request's system prompt, labelled,
and left out when it repeats the system prompt."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request, chat_messages
from contextwright.core.final import FinalContext
from contextwright.core.providers import PROVIDER_FORMATS, ProviderFormat
from test_provider_requests import check_sdk_type

HISTORY: list[dict[str, Any]] = [
    {"role": "developer", "content": "Answer in French."},
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "bonjour"},
]


def build(history: list[dict[str, Any]], system: str | None = None) -> FinalContext:
    return ContextBuilder(model="gpt-4o").build(
        BuildPlan.named("chat"), Request(user_input="and now?", system=system, history=history))


def as_system(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "role": "system"} if m["role"] == "developer" else m for m in history]


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
def test_a_developer_message_renders_as_a_system_message_does(fmt: ProviderFormat) -> None:
    developer = build(HISTORY, system="Be brief.").to_request(fmt)
    system = build(as_system(HISTORY), system="Be brief.").to_request(fmt)
    assert developer == system
    shown = {"openai": lambda b: b["messages"][0]["content"],
             "openai-responses": lambda b: b["instructions"],
             "anthropic": lambda b: b["system"]}[fmt](developer)
    assert "Be brief." in shown and "Answer in French." in shown
    check_sdk_type(fmt, developer)


def test_request_validate_and_turn_accept_it() -> None:
    Request(user_input="hi", history=HISTORY).validate()
    Request(user_input="hi", turn=[{"role": "developer", "content": "Use tools."}]).validate()


def test_a_developer_message_repeating_the_system_prompt_is_shown_once() -> None:
    ctx = build([{"role": "developer", "content": "Be brief."}, *HISTORY[1:]], system="Be brief.")
    assert str(ctx.to_request("openai")["messages"]).count("Be brief.") == 1


def test_it_is_read_as_chat_messages_reads_it() -> None:
    assert chat_messages(HISTORY)[0]["role"] == "system"
    assert build(HISTORY).to_messages() == build(chat_messages(HISTORY)).to_messages()
