"""How many tokens a rendered context costs: content, per-message overhead, tool calls, schemas.

Content is counted by the exact tokenizer. The fixed overheads follow OpenAI's published counting
for chat messages (3 tokens of framing per message plus the role, 3 to prime the reply); tool calls
and schemas are counted as their JSON text plus a fixed framing allowance that is larger than the
provider's own (more compact) rendering, so the count errs on the safe side.
"""

from __future__ import annotations

from contextwright.core.items import Message
from contextwright.tokens import CountingTokenizer

MESSAGE_OVERHEAD = 4
"""Framing of one chat message: 3 tokens plus the role."""
REPLY_PRIMING = 3
"""Tokens that prime the assistant's reply."""
CALL_OVERHEAD = 8
"""Framing of one tool call (id, type, braces) beyond its name and arguments."""
SCHEMA_OVERHEAD = 8
"""Framing of one tool definition beyond its JSON text."""


def call_tokens(message: Message, tokenizer: CountingTokenizer) -> int:
    """Tokens of the tool calls of an assistant message."""
    return sum(
        tokenizer.count(call.name) + tokenizer.count(call.arguments) + CALL_OVERHEAD
        for call in message.tool_calls
    )


def message_tokens(message: Message, tokenizer: CountingTokenizer) -> int:
    """Tokens of one rendered message."""
    return tokenizer.count(message.content) + MESSAGE_OVERHEAD + call_tokens(message, tokenizer)


def schema_tokens(schema_json: str, tokenizer: CountingTokenizer) -> int:
    """Tokens of one tool definition given as compact JSON."""
    return tokenizer.count(schema_json) + SCHEMA_OVERHEAD


def context_tokens(messages: tuple[Message, ...], schema_jsons: tuple[str, ...],
                   tokenizer: CountingTokenizer) -> int:
    """Total tokens of a context: every message, every tool schema and the reply priming."""
    total = REPLY_PRIMING + sum(message_tokens(m, tokenizer) for m in messages)
    return total + sum(schema_tokens(s, tokenizer) for s in schema_jsons)
