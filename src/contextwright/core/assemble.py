"""Placement: turn the kept units into one ordered message list.

System-role parts of every source (system prompt, environment, examples, notes) are merged into
one leading system message, in plan order, each part after the first under its label; the note
that fenced text is data is appended when the builder asks for it. Tool definitions go to the tools
list. Every other message follows its source's place in the plan, in the source's own order (so a
tool result sits right after the call that asked for it). With ``repeat_question`` the user's
question is repeated at the tail when something follows it. No fenced data ends the request in the
assistant's voice: a digest that is all its source shows after the question goes just before the
question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeVar

from contextwright.core.accounting import message_tokens
from contextwright.core.fence import DATA_NOTE, SYSTEM_MESSAGE, label
from contextwright.core.final import SystemPart
from contextwright.core.gather import Candidate, Costing, Unit
from contextwright.core.items import ContextItem, Message, Role
from contextwright.core.plan import BuildPlan
from contextwright.core.text import TextVolatile

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Assembly:
    """The ordered pieces of a context, before rendering to a format."""

    messages: tuple[Message, ...]
    sections: tuple[str, ...]
    system_parts: tuple[SystemPart, ...]
    tool_schemas: tuple[Mapping[str, Any], ...]
    schema_jsons: tuple[str, ...]
    labels: tuple[str | None, ...]
    """Each message's source label (None for messages without one)."""
    documents: tuple[bool, ...]
    """Whether each message carries a document (an untrusted item with a ``document``)."""
    fenced: tuple[bool, ...]
    """Whether each message is untrusted data, fenced by the build."""
    chat_tokens: int
    """Tokens of the OpenAI rendering (only meaningful when costing for chat)."""
    message_tokens: tuple[int, ...] = ()
    """Tokens of each message in the OpenAI rendering (chat only; empty for text)."""
    schema_tokens: tuple[int, ...] = ()
    """Tokens of each tool schema."""
    keys: tuple[str, ...] = ()
    """The item key of each message (``system`` for the merged system message, the source's
    name for messages the build made: the repeated question, the volatile tail)."""
    candidates: tuple[Candidate | None, ...] = ()
    """The candidate each message is (None for the messages the build made), so what is
    remembered on it (its rendered hash) serves again."""
    volatile: TextVolatile | None = None
    """The volatile system parts and the message that carries them (the text rendering shows
    them as parts)."""


def assemble(plan: BuildPlan, kept: Mapping[str, list[Unit]], user_input: str,
             costing: Costing, *, note: bool, repeat: bool,
             ordered: frozenset[str] = frozenset(), tail: frozenset[str] = frozenset(),
             tail_last: bool = False, question: str | None = None) -> Assembly:
    """Order the kept units into messages (see the module docstring) and count them.

    ``note``: add the data note even if nothing fenced was kept (it was reserved). ``repeat``:
    repeat the question at the tail when something follows it. The count is that of the
    OpenAI rendering, computed from the candidates' costs (each a message's exact content count
    plus its overhead) and an exact count of the merged system message, so a long history is
    not walked twice.

    ``ordered``: sources whose units are already in render order (a stable-prefix layout).
    ``tail``: sources whose content changes from call to call; they render after everything
    that stays, so they do not break the provider's cached prefix: their messages just before
    the user's input, their system parts as one user message there too, or, with
    ``tail_last`` (an agent loop with this turn's results), at the very end, after them.
    ``question``: the source that renders the user's input (``SourceTraits.question``); the
    tail goes before it and the repeated question is its section.
    """
    parts: list[SystemPart] = []
    system_texts: list[str] = []
    schemas: list[Candidate] = []
    messages: list[Message] = []
    sections: list[str] = []
    labels: list[str | None] = []
    documents: list[bool] = []
    fenced_messages: list[bool] = []
    counts: list[int] = []
    keys: list[str] = []
    origins: list[Candidate | None] = []
    tokens = costing.tokenizer.frame.reply
    fenced = False
    tail_parts: list[Candidate] = []
    specs = [spec for spec in plan.sources if spec.source not in tail]
    before_user = [spec for spec in plan.sources if spec.source in tail]
    chat = costing.target == "chat"
    for spec in specs if not before_user else _with_tail(specs, before_user, question):
        in_tail = spec.source in tail
        for candidate in _in_render_order(kept.get(spec.source, []),
                                          spec.source in ordered):
            item, message = candidate.item, candidate.message
            fenced = fenced or item.untrusted
            if in_tail and message.role == "system" and not item.metadata.get("stable"):
                tail_parts.append(candidate)
                continue
            if "schema" in item.metadata:  # ``Candidate.is_schema``
                schemas.append(candidate)
            elif message.role == "system":
                system_texts.append(message.content)
                parts.append(_system_part(candidate))
                continue
            else:
                messages.append(message)
                sections.append(spec.source)
                labels.append(item.label)
                documents.append(is_document(item))
                fenced_messages.append(item.untrusted)
                counts.append(candidate.tokens)
                keys.append(item.key)
                origins.append(candidate)
            if chat:
                tokens += candidate.tokens
    lone = _lone_digests_after(question, sections, origins)
    if lone:
        # A digest stands before what its source kept; when the source kept nothing else and
        # comes after the question, the digest would end the request in the assistant's voice
        # (an Anthropic prefill). It goes before the question instead, as fenced volatile data
        # does, and as a document (a search result for Anthropic), never in the user's role.
        for index in lone:
            documents[index] = True
        order = _moved_before(lone, sections.index(str(question)), len(messages))
        _reorder(messages, order)
        _reorder(sections, order)
        _reorder(labels, order)
        _reorder(documents, order)
        _reorder(fenced_messages, order)
        _reorder(counts, order)
        _reorder(keys, order)
        _reorder(origins, order)
    language = costing.language
    if note or fenced:
        system_texts.append(DATA_NOTE[language])
        parts.append(SystemPart(section=SYSTEM_MESSAGE, text=DATA_NOTE[language]))
    repeated_key = f"{question}.repeated"
    if repeat and question is not None and messages and sections[-1] != question:
        messages.append(repeated_question(user_input, costing))
        sections.append(question)
        labels.append(None)
        documents.append(False)
        fenced_messages.append(False)
        keys.append(repeated_key)
        origins.append(None)
        counts.append(message_tokens(messages[-1], costing.tokenizer))
        tokens += counts[-1]
    user_at = next((i for i, section in enumerate(sections) if section == question),
                   len(messages))
    untrusted = [c for c in tail_parts if c.item.untrusted]
    trusted = [c for c in tail_parts if not c.item.untrusted]
    # Trusted facts (the time) may come last (before a repeated question); fenced data never
    # sits in the user's role, nor at the end (an assistant message there would be a prefill):
    # it goes before the input, as a document (a search result for Anthropic).
    end = len(messages) - (1 if keys and keys[-1] == repeated_key else 0)
    tail_messages: tuple[tuple[list[Candidate], Role, int], ...] = (
        (trusted, "user", end if tail_last else user_at),
        (untrusted, "assistant", user_at))
    facts: Message | None = None
    for group, role, at in tail_messages:
        if not group:
            continue
        message = Message(role=role, content="\n\n".join(c.message.content for c in group))
        facts = message if role == "user" else facts
        messages.insert(at, message)
        sections.insert(at, group[0].item.namespace)
        labels.insert(at, group[0].item.namespace if role == "assistant" else None)
        documents.insert(at, role == "assistant")
        fenced_messages.insert(at, role == "assistant")
        keys.insert(at, ",".join(c.item.key for c in group))
        origins.insert(at, None)
        counts.insert(at, message_tokens(message, costing.tokenizer)
                      if costing.target == "chat" else 0)
        tokens += counts[at]
    if system_texts:
        messages.insert(0, Message(role="system", content="\n\n".join(system_texts)))
        sections.insert(0, SYSTEM_MESSAGE)
        labels.insert(0, None)
        documents.insert(0, False)
        fenced_messages.insert(0, False)
        keys.insert(0, SYSTEM_MESSAGE)
        origins.insert(0, None)
        counts.insert(0, message_tokens(messages[0], costing.tokenizer))
        tokens += counts[0]
    volatile = None
    if facts is not None:  # found by identity: later insertions moved it
        volatile = TextVolatile(at=next(i for i, m in enumerate(messages) if m is facts),
                                parts=tuple(_system_part(c) for c in trusted))
    return Assembly(
        messages=tuple(messages), sections=tuple(sections), system_parts=tuple(parts),
        tool_schemas=tuple(c.item.metadata["schema"] for c in schemas),
        schema_jsons=tuple(c.message.content for c in schemas), labels=tuple(labels),
        documents=tuple(documents), fenced=tuple(fenced_messages),
        chat_tokens=tokens,
        message_tokens=tuple(counts) if costing.target == "chat" else (),
        schema_tokens=tuple(c.tokens for c in schemas), keys=tuple(keys),
        candidates=tuple(origins), volatile=volatile,
    )


def _lone_digests_after(question: str | None, sections: list[str],
                        origins: list[Candidate | None]) -> list[int]:
    """Indexes of digests after the question whose source shows nothing but the digest."""
    if question is None or question not in sections:
        return []
    after = sections.index(question) + 1
    return [index for index in range(after, len(sections))
            if (origin := origins[index]) is not None and "digest" in origin.item.metadata
            and sections.count(sections[index]) == 1]


def _moved_before(moved: list[int], at: int, size: int) -> list[int]:
    """The order of ``size`` positions with those in ``moved`` placed just before ``at``."""
    rest = [index for index in range(size) if index not in moved]
    split = rest.index(at)
    return [*rest[:split], *moved, *rest[split:]]


def _reorder(values: list[T], order: list[int]) -> None:
    """Put ``values`` in ``order`` (a permutation of its positions), in place."""
    values[:] = [values[index] for index in order]


def is_document(item: ContextItem) -> bool:
    """A document or passage: untrusted text its source marked with the document it is from."""
    return item.untrusted and "document" in item.metadata and item.message.role == "assistant"


REPEAT_MAX_TOKENS = 128
"""A long question is repeated at the tail only up to this many tokens."""


def repeated_question(user_input: str, costing: Costing) -> Message:
    """The user's question again, labelled, for the tail (cut if very long)."""
    question = costing.tokenizer.truncate(user_input, REPEAT_MAX_TOKENS)
    if question != user_input:
        question += " …"
    return Message(role="user", content=f"{label('question', costing.language)}: {question}")


def _system_part(candidate: Candidate) -> SystemPart:
    """A system part as the text rendering shows it, under its label or source name."""
    return SystemPart(section=candidate.item.label or candidate.item.namespace,
                      text=_text_part(candidate))


def _text_part(candidate: Candidate) -> str:
    """A system part as the text rendering shows it: fenced if untrusted, else unlabelled."""
    return candidate.message.content if candidate.item.untrusted else candidate.item.message.content


def _in_render_order(units: list[Unit], ordered: bool = False) -> list[Candidate]:
    if ordered:  # units in layout order; a unit's own messages in their order
        return [c for unit in units for c in sorted(unit.candidates, key=_order)]
    candidates = [c for unit in units for c in unit.candidates]
    candidates.sort(key=_order)
    return candidates


_order: Callable[[Candidate], float] = attrgetter("item.order")
"""A candidate's position in render order (its item's ``order``)."""


def _with_tail(specs: list[Any], tail: list[Any], question: str | None) -> list[Any]:
    """``specs`` with the tail sources placed right before ``question`` (else at the end)."""
    at = next((i for i, spec in enumerate(specs) if spec.source == question), len(specs))
    return [*specs[:at], *tail, *specs[at:]]
