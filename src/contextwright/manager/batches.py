"""What ``record`` appends: the caller's answer, tool results and messages, checked, as one batch.

Each part may be an OpenAI chat dict or SDK object, an OpenAI Responses item or response, or an
Anthropic message (``contextwright.convert.chat_messages``); a part a later build could not read
is refused here, before anything is stored. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextwright.convert import chat_messages
from contextwright.core.items import parse_message
from contextwright.errors import InvalidInputError

RECORD_TAIL = 16
"""Stored messages ``record`` reads to check new tool results (more when all are results)."""


def recorded_messages(assistant: object, tool_results: object, messages: object,
                       now: str, left_out: dict[str, int] | None = None
                       ) -> list[dict[str, Any]]:
    """The batch ``record`` appends, checked (``InvalidInputError`` names what is wrong).

    Each part may be an OpenAI chat dict or SDK object, an OpenAI Responses item or response, or
    an Anthropic message (``contextwright.convert.chat_messages``). ``left_out`` counts, by
    type, the parts no chat message carries that were left out (a hosted tool's items).
    """
    counts: dict[str, int] = {} if left_out is None else left_out
    batch: list[dict[str, Any]] = []
    if isinstance(assistant, str):
        batch.append({"role": "assistant", "content": assistant})
    elif assistant is not None:
        batch += [_with_role(message, "assistant", "assistant")
                  for message in chat_messages(assistant, "assistant", left_out=counts)]
    for index, result in enumerate(_message_list(tool_results, "tool_results")):
        where = f"tool_results[{index}]"
        batch += [_with_role(message, "tool", where)
                  for message in chat_messages(result, where, left_out=counts)]
    for index, message in enumerate(_message_list(messages, "messages")):
        if isinstance(message, str | bytes):
            raise InvalidInputError(f"messages[{index}] must be a message object")
        batch += chat_messages(message, f"messages[{index}]", left_out=counts)
    for index, message in enumerate(batch):
        message.setdefault("timestamp", now)
        parse_message(message, f"record[{index}]")  # refuse what a later build could not read
    return batch


def _message_list(value: object, name: str) -> Sequence[object]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidInputError(f"{name} must be a list of message objects")
    return value


def _with_role(message: object, role: str, where: str) -> dict[str, Any]:
    """``message`` as a ``role`` message; a different role in it is refused, not obeyed."""
    if not isinstance(message, Mapping):
        raise InvalidInputError(f"{where} must be a message object")
    given = message.get("role", role)
    if given != role:
        raise InvalidInputError(f"{where}.role must be {role!r} (or left out)")
    return {**message, "role": role}
