"""The plain labelled text rendering, shared by ``FinalContext.to_text`` and the text costing.

Parts are separated by labelled lines (``=== System ===``, ``=== 历史对话 ===``) in the user's
language; each message is ``Speaker: content`` with tool calls as ``→ name(arguments)`` lines.
Content lines that could pass for a separator, label, speaker or call line are escaped (the first
line of a message follows its speaker, so it cannot start a line and is left as it is); parts of
the system message that are untrusted data arrive fenced; a call's name is shown as JSON when it
is not a plain function name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Protocol

from contextwright.core.fence import TOOL_LIST, escape_lines, label, separator
from contextwright.core.items import Message, ToolCall

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


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
    """One non-system message as ``Speaker: content``, its images' placeholders, its calls.

    A placeholder line (``[image: image/png 800x600]``) starts with ``[``, which no content
    line can (it would be escaped), so content cannot pass for an image.
    """
    speaker = label(message.role, language)
    body = escape_lines(message.content, skip_first_line=True)
    images = "".join("\n" + image.placeholder() for image in message.images)
    calls = "".join("\n" + call_line(call) for call in message.tool_calls)
    return f"{speaker}: {body}{images}{calls}" if body else f"{speaker}:{images}{calls}"


def call_line(call: ToolCall) -> str:
    """``→ name(arguments)``; a name that is not a plain function name is shown as JSON."""
    name = call.name if _PLAIN_NAME.fullmatch(call.name) else json.dumps(call.name)
    return escape_lines(f"→ {name}({call.arguments})", skip_first_line=True)


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
        blocks.append(separator(TOOL_LIST, language))
        blocks.extend(escape_lines(schema) for schema in schema_jsons)
    current = None
    for section, message in zip(sections, messages, strict=True):
        if message.role == "system":
            continue
        if section != current:
            blocks.append(separator(section, language))
            current = section
        blocks.append(text_block(message, language))
    return "\n".join(blocks)
