"""The plain labelled text rendering, shared by ``FinalContext.to_text`` and the text costing.

Parts are separated by labelled lines (``=== System ===``, ``=== 历史对话 ===``) in the user's
language; each message is ``Speaker: content`` with tool calls as ``→ name(arguments)`` lines;
content lines that could pass for a separator, label or speaker are escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from contextwright.core.fence import escape_lines, label, separator
from contextwright.core.items import Message


class SystemPartLike(Protocol):
    """A part of the system message: its section and its text."""

    @property
    def section(self) -> str:
        """Source name or label of the part."""
        ...

    @property
    def text(self) -> str:
        """The part's text, without the chat rendering's label."""
        ...


def text_block(message: Message, language: str) -> str:
    """One non-system message as ``Speaker: content`` plus its tool calls."""
    speaker = label(message.role, language)
    body = escape_lines(message.content)
    calls = "".join(f"\n→ {call.name}({call.arguments})" for call in message.tool_calls)
    return f"{speaker}: {body}{calls}" if body else f"{speaker}:{calls}"


def render_text(system_parts: Sequence[SystemPartLike], schema_jsons: Sequence[str],
                sections: Sequence[str], messages: Sequence[Message], language: str) -> str:
    """The whole prompt as text."""
    blocks: list[str] = []
    previous = None
    for part in system_parts:
        if part.section != previous:
            blocks.append(separator(part.section, language))
            previous = part.section
        blocks.append(escape_lines(part.text))
    if schema_jsons:
        blocks.append(separator("tools", language))
        blocks.extend(schema_jsons)
    current = None
    for section, message in zip(sections, messages, strict=True):
        if message.role == "system":
            continue
        if section != current:
            blocks.append(separator(section, language))
            current = section
        blocks.append(text_block(message, language))
    return "\n".join(blocks)
