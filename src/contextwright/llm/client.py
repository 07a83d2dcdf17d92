"""The ``ChatClient`` protocol and an OpenAI-compatible implementation over the ``openai`` SDK.

``OpenAIChatClient`` talks to any server that speaks chat completions (OpenAI, vLLM, Ollama,
llama.cpp server, LM Studio …) given its base URL. Every failure — unreachable server, timeout,
HTTP error, a body that is not a completion, an empty answer, a request that cannot be written
(``kind`` ``request``) — becomes one ``LLMError`` whose ``kind`` says which; messages name the
failure, never the prompt or the server's reply text. This module may import only
``contextwright.errors`` of this project.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from contextwright.checks import seconds, whole_number
from contextwright.errors import LLMError

if TYPE_CHECKING:
    import openai


@runtime_checkable
class ChatClient(Protocol):
    """Anything that turns chat messages into the assistant's reply text."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> str:
        """The assistant's reply to ``messages`` (OpenAI chat format).

        Raises:
            LLMError: the call failed or the reply was empty.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyCall:
    """One tool call of a reply."""

    name: str
    """Function name."""
    arguments: str
    """Arguments as the model wrote them (JSON text, not checked)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatReply:
    """The first choice of a completion: its text and its tool calls."""

    content: str | None
    """The text (None when the model only called tools)."""
    tool_calls: tuple[ReplyCall, ...] = ()
    """The tool calls, in order."""
    prompt_tokens: int | None = None
    """Input tokens the server billed, when it says."""
    completion_tokens: int | None = None
    """Output tokens the server billed, when it says."""


class OpenAIChatClient:
    """Chat completions over the ``openai`` SDK against any OpenAI-compatible base URL.

    Args:
        base_url: The API root, e.g. ``http://localhost:11434/v1`` (Ollama) or
            ``http://localhost:8000/v1`` (vLLM).
        api_key: Sent as a bearer token; local servers usually ignore it.
        timeout: Seconds per attempt before the call counts as timed out.
        max_retries: Extra attempts the SDK makes on connection errors, 408/409/429 and 5xx,
            with backoff (a server's ``retry-after`` is honoured).
    """

    def __init__(self, base_url: str, api_key: str = "not-needed", *, timeout: float = 30,
                 max_retries: int = 2) -> None:
        check_timeout(timeout)
        whole_number(max_retries, "max_retries", error=_config_error)
        self.timeout = timeout
        self._client = make_sdk_client(base_url, api_key, timeout, max_retries)

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> str:
        """The first choice's text; see ``ChatClient.complete``."""
        options: dict[str, Any] = {"model": model, "messages": messages,
                                   "temperature": temperature}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if response_format is not None:
            options["response_format"] = response_format
        return _reply_text(self._create(options))

    def respond(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """The first choice's text and tool calls; ``tools`` are offered when given.

        Raises:
            LLMError: the call failed, or the reply has neither text nor a tool call.
        """
        options: dict[str, Any] = {"model": model, "messages": messages,
                                   "temperature": temperature}
        if tools:
            options["tools"] = tools
            if tool_choice is not None:
                options["tool_choice"] = tool_choice
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        return _reply(self._create(options))

    def _create(self, options: dict[str, Any]) -> Any:
        """One chat completion; every failure of the call an ``LLMError``."""
        import openai

        if self._client.is_closed():  # the SDK would raise a bare RuntimeError
            raise LLMError("the chat client is closed: make a new OpenAIChatClient",
                           kind="config")
        try:
            return self._client.chat.completions.create(**options)
        except openai.OpenAIError as exc:
            raise _as_llm_error(exc, self.timeout) from None
        except UnicodeEncodeError:  # raised while the body is written, before it is sent
            raise LLMError("chat completion request holds text that is not valid Unicode (a "
                           "lone surrogate)", kind="request") from None
        except (ValueError, RecursionError):  # a 200 whose JSON body does not parse
            raise LLMError("chat completion reply is not valid JSON", kind="response") from None

    def close(self) -> None:
        """Close the underlying HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_sdk_client(base_url: str, api_key: str, timeout: float,
                    max_retries: int) -> openai.OpenAI:
    """An ``openai.OpenAI`` client; ``LLMError`` (kind ``config``) for a base URL it cannot use.

    The URL is checked before anything is sent: a port typo or a missing scheme is the
    caller's mistake, to be reported as such, not a server that could not be reached.
    """
    check_base_url(base_url)
    try:
        import openai
    except ImportError:
        raise LLMError("the openai package is missing: install contextwright[llm]",
                       kind="config") from None
    try:
        return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout,
                             max_retries=max_retries)
    except _invalid_url_errors():
        raise _bad_url(base_url) from None


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds; ``LLMError`` (kind ``config``) unless it is a finite number > 0.

    Checked when the client is made: the SDK takes ``"5"`` or ``None`` without a word and then
    fails (or waits without end) on the first call, and ``True`` would be a one-second timeout.
    """
    return seconds(timeout, "timeout", error=_config_error)


def _config_error(message: str) -> LLMError:
    """A setting the client cannot run with (kind ``config``)."""
    return LLMError(message, kind="config")


def _invalid_url_errors() -> tuple[type[Exception], ...]:
    """The ``InvalidURL`` of each HTTP library installed that the SDK may be built on.

    Older ``openai`` SDKs use ``httpx``, newer ones ``httpx2``; an install with only the
    ``llm`` extra has just the one its SDK needs, so neither may be assumed.
    """
    errors: list[type[Exception]] = []
    for library in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(library)
        except ImportError:
            continue
        error = getattr(module, "InvalidURL", None)
        if isinstance(error, type) and issubclass(error, Exception):
            errors.append(error)
    return tuple(errors)


def check_base_url(base_url: str) -> None:
    """``LLMError`` (kind ``config``) unless ``base_url`` is an http(s) URL with a host.

    A port that is not a number in range, a broken IPv6 literal and whitespace or a control
    character anywhere (a URL read from a file or a variable with its line break) are refused
    too: ``urlsplit`` strips some of them, so the URL it reads is not the one that is sent.
    """
    if any(char.isspace() or not char.isprintable() for char in base_url):
        raise _bad_url(base_url)
    try:
        parts = urlsplit(base_url)
        port_ok = parts.port is None or parts.port > 0  # reading .port checks it
    except ValueError:  # a port that is not a number, a broken IPv6 literal
        raise _bad_url(base_url) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or not port_ok:
        raise _bad_url(base_url)


def _bad_url(base_url: str) -> LLMError:
    shown = base_url if len(base_url) <= 80 else base_url[:79] + "…"
    return LLMError(f"base URL {json.dumps(shown)} is not a valid http(s) URL (like "
                    "http://127.0.0.1:8000/v1)", kind="config")


def _as_llm_error(exc: Exception, timeout: float) -> LLMError:
    """Map an SDK exception to ``LLMError`` without quoting the server's message."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return LLMError(f"chat completion timed out after {timeout:g}s", kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return LLMError("cannot reach the chat-completions endpoint", kind="connection")
    if isinstance(exc, openai.APIStatusError):
        return LLMError(f"chat completion failed with HTTP {exc.status_code}", kind="status",
                        status_code=exc.status_code)
    return LLMError(f"chat completion reply is malformed ({type(exc).__name__})",
                    kind="response")


def _reply_text(completion: object) -> str:
    """The first choice's content, or ``LLMError`` when there is none to use.

    The SDK builds its response objects without validating them, so a server that answers 200
    with the wrong shape yields strings or dicts where objects belong: check every step.
    """
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise LLMError("chat completion reply has no list of choices", kind="response")
    if not choices:
        raise LLMError("chat completion reply has no choices", kind="empty")
    content = getattr(getattr(choices[0], "message", None), "content", None)
    if content is not None and not isinstance(content, str):
        raise LLMError("chat completion reply content is not text", kind="response")
    if content is None or not content.strip():
        raise LLMError("chat completion reply has empty content", kind="empty")
    return content


def _reply(completion: object) -> ChatReply:
    """The first choice as a ``ChatReply``; ``LLMError`` when it holds nothing to use."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise LLMError("chat completion reply has no list of choices", kind="response")
    if not choices:
        raise LLMError("chat completion reply has no choices", kind="empty")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise LLMError("chat completion reply content is not text", kind="response")
    calls = tuple(_reply_call(call) for call in getattr(message, "tool_calls", None) or ())
    if not calls and (content is None or not content.strip()):
        raise LLMError("chat completion reply has neither content nor tool calls", kind="empty")
    usage = getattr(completion, "usage", None)
    return ChatReply(content=content, tool_calls=calls,
                     prompt_tokens=_count(getattr(usage, "prompt_tokens", None)),
                     completion_tokens=_count(getattr(usage, "completion_tokens", None)))


def _reply_call(call: object) -> ReplyCall:
    function = getattr(call, "function", None)
    name = getattr(function, "name", None)
    arguments = call_arguments(getattr(function, "arguments", None))
    if not isinstance(name, str) or arguments is None:
        raise LLMError("chat completion tool call has no name or arguments", kind="response")
    return ReplyCall(name=name, arguments=arguments)


def call_arguments(arguments: object) -> str | None:
    """A tool call's arguments as JSON text, or None when they are missing or not JSON data.

    The API sends a string; some local servers and proxies send the object itself, which is
    the same call and is written out as the JSON text it stands for.
    """
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, Mapping):
        try:
            return json.dumps(arguments, ensure_ascii=False)
        except (TypeError, ValueError):
            return None
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
