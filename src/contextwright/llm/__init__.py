"""OpenAI-compatible chat client used by LLM summaries, judges and the example agent.

This package imports nothing else of contextwright but ``errors``; the ``openai`` SDK (the
``llm`` extra) is imported only when an ``OpenAIChatClient`` is made, so the ``ChatClient``
protocol is usable without it.
"""

from contextwright.llm.client import ChatClient, ChatReply, OpenAIChatClient, ReplyCall

__all__ = ["ChatClient", "ChatReply", "OpenAIChatClient", "ReplyCall"]
