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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from contextwright.core.cache import short_hash
from contextwright.core.fence import TOOL_LIST, escape_lines, label, separator
from contextwright.core.items import Message, ToolCall
from contextwright.core.providers import split_fence

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
    line can (it would be escaped), so content cannot pass for an image. The images of fenced
    data sit inside its fence, before the closing line, as in the chat renderings.
    """
    speaker = label(message.role, language)
    head, tail = split_fence(message.content) if message.images else (message.content, "")
    body = escape_lines(head, skip_first_line=True)
    images = "".join("\n" + image.placeholder() for image in message.images)
    closing = "\n" + escape_lines(tail) if tail else ""
    calls = "".join("\n" + call_line(call) for call in message.tool_calls)
    if not body:
        return f"{speaker}:{images}{closing}{calls}"
    return f"{speaker}: {body}{images}{closing}{calls}"


def call_line(call: ToolCall) -> str:
    """``→ name(arguments)``; a name that is not a plain function name is shown as JSON."""
    name = call.name if _PLAIN_NAME.fullmatch(call.name) else json.dumps(call.name)
    return escape_lines(f"→ {name}({call.arguments})", skip_first_line=True)


@dataclass(frozen=True, slots=True)
class TextVolatile:
    """The volatile system parts (the time, notes) and the message that carries them.

    Chat renderings send them as one user message just before the input (what changes every
    call goes last); the text rendering shows that message as the parts themselves, each under
    its separator, not as words the user said.
    """

    at: int
    """Index of the carrying message."""
    parts: Sequence[SystemPartLike]


def render_text(system_parts: Sequence[SystemPartLike], schema_jsons: Sequence[str],
                sections: Sequence[str], messages: Sequence[Message], language: str,
                volatile: TextVolatile | None = None) -> str:
    """The whole prompt as text."""
    blocks = text_blocks(system_parts, schema_jsons, sections, messages, language, volatile)
    return "\n".join(line for block in blocks for line in block)


def text_blocks(system_parts: Sequence[SystemPartLike], schema_jsons: Sequence[str],
                sections: Sequence[str], messages: Sequence[Message], language: str,
                volatile: TextVolatile | None = None) -> list[list[str]]:
    """The text rendering's lines, one block per message (aligned with ``messages``).

    The system message's block holds the system parts and the tool list (the first message's
    does when there is no system message); another system message's is empty. A message's
    block opens with its section's separator when the section starts there. Aligned blocks
    let a cached text build compare its prompt with the previous one message by message.
    """
    head = _parts_lines(system_parts, language)
    if schema_jsons:
        head += [separator(TOOL_LIST, language), *(escape_lines(s) for s in schema_jsons)]
    blocks: list[list[str]] = []
    current: str | None = None
    for index, (section, message) in enumerate(zip(sections, messages, strict=True)):
        lines, head = head, []
        if volatile is not None and index == volatile.at:
            lines += _parts_lines(volatile.parts, language)
            current = None  # what follows the parts names its own section again
        elif message.role != "system":
            if section != current:
                lines.append(separator(section, language))
                current = section
            lines.append(text_block(message, language))
        blocks.append(lines)
    if head:  # no message to carry them
        blocks.append(head)
    return blocks


def counted_blocks(blocks: Sequence[Sequence[str]], count: Callable[[str], int]
                   ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    r"""The hash and the tokens of each block of ``text_blocks``, for the prompt cache.

    A text prompt is cached by its leading text: comparing blocks in order finds how much of
    it repeats the previous prompt, and their tokens say how many tokens that is. A block is
    counted with the line break that joins it to the next one: tokenizers of the GPT family
    merge a line break into the punctuation before it (``?\n``), never into the letters or
    the ``===`` after it, so the blocks' tokens add up to the prompt's.
    """
    texts = ["\n".join(lines) for lines in blocks]
    last = max((i for i, lines in enumerate(blocks) if lines), default=-1)
    tokens = tuple(count(text + "\n") if blocks[i] and i < last else count(text)
                   for i, text in enumerate(texts))
    return tuple(short_hash(text) for text in texts), tokens


def _parts_lines(parts: Sequence[SystemPartLike], language: str) -> list[str]:
    """System parts as text: a separator where the section changes, then each part escaped."""
    lines: list[str] = []
    previous = None
    for part in parts:
        if part.section != previous:
            lines.append(separator(part.section, language))
            previous = part.section
        lines.append(escape_lines(part.text))
    return lines
