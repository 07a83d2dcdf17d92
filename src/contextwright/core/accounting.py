"""How many tokens a rendered context costs: content, message framing, tool calls, schemas, images.

Reasoning sent back with an assistant message (``Message.thinking``) counts as its text and
signature.

Content is counted by the exact tokenizer. The framing of each message and the reply's primer
come from the tokenizer's ``ChatFrame``: OpenAI's published counting (3 tokens of framing per
message plus the role, 3 to prime the reply) unless the tokenizer measured its model's own chat
template. Tool calls and schemas are counted as their JSON text plus a fixed framing allowance
that is larger than the provider's own (more compact) rendering, so the count errs on the safe
side. Images are counted by the build's ``ImageTokenRule`` (each provider's published rule).
"""

from __future__ import annotations

from collections.abc import Sequence

from contextwright.core.images import ImagePart
from contextwright.core.items import Message, ThinkingBlock
from contextwright.tokens import DEFAULT_IMAGES, CountingTokenizer, ImageTokenRule, TokenCount

MESSAGE_OVERHEAD = 4
"""OpenAI's framing of one chat message: 3 tokens plus the role (``ChatFrame``'s default)."""
REPLY_PRIMING = 3
"""OpenAI's tokens that prime the assistant's reply (``ChatFrame``'s default)."""
CALL_OVERHEAD = 8
"""Framing of one tool call (id, type, braces) beyond its name and arguments."""
NAME_OVERHEAD = 1
"""OpenAI's framing of a message's ``name`` beyond its text (its published counting)."""
SCHEMA_OVERHEAD = 8
"""Framing of one tool definition beyond its JSON text."""


def call_tokens(message: Message, tokenizer: CountingTokenizer) -> int:
    """Tokens of the tool calls of an assistant message."""
    return sum(
        tokenizer.count(call.name) + tokenizer.count(call.arguments) + CALL_OVERHEAD
        for call in message.tool_calls
    )


THINKING_OVERHEAD = 8
"""Framing of one thinking block beyond its text and signature."""


def thinking_tokens(message: Message, tokenizer: CountingTokenizer) -> int:
    """Tokens of the reasoning an assistant message sends back (``Message.thinking``)."""
    return sum(thinking_block_tokens(block, tokenizer) for block in message.thinking)


def thinking_block_tokens(block: ThinkingBlock, tokenizer: CountingTokenizer) -> int:
    """Tokens of one block of reasoning.

    Its text and its signature (or encrypted data) are counted as text: the provider counts
    the reasoning as input and does not publish how it counts the signature, so the count
    errs on the safe side.
    """
    return tokenizer.count(block.text) + tokenizer.count(block.signature) + THINKING_OVERHEAD


def image_tokens(images: Sequence[ImagePart], rule: ImageTokenRule) -> TokenCount:
    """Tokens of a message's images under ``rule``, and whether the count is exact."""
    total = TokenCount(0)
    for image in images:
        total += rule.count(image.width, image.height, image.detail)
    return total


def frame_tokens(message: Message, tokenizer: CountingTokenizer,
                 images: ImageTokenRule = DEFAULT_IMAGES) -> int:
    """Tokens of a rendered message besides its content: framing, tool calls, images."""
    tokens = tokenizer.frame.message(message.role)
    if message.name is not None and message.role in ("user", "assistant"):
        tokens += tokenizer.count(message.name) + NAME_OVERHEAD  # OpenAI chat sends it
    if message.tool_calls:
        tokens += call_tokens(message, tokenizer)
    if message.images:
        tokens += image_tokens(message.images, images).tokens
    if message.thinking:
        tokens += thinking_tokens(message, tokenizer)
    return tokens


def message_tokens(message: Message, tokenizer: CountingTokenizer,
                   images: ImageTokenRule = DEFAULT_IMAGES) -> int:
    """Tokens of one rendered message."""
    return tokenizer.count(message.content) + frame_tokens(message, tokenizer, images)


def schema_tokens(schema_json: str, tokenizer: CountingTokenizer) -> int:
    """Tokens of one tool definition given as compact JSON."""
    return tokenizer.count(schema_json) + SCHEMA_OVERHEAD


def context_tokens(messages: tuple[Message, ...], schema_jsons: tuple[str, ...],
                   tokenizer: CountingTokenizer,
                   images: ImageTokenRule = DEFAULT_IMAGES) -> int:
    """Total tokens of a context: every message, every tool schema and the reply priming."""
    total = tokenizer.frame.reply + sum(message_tokens(m, tokenizer, images) for m in messages)
    return total + sum(schema_tokens(s, tokenizer) for s in schema_jsons)


def counts_exactly(messages: Sequence[Message], schema_jsons: Sequence[str],
                   tokenizer: CountingTokenizer, images: ImageTokenRule) -> bool:
    """Whether the count of this context is exact: the tokenizer's, each image's, the tools'."""
    if not tokenizer.exact:
        return False
    tools = bool(schema_jsons) or any(m.tool_calls or m.role == "tool" for m in messages)
    if tools and not tokenizer.frame.tools_exact:
        return False
    return all(image_tokens(m.images, images).exact for m in messages if m.images)
