"""``FinalContext``: the ordered messages of one build, their token count, and the report.

Renders to provider requests (``core.providers``: OpenAI Chat Completions, OpenAI Responses,
Anthropic Messages) and a plain labelled text prompt. Every rendering passes the validator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from contextwright.core.accounting import context_tokens
from contextwright.core.cache import Fingerprint, message_hash, plan_hash, tools_hash
from contextwright.core.items import Message
from contextwright.core.plan import closest_name
from contextwright.core.providers import (
    PROVIDER_FORMATS,
    CallSettings,
    ProviderFormat,
    Rendered,
    anthropic,
    anthropic_added_tokens,
    anthropic_role,
    last_anthropic_message,
    openai_chat,
    openai_responses,
    reasoning_note,
    speaker_note,
)
from contextwright.core.report import BuildReport
from contextwright.core.text import TextVolatile, counted_blocks, render_text, text_blocks
from contextwright.core.validate import (
    check_budget,
    validate_anthropic_request,
    validate_openai,
    validate_responses,
)
from contextwright.errors import InvalidInputError, ValidationError
from contextwright.tokens import DEFAULT_IMAGES, CountingTokenizer, ImageTokenRule

Format = Literal["openai", "openai-responses", "anthropic", "text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemPart:
    """One part of the system message, kept apart for the text rendering."""

    section: str
    """Source name (system, env, examples, notes...)."""
    text: str
    """Its text, without the label the chat rendering adds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalContext:
    """The result of a build."""

    messages: tuple[Message, ...]
    """Ordered messages; the first is the merged system message when there is one."""
    sections: tuple[str, ...]
    """Source name of each message (``system`` for the merged system message)."""
    system_parts: tuple[SystemPart, ...]
    """The parts merged into the system message, in order."""
    tool_schemas: tuple[Mapping[str, Any], ...]
    """OpenAI tool schemas that made it in."""
    schema_jsons: tuple[str, ...]
    """The same schemas as counted (compact JSON)."""
    total_tokens: int
    """Tokens of the target rendering: for chat, the OpenAI count (content, message overhead,
    tool calls, schemas); for text, the exact count of the prompt."""
    available: int
    """The budget the build had."""
    report: BuildReport
    """Every decision and the per-source table."""
    language: str
    """``en`` or ``zh``: the language of labels and separators."""
    tokenizer: CountingTokenizer
    """The tokenizer the build counted with."""
    target: Literal["chat", "text"] = "chat"
    """The rendering the build was counted for: chat messages, or the text prompt."""
    labels: tuple[str | None, ...] = ()
    """Source label of each message (a document's file or section), when it has one."""
    documents: tuple[bool, ...] = ()
    """Whether each message carries a document (rendered in each provider's form for one)."""
    fenced: tuple[bool, ...] = ()
    """Whether each message is untrusted data the build fenced (else the caller's own text)."""
    model: str | None = None
    """The model the builder was made for: the requests' ``model`` unless the caller gives one."""
    max_output_tokens: int | None = None
    """Tokens the plan reserves for the reply (output and reasoning): the requests'
    ``max_tokens`` unless the caller gives one."""
    message_tokens: tuple[int, ...] = ()
    """Tokens of each message (chat builds)."""
    stable_fingerprint: Fingerprint | None = None
    """Set by a build with a cache policy: what the next build continues (see ``fingerprint``)."""
    plan: Any = None
    """The plan the build used (for ``fingerprint``)."""
    cache_key: str | None = None
    """Names the conversation for the provider's cache routing (OpenAI ``prompt_cache_key``)."""
    cache_points: tuple[int, ...] = ()
    """Indexes of ``messages`` where a stable part ends (history's end, the end of what will be
    repeated next call): Anthropic ``cache_control`` breakpoints go there."""
    image_rule: ImageTokenRule = DEFAULT_IMAGES
    """How the build counted images (the model's provider rule)."""
    volatile: TextVolatile | None = None
    """The volatile system parts (the time, notes) a build with a cache policy renders just
    before the input, and the user message that carries them: ``to_text()`` shows them as
    parts under their separators."""
    keys: tuple[str, ...] = ()
    """The key of the item each message renders (``history.m4``; several joined by commas for a
    merged message), as the report's decisions name items: a snapshot diff joins by it what one
    build dropped with what another kept."""

    @property
    def fingerprint(self) -> Fingerprint:
        """What the next build of this conversation needs: ``build(..., previous=...)``.

        Small and plain JSON (``to_json`` / ``Fingerprint.from_json``), for a session store.
        A build made without a cache policy gives one that only lets the next build compare
        prefixes (it continues no layout).
        """
        if self.stable_fingerprint is not None:
            return self.stable_fingerprint
        if self.target == "text":  # the prompt is the text: its blocks are what repeats
            messages, tokens = self.text_counts()
        else:
            messages = tuple(message_hash(m) for m in self.messages)
            tokens = self.message_tokens or (0,) * len(self.messages)
        return Fingerprint(
            plan=plan_hash(self.plan), target=self.target,
            tools=tools_hash(self.schema_jsons), tool_tokens=0,
            messages=messages, tokens=tokens, stable=False)

    def text_counts(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The hash and tokens of each message's block of the text rendering (``to_text``).

        The system message's block holds the system parts and the tool list: in the text
        prompt the tools follow the system prompt, so they are cached with it.
        """
        blocks = text_blocks(self.system_parts, self.schema_jsons, self.sections,
                             self.messages, self.language, self.volatile)
        return counted_blocks(blocks, self.tokenizer.count)

    def _chat_tokens(self) -> int:
        return self.total_tokens if self.target == "chat" else self.recount()

    def _check_rendering_budget(self, tokens: int, rendering: Format) -> None:
        """``check_budget`` for one rendering, saying why when the build was counted for another.

        A build counted for the text prompt may not fit as chat messages (their framing costs
        more than its separators), and one counted for chat messages may not fit as text (its
        escapes cost more): the bare count would read as a miscounted build.
        """
        counted_for = "text" if rendering == "text" else "chat"
        if tokens <= self.available or self.target == counted_for:
            check_budget(tokens, self.available)
            return
        if rendering == "text":
            raise ValidationError(
                f"the text prompt uses {tokens} tokens, over the available {self.available}: "
                "this build was counted for chat messages; build with target='text' for a "
                "text prompt")
        raise ValidationError(
            f"the {rendering} request uses {tokens} tokens, over the available "
            f"{self.available}: this build was counted for the text prompt (target='text'); "
            "build without it for a provider request")

    def to_messages(self, fmt: Format = "openai", *, reasoning: bool = False
                    ) -> list[dict[str, Any]]:
        """Messages in ``fmt``.

        Anthropic and Responses messages come without the system prompt, which their requests
        carry apart: see ``to_request``. ``reasoning`` (``openai`` only): assistant messages
        of the open tool loop keep their reasoning as ``thinking_blocks``, the chat dicts that
        ``chat_messages``, ``to_langchain`` and LiteLLM read, for a framework whose model may
        be Anthropic's (the OpenAI API itself refuses the field).
        """
        if fmt == "text":
            raise ValueError("use to_text() for the text format")
        if reasoning and fmt != "openai":
            raise ValueError("reasoning=True is for the openai chat dicts")
        body = self._render(fmt, self._any_max_tokens()).body
        if fmt == "openai-responses":
            return body["input"]  # type: ignore[no-any-return]
        messages: list[dict[str, Any]] = body["messages"]
        if reasoning:  # one chat dict per message, in order
            messages = [{**rendered, "thinking_blocks": [b.as_block() for b in kept.thinking]}
                        if kept.thinking else rendered
                        for rendered, kept in zip(messages, self.messages, strict=True)]
        return messages

    def to_request(self, fmt: ProviderFormat = "openai", *, model: str | None = None,
                   max_tokens: int | None = None,
                   tool_choice: str | Mapping[str, Any] | None = None,
                   parallel_tool_calls: bool | None = None,
                   cache: bool | None = None,
                   max_tokens_field: Literal["max_completion_tokens", "max_tokens"]
                   = "max_completion_tokens") -> dict[str, Any]:
        """Keyword arguments for the provider's SDK call, ready to send.

        ``openai``: ``client.chat.completions.create(**body)``; ``openai-responses``:
        ``client.responses.create(**body)``; ``anthropic``:
        ``anthropic.Anthropic().messages.create(**body)``. ``max_tokens`` defaults to the
        plan's reserved output (and reasoning) tokens and ``model`` to the builder's model;
        ``model``, ``tool_choice`` (OpenAI chat form, translated; OpenAI's ``allowed_tools``
        form goes to both OpenAI formats, and is refused for Anthropic, which has no such
        choice) and ``parallel_tool_calls`` are sent when given. What the format cannot carry
        is in ``rendering_notes(fmt)``.

        ``cache``: Anthropic requests carry ``cache_control`` breakpoints at the ends of the
        stable parts (``cache_points``; by default for a build with a cache policy), OpenAI
        requests the conversation's ``prompt_cache_key`` whenever the build has one (a
        ``cache_key`` given to the build names the conversation, cache policy or not).
        ``cache=False`` leaves both out.

        ``max_tokens_field`` (``openai`` only): ``max_tokens`` for an OpenAI-compatible server
        that does not read ``max_completion_tokens``.
        """
        if max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise ValueError("max_tokens_field must be 'max_completion_tokens' or 'max_tokens'")
        _check_call_options(model, parallel_tool_calls, cache)
        enabled = self.stable_fingerprint is not None if cache is None else cache
        # The key only routes the calls of one conversation to the same cache: it helps any
        # build the caller named, stable prefix or not, so only an explicit False drops it.
        routed = cache is not False
        offset = 1 if self.messages and self.messages[0].role == "system" else 0
        return self._render(fmt, CallSettings(
            model=self.model if model is None else model,
            max_output_tokens=self.max_output_tokens if max_tokens is None else max_tokens,
            tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
            cache_points=tuple(i - offset for i in self.cache_points if i >= offset)
            if enabled else None,
            cache_key=self.cache_key if routed else None,
            max_tokens_field=max_tokens_field)).body

    def rendering_notes(self, fmt: Format) -> list[str]:
        """What the ``fmt`` rendering could not carry as built.

        For example an empty message it left out, tool calls shown as text because the
        request defines no tools, or images shown as placeholders (always, in ``text``).
        """
        if fmt == "text":
            images = sum(len(m.images) for m in self.messages)
            return ([f"{images} image(s) shown as placeholders: the text prompt carries no "
                     "images"] if images else []) + speaker_note(
                self.messages, lambda m: False, "the text prompt names each message's role, "
                "not who speaks") + reasoning_note(self.messages, "the text prompt")
        return self._render(fmt, self._any_max_tokens()).notes

    def _any_max_tokens(self) -> CallSettings:
        """Settings for a rendering whose ``max_tokens`` nobody will send.

        With the builder's model: how many images an Anthropic request may hold depends on it.
        """
        return CallSettings(model=self.model, max_output_tokens=self.max_output_tokens or 1)

    def _render(self, fmt: ProviderFormat, settings: CallSettings) -> Rendered:
        if settings.max_output_tokens is not None and (
                isinstance(settings.max_output_tokens, bool)
                or not isinstance(settings.max_output_tokens, int)
                or settings.max_output_tokens < 1):
            raise InvalidInputError("max_tokens must be a whole number, 1 or more")
        _check_format(fmt)
        if fmt == "openai":
            rendered = openai_chat(self.messages, self.tool_schemas, settings)
            validate_openai(rendered.body["messages"])
            self._check_rendering_budget(self._chat_tokens(), fmt)
            return rendered
        system, rest, labels, documents = self._split_system()
        if fmt == "openai-responses":
            rendered = openai_responses(system, rest, self.tool_schemas, settings)
            validate_responses(rendered.body)
            self._check_rendering_budget(self._chat_tokens(), fmt)
            return rendered
        self._check_no_prefill(rest, documents)
        rendered = anthropic(system, rest, labels, documents, self.tool_schemas, settings)
        validate_anthropic_request(rendered.body)
        added = anthropic_added_tokens(rest, documents, self.tokenizer)
        self._check_rendering_budget(self._chat_tokens() + added, fmt)
        return rendered

    def _check_no_prefill(self, rest: tuple[Message, ...], documents: tuple[bool, ...]) -> None:
        """Refuse a request whose own messages end with the assistant's, for Anthropic.

        The Messages API takes a final assistant message as a prefill: the model continues it
        rather than answers. Only the caller's messages can end there (an answered turn given
        as this turn's messages); fenced data the build placed there would be a bug, which the
        validator catches.
        """
        last = last_anthropic_message(rest, documents)
        if last is None or anthropic_role(rest[last], documents[last]) != "assistant":
            return
        offset = len(self.messages) - len(rest)
        if self.fenced and self.fenced[offset + last]:
            return
        section = self.sections[offset + last] if self.sections else "the request"
        raise InvalidInputError(
            f"the request's last message, shown by the {section} source, is the assistant's: "
            "the Messages API would "
            "continue it as a prefill instead of answering; end the request with the user's "
            "message or tool results (in a session: prepare the next turn with its text)")

    def to_text(self) -> str:
        """A plain prompt with labelled separators; content cannot forge a separator.

        A build for the chat formats is counted for them; its text rendering (escapes and
        separators cost a little more) may not fit, and then ``ValidationError`` says so:
        build with ``target="text"`` for a text prompt.
        """
        text = render_text(self.system_parts, self.schema_jsons, self.sections, self.messages,
                           self.language, self.volatile)
        self._check_rendering_budget(self.tokenizer.count(text), "text")
        return text

    def _split_system(self) -> tuple[str, tuple[Message, ...], tuple[str | None, ...],
                                     tuple[bool, ...]]:
        labels = self.labels or (None,) * len(self.messages)
        documents = self.documents or (False,) * len(self.messages)
        if self.messages and self.messages[0].role == "system":
            return self.messages[0].content, self.messages[1:], labels[1:], documents[1:]
        return "", self.messages, labels, documents

    def recount(self) -> int:
        """Count the OpenAI rendering again from scratch (for checks and tests)."""
        return context_tokens(self.messages, self.schema_jsons, self.tokenizer, self.image_rule)


def _check_call_options(model: object, parallel_tool_calls: object, cache: object) -> None:
    """Refuse a ``to_request`` option of the wrong kind rather than send it on.

    The body goes to the provider as it is: a ``model`` that is not a name, or a
    ``parallel_tool_calls`` of ``"yes"`` or ``0``, would be refused there on every call (and
    Anthropic, which reads ``False`` only, would allow parallel calls for a ``0``); a
    ``cache`` of ``"no"`` would turn breakpoints on.
    """
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise InvalidInputError("model must be a model name (a non-empty string) or None")
    for name, value in (("parallel_tool_calls", parallel_tool_calls), ("cache", cache)):
        if value is not None and not isinstance(value, bool):
            raise InvalidInputError(f"{name} must be True, False or None")


def _check_format(fmt: str) -> None:
    """Refuse a format name no renderer knows, naming the closest one it does.

    Checked before anything is rendered, so a misspelt name fails the same way in every
    method that takes one.
    """
    if fmt not in PROVIDER_FORMATS:
        hint = closest_name(fmt, PROVIDER_FORMATS)
        raise InvalidInputError(f"unknown provider format {fmt!r}{hint}; "
                                f"choose one of {', '.join(PROVIDER_FORMATS)}")
