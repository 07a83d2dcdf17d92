"""The validator every rendered message list passes before it leaves the library.

OpenAI: known roles; system messages only at the head; every block of tool messages directly
follows the assistant message whose calls it answers (each call answered exactly once, by
position); no call without its result. Anthropic: the first message is the user's, roles
alternate, every ``tool_use`` is answered by a ``tool_result`` in the next user message and no
result answers nothing. Both: the count is within the available budget. A violation is a bug in
contextwright, raised as ``ValidationError`` and never shipped to a provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextwright.errors import ValidationError

_OPENAI_ROLES = frozenset(("system", "user", "assistant", "tool"))


def check_budget(tokens: int, available: int) -> None:
    """The context must fit the available budget."""
    if tokens > available:
        raise ValidationError(f"context uses {tokens} tokens, over the available {available}")


def validate_openai(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise ``ValidationError`` unless ``messages`` is a legal OpenAI chat message list."""
    seen_other = False
    index = 0
    while index < len(messages):
        message = messages[index]
        role = message.get("role")
        if role not in _OPENAI_ROLES:
            raise ValidationError(f"messages[{index}] has an unknown role")
        if role == "system" and seen_other:
            raise ValidationError(f"messages[{index}] is a system message after the head")
        seen_other = seen_other or role != "system"
        if role == "tool":
            raise ValidationError(f"messages[{index}] is a tool result that follows no call")
        index += 1
        calls = message.get("tool_calls") or []
        if calls:
            index = _check_openai_results(messages, index, [c["id"] for c in calls])


def _check_openai_results(messages: Sequence[Mapping[str, Any]], index: int,
                          call_ids: list[str]) -> int:
    """Check the tool messages after an assistant call; returns the index after them."""
    pending = list(call_ids)
    while index < len(messages) and messages[index].get("role") == "tool":
        call_id = messages[index].get("tool_call_id")
        if call_id not in pending:
            raise ValidationError(f"messages[{index}] answers no call of the message before it")
        pending.remove(call_id)
        index += 1
    if pending:
        raise ValidationError(f"a tool call before messages[{index}] has no result")
    return index


def validate_anthropic(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise ``ValidationError`` unless ``messages`` is a legal Anthropic message list."""
    if messages and messages[0].get("role") != "user":
        raise ValidationError("messages[0] must be a user message")
    previous_calls: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ValidationError(f"messages[{index}] has an unknown role")
        if index and messages[index - 1].get("role") == role:
            raise ValidationError(f"messages[{index}] repeats the role of the message before it")
        blocks = message.get("content") or []
        if role == "user":
            answered = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if sorted(answered) != sorted(previous_calls):
                raise ValidationError(
                    f"messages[{index}] does not answer exactly the tool calls before it")
            previous_calls = []
        else:
            previous_calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if previous_calls:
        raise ValidationError("the last assistant message has tool calls without results")
