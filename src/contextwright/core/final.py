"""``FinalContext``: the ordered messages of one build, their token count, and the report.

Renders to OpenAI chat format (tool calls inline), Anthropic format (system apart, ``tool_use`` /
``tool_result`` blocks) and a plain labelled text prompt. Every rendering passes the validator.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from contextwright.core.accounting import MESSAGE_OVERHEAD, context_tokens
from contextwright.core.items import Message
from contextwright.core.report import BuildReport
from contextwright.core.text import render_text
from contextwright.core.validate import check_budget, validate_anthropic, validate_openai
from contextwright.tokens import CountingTokenizer

Format = Literal["openai", "anthropic", "text"]
ANTHROPIC_LEAD = "(earlier conversation omitted)"


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemPart:
    """One part of the system message, kept apart for the text rendering."""

    section: str
    """Source name (system, env, examples, notes...)."""
    text: str
    """Its text, without the label the chat rendering adds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalContext:
    """The result of a build."""

    messages: tuple[Message, ...]
    """Ordered messages; the first is the merged system message when there is one."""
    sections: tuple[str, ...]
    """Source name of each message (``system`` for the merged system message)."""
    system_parts: tuple[SystemPart, ...]
    """The parts merged into the system message, in order."""
    tool_schemas: tuple[Mapping[str, Any], ...]
    """OpenAI tool schemas that made it in."""
    schema_jsons: tuple[str, ...]
    """The same schemas as counted (compact JSON)."""
    total_tokens: int
    """Tokens of the target rendering: for chat, the OpenAI count (content, message overhead,
    tool calls, schemas); for text, the exact count of the prompt."""
    available: int
    """The budget the build had."""
    report: BuildReport
    """Every decision and the per-source table."""
    language: str
    """``en`` or ``zh``: the language of labels and separators."""
    tokenizer: CountingTokenizer
    """The tokenizer the build counted with."""
    target: Literal["chat", "text"] = "chat"
    """The rendering the build was counted for: chat messages, or the text prompt."""

    def _chat_tokens(self) -> int:
        return self.total_tokens if self.target == "chat" else self.recount()

    def to_messages(self, fmt: Format = "openai") -> list[dict[str, Any]]:
        """Messages in ``fmt`` (for Anthropic, without the system prompt: see ``to_request``)."""
        if fmt == "openai":
            messages = [_openai_message(m) for m in self.messages]
            validate_openai(messages)
            check_budget(self._chat_tokens(), self.available)
            return messages
        if fmt == "anthropic":
            return self.to_request("anthropic")["messages"]  # type: ignore[no-any-return]
        raise ValueError("use to_text() for the text format")

    def to_request(self, fmt: Literal["openai", "anthropic"] = "openai") -> dict[str, Any]:
        """Keyword arguments for the provider's chat call: messages, tools (and system)."""
        if fmt == "openai":
            request: dict[str, Any] = {"messages": self.to_messages("openai")}
            if self.tool_schemas:
                request["tools"] = [dict(s) for s in self.tool_schemas]
            return request
        system, rest = self._split_system()
        messages, lead = _anthropic_messages(rest)
        validate_anthropic(messages)
        lead_tokens = self.tokenizer.count(ANTHROPIC_LEAD) + MESSAGE_OVERHEAD if lead else 0
        check_budget(self._chat_tokens() + lead_tokens, self.available)
        request = {"system": system, "messages": messages}
        if self.tool_schemas:
            request["tools"] = [_anthropic_tool(s) for s in self.tool_schemas]
        return request

    def to_text(self) -> str:
        """A plain prompt with labelled separators; content cannot forge a separator.

        A build for the chat formats is counted for them; its text rendering (escapes and
        separators cost a little more) may not fit, and then ``ValidationError`` says so:
        build with ``target="text"`` for a text prompt.
        """
        text = render_text(self.system_parts, self.schema_jsons, self.sections, self.messages,
                           self.language)
        check_budget(self.tokenizer.count(text), self.available)
        return text

    def _split_system(self) -> tuple[str, tuple[Message, ...]]:
        if self.messages and self.messages[0].role == "system":
            return self.messages[0].content, self.messages[1:]
        return "", self.messages

    def recount(self) -> int:
        """Count the OpenAI rendering again from scratch (for checks and tests)."""
        return context_tokens(self.messages, self.schema_jsons, self.tokenizer)


def _openai_message(message: Message) -> dict[str, Any]:
    rendered: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        rendered["content"] = message.content or None
        rendered["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        rendered["tool_call_id"] = message.tool_call_id
    return rendered


def _anthropic_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id,
                 "content": message.content}]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
        for c in message.tool_calls
    )
    return blocks


def _anthropic_messages(messages: tuple[Message, ...]) -> tuple[list[dict[str, Any]], bool]:
    """Anthropic messages (same roles merged, results first) and whether a lead was added."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        role = "user" if message.role in ("user", "tool") else "assistant"
        blocks = _anthropic_blocks(message)
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": blocks})
    for turn in merged:
        if turn["role"] == "user":  # tool results must open a user message
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    lead = bool(merged) and merged[0]["role"] != "user"
    if lead:
        merged.insert(0, {"role": "user", "content": [{"type": "text", "text": ANTHROPIC_LEAD}]})
    return merged, lead


def _anthropic_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    function = schema.get("function", {})
    return {
        "name": function.get("name"),
        "description": function.get("description", ""),
        "input_schema": function.get("parameters", {"type": "object", "properties": {}}),
    }
