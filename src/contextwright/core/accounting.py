"""How many tokens a rendered context costs: content, message framing, tool calls, schemas, images.

Reasoning sent back with an assistant message (``Message.thinking``) counts as its text and
signature.

Content is counted by the exact tokenizer. The framing of each message and the reply's primer
come from the tokenizer's ``ChatFrame``: OpenAI's published counting (3 tokens of framing per
message plus the role, 3 to prime the reply) unless the tokenizer measured its model's own chat
template. Tool calls and schemas are counted as their JSON text plus a fixed framing allowance
that is larger than the provider's own (more compact) rendering, so the count errs on the safe
side. Images are counted by the build's ``ImageTokenRule`` (each provider's published rule);
where a rendering shows an image as a placeholder line instead (a Chat Completions tool
message, an Anthropic ``search_result``, an image over Anthropic's 5 MB), a message costs what
its costliest rendering sends (``image_frame_tokens``). A speaker's ``name`` is counted only
where Chat Completions takes it (``providers.chat_speaker``).
"""

from __future__ import annotations

from collections.abc import Sequence

from contextwright.core.images import ImagePart
from contextwright.core.items import Message, ThinkingBlock
from contextwright.core.providers import (
    Carried,
    chat_carried,
    chat_speaker,
    image_renderings,
    with_placeholders,
)
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


def rendered_image_tokens(message: Message, tokenizer: CountingTokenizer, rule: ImageTokenRule,
                          carried: Carried) -> int:
    """Tokens one rendering spends on the message's images beyond its text.

    The images it sends (``carried``) by ``rule``; for the others, what their placeholder lines
    add to the text, counted on the text as sent (a line may merge with its neighbours).
    """
    sent = [image for image in message.images if carried(image)]
    tokens = image_tokens(sent, rule).tokens
    if len(sent) < len(message.images):
        shown = with_placeholders(message, carried)
        tokens += tokenizer.count(shown) - tokenizer.count(message.content)
    return tokens


def image_frame_tokens(message: Message, tokenizer: CountingTokenizer,
                       rule: ImageTokenRule) -> int:
    """Tokens of the message's images in the rendering that spends the most on them.

    One build is rendered for every provider format, and they differ here: Chat Completions
    shows a tool message's images as placeholder lines, the Responses API sends them, the
    Messages API sends them unless the request has no tools or an image is over its 5 MB.
    The build cannot know which will be sent, so it counts the costliest: every rendering then
    fits the budget, and one is over-counted by no more than the difference between an
    image's count and its placeholder line (counting both would waste the smaller in each).
    """
    return max(rendered_image_tokens(message, tokenizer, rule, carried)
               for carried in image_renderings(message))


def frame_tokens(message: Message, tokenizer: CountingTokenizer,
                 images: ImageTokenRule = DEFAULT_IMAGES) -> int:
    """Tokens of a rendered message besides its content: framing, tool calls, images.

    Images by ``image_frame_tokens``: for a message whose images some rendering shows as
    placeholders, this depends on the content too.
    """
    tokens = tokenizer.frame.message(message.role)
    name = chat_speaker(message)
    if name is not None:  # sent only where Chat Completions takes it, so counted only there
        tokens += tokenizer.count(name) + NAME_OVERHEAD
    if message.tool_calls:
        tokens += call_tokens(message, tokenizer)
    if message.images:
        tokens += image_frame_tokens(message, tokenizer, images)
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
    """Whether the count of this context is exact: the tokenizer's, each image's, the tools'.

    The count is of the Chat Completions request, so it is also an estimate where another
    rendering of a message's images costs more than that request sends (``image_frame_tokens``
    counts the costlier).
    """
    if not tokenizer.exact:
        return False
    tools = bool(schema_jsons) or any(m.tool_calls or m.role == "tool" for m in messages)
    if tools and not tokenizer.frame.tools_exact:
        return False
    return all(image_tokens(m.images, images).exact and chat_costs_most(m, tokenizer, images)
               for m in messages if m.images)


def chat_costs_most(message: Message, tokenizer: CountingTokenizer,
                    rule: ImageTokenRule) -> bool:
    """Whether the Chat Completions rendering of the message's images is the one counted."""
    return (rendered_image_tokens(message, tokenizer, rule, chat_carried(message))
            == image_frame_tokens(message, tokenizer, rule))
