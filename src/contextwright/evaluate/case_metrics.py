"""Metrics of one built context against what its case says it needs, must not hold, and where.

Everything is measured on the rendered OpenAI request (messages and tool schemas), so only what
a model would see is credited. A request message is *shown* when a rendered message of its
own shows it (request messages are placed in order, each rendered message standing for one at
most, so a copy of the words inside another message does not count):

* a user or assistant message: a rendered message of its role has its whole text (a cut message
  has not; a recalled turn's marker line is framing); a system message: its text is in the
  system message the build merges it into;
* an assistant message with tool calls: a rendered assistant message makes every one of its
  calls (name, JSON-equal arguments, and the id the rendering gives it: Chat Completions ids
  longer than 40 characters are sent shortened);
* a tool result: a rendered result answers its call, in any form the build chose (full,
  compacted, reduced to key facts) but a placeholder; list the values the model needs as facts
  to check that they survived.

A document is shown when its whole text appears verbatim; a tool when its schema is offered.
Irrelevant material is counted by what of it is shown: its whole text, else each of its
sentences (16 characters or more) that appears verbatim; a fact also in tool-call arguments.

A message with images is read by its text parts. Its images count in ``tokens`` (what the model
is sent, as the build counted them) but not in density and noise, which are shares of the text
and tool schemas: an image is neither a fact nor a sentence to look for. Pure functions: no
builds, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextwright.compress.tool_results import dropped_tool_result
from contextwright.core.items import Message, parse_message
from contextwright.core.providers import CHAT_IDS, CallIds
from contextwright.core.request import Request
from contextwright.evaluate.metrics import (
    HEAD,
    TAIL,
    Count,
    Msg,
    content_text,
    context_tokens,
    pair_problems,
    relative_position,
)
from contextwright.sources.conversation import MISSING_RESULT, RECALL_PREFIX, looks_recalled

PIECE_MIN_CHARS = 16
"""Sentences shorter than this are not looked for alone: "OK." would be found anywhere."""
_PIECE_BREAK = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*|\n+")
"""Where a text breaks into sentences: after Latin punctuation and a space, after CJK
punctuation at once (Chinese and Japanese write no space after a sentence), at line ends."""
_DROPPED_PREFIX = dropped_tool_result("\x00").split("\x00", 1)[0]
_FENCE_MARKER = re.compile(r"(?:^|\n)<<(?:data|end) ([0-9a-f]{12})(?=[ >])")
"""The 12 hex digits of a fence line (``fence``): a hash, not text of the context."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Wanted:
    """Material a case names: facts (verbatim text), message ids, document ids, tool names."""

    facts: tuple[str, ...] = ()
    """Exact strings."""
    messages: tuple[str, ...] = ()
    """Ids of ``request.history`` or ``request.turn`` messages."""
    documents: tuple[str, ...] = ()
    """Ids of ``request.documents``."""
    tools: tuple[str, ...] = ()
    """Names of ``request.tools``."""

    def __len__(self) -> int:
        """How many things are named."""
        return len(self.facts) + len(self.messages) + len(self.documents) + len(self.tools)


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where things must sit."""

    head: tuple[str, ...] = ()
    """Texts (core constraints) whose first copy must be in the first message or start within
    the first ``HEAD`` share of the context's tokens."""
    tail: tuple[str, ...] = ()
    """Texts whose last copy must be in the last message or start after the ``TAIL`` share."""
    question_at_tail: bool = False
    """The user's input must sit at the tail the same way."""

    def __len__(self) -> int:
        """How many placement checks there are."""
        return len(self.head) + len(self.tail) + int(self.question_at_tail)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checks:
    """Everything one case checks in its context."""

    required: Wanted = field(default_factory=Wanted)
    """What the context must show (completeness; counted as useful for density)."""
    noise: Wanted = field(default_factory=Wanted)
    """What is irrelevant: every shown token of it counts as noise."""
    placement: Placement = field(default_factory=Placement)
    """Where things must sit (position)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Measure:
    """The metrics of one context and what lowered them."""

    scores: Mapping[str, float | None]
    """``completeness``, ``density``, ``position``, ``noise``, ``pair_integrity``, ``tokens``
    (``None``: the case checks nothing of that kind)."""
    missing: tuple[str, ...] = ()
    """Required things not shown (``fact[0]``, ``message h3``, ``document d1``, ``tool t``)."""
    noise_shown: tuple[str, ...] = ()
    """Irrelevant things shown, whole or in part."""
    misplaced: tuple[str, ...] = ()
    """Placement checks that failed, with where the text sits."""
    useful_tokens: int = 0
    """Tokens of the system prompt, the input and the required material shown."""
    noise_tokens: int = 0
    """Tokens of irrelevant material shown."""


@dataclass(frozen=True, slots=True)
class Span:
    """Characters ``start:end`` of one rendered message's content.

    ``start == CALLS`` stands for all of that message's tool calls instead.
    """

    message: int
    start: int
    end: int


CALLS = -1
"""``Span.start`` of a span covering a message's tool calls."""


class Rendered:
    """The rendered request with the look-ups the metrics need."""

    def __init__(self, messages: Sequence[Msg], tools: Sequence[Mapping[str, Any]],
                 count: Count) -> None:
        self.messages = messages
        self.count = count
        self.contents: list[str] = [_text_of(m) for m in messages]
        # Every content is a substring of this, so a text not in it is in none (one search
        # instead of one per message, for the many sentences of a long cut text).
        self._joined = "\n".join(self.contents)
        self._markers = [[match.span(1) for match in _FENCE_MARKER.finditer(content)]
                         if "<<" in content else [] for content in self.contents]
        self.tools = {_tool_name(schema): schema for schema in tools}
        self._by_text: dict[tuple[str, str], list[int]] = {}
        self._by_call: dict[str, list[int]] = {}
        for index, message in enumerate(messages):
            role = str(message.get("role"))
            self._by_text.setdefault((role, self.text_as_given(index)), []).append(index)
            for call in message.get("tool_calls") or ():
                self._by_call.setdefault(str(call.get("id")), []).append(index)
        self.message_tokens = context_tokens(messages, count)
        self.total = self.message_tokens + sum(self.tool_tokens(n) for n in self.tools)

    def tool_tokens(self, name: str) -> int:
        """Tokens of one offered tool's schema (0 when it is not offered)."""
        schema = self.tools.get(name)
        if schema is None:
            return 0
        return self.count(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))

    def find_all(self, text: str) -> list[Span]:
        """Every verbatim copy of ``text`` in the messages' contents.

        Not a copy that overlaps a fence marker: its hex digits are a hash, so a short number
        (``25``) would be found in one by chance.
        """
        spans: list[Span] = []
        if not text or text not in self._joined:
            return spans
        for index, content in enumerate(self.contents):
            markers = self._markers[index]
            start = content.find(text) if text else -1
            while start >= 0:
                end = start + len(text)
                if not any(start < m_end and m_start < end for m_start, m_end in markers):
                    spans.append(Span(index, start, end))
                    start = content.find(text, end)
                else:
                    start = content.find(text, start + 1)
        return spans

    def in_arguments(self, text: str) -> bool:
        """Whether ``text`` appears in the arguments of a rendered tool call.

        In the JSON text as sent, or in its values: arguments written with escaped characters
        (``json.dumps`` escapes every non-ASCII one by default), or holding a quote or a
        backslash, carry the fact the model reads although the text differs.
        """
        return any(_in_json(text, call.get("function", {}).get("arguments", ""))
                   for _, call in self.calls())

    def text_as_given(self, index: int) -> str:
        """Message ``index``'s text without the framing the build adds to a shown message."""
        return _unframed(self.contents[index])

    def showing(self, role: str, text: str) -> list[int]:
        """The messages of ``role`` whose whole text, as given, is ``text``."""
        return self._by_text.get((role, text), [])

    def with_role(self, role: str) -> list[int]:
        """The messages of ``role``."""
        return [index for index, message in enumerate(self.messages)
                if message.get("role") == role]

    def holding_call(self, call_id: str) -> list[int]:
        """The assistant messages making a call with the rendered id ``call_id``."""
        return self._by_call.get(call_id, [])

    def calls(self) -> Iterable[tuple[int, Mapping[str, Any]]]:
        """(message index, call) of every rendered tool call."""
        for index, message in enumerate(self.messages):
            if message.get("role") == "assistant":
                for call in message.get("tool_calls") or ():
                    yield index, call

    def makes_calls(self, index: int, message: Message) -> bool:
        """Whether the rendered message ``index`` makes every call of ``message``.

        Same name, JSON-equal arguments, and the id the rendering gives the call: Chat
        Completions takes ids of at most 40 characters, so a longer one (``call_<uuid4>``) is
        sent shortened, and a block's repeated id is sent with a suffix.
        """
        shown = {call.get("id"): call.get("function", {})
                 for call in self.messages[index].get("tool_calls") or ()}
        ids = rendered_call_ids(message)
        for call in message.tool_calls:
            function = shown.get(ids.call(call.id))
            if (function is None or function.get("name") != call.name
                    or not _same_json(function.get("arguments"), call.arguments)):
                return False
        return True

    def results_after(self, index: int) -> Iterable[int]:
        """The rendered tool messages of the block right after message ``index``."""
        index += 1
        while index < len(self.messages) and self.messages[index].get("role") == "tool":
            yield index
            index += 1

    def tokens(self, spans: Iterable[Span]) -> int:
        """Tokens of the union of ``spans`` (overlaps counted once)."""
        by_message: dict[int, list[tuple[int, int]]] = {}
        calls: set[int] = set()
        for span in spans:
            if span.start == CALLS:
                calls.add(span.message)
            else:
                by_message.setdefault(span.message, []).append((span.start, span.end))
        total = sum(self.count(self.contents[index][start:end])
                    for index, intervals in by_message.items()
                    for start, end in _merged(intervals))
        for index in calls:
            total += sum(self.count(str(call.get("function", {}).get("arguments", "")))
                         for call in self.messages[index].get("tool_calls") or ())
        return total


def measure(request: Request, checks: Checks, messages: Sequence[Msg],
            tools: Sequence[Mapping[str, Any]], count: Count, *,
            image_tokens: int = 0) -> Measure:
    """The case metrics of one rendered context (see the module docstring).

    ``image_tokens``: what the build counted for the images it sends (in ``tokens`` only).
    """
    rendered = Rendered(messages, tools, count)
    found = Finder(request, rendered)
    required, missing, useful = _required(checks.required, found)
    noise_spans, noise_tools, noise_shown, noise_in_calls = _noise(checks.noise, found)
    useful += found.all_copies(request.user_input)
    if request.system:
        useful += found.all_copies(request.system)[:1]
    # A text named only for where it must sit is not useful by itself: a case may ask where a
    # noise message sits, and counting it here would make noise raise density.
    placed, misplaced = _placement(checks.placement, request, rendered)
    useful_tokens = rendered.tokens(useful) + sum(rendered.tool_tokens(t)
                                                  for t in checks.required.tools)
    noise_tokens = rendered.tokens(noise_spans) + noise_in_calls + sum(
        rendered.tool_tokens(t) for t in noise_tools)
    total = rendered.total
    scores: dict[str, float | None] = {
        "completeness": required / len(checks.required) if len(checks.required) else None,
        "density": min(useful_tokens / total, 1.0) if total else 0.0,
        "position": placed / len(checks.placement) if len(checks.placement) else None,
        "noise": (min(noise_tokens / total, 1.0) if total else 0.0) if len(checks.noise)
        else None,
        "pair_integrity": 0.0 if pair_problems(messages) else 1.0,
        "tokens": float(total + image_tokens),
    }
    return Measure(scores=scores, missing=tuple(missing), noise_shown=tuple(noise_shown),
                   misplaced=tuple(misplaced), useful_tokens=useful_tokens,
                   noise_tokens=noise_tokens)


def _required(wanted: Wanted, found: Finder) -> tuple[int, list[str], list[Span]]:
    """(how many are shown, what is missing, the spans of what is shown)."""
    shown = 0
    missing: list[str] = []
    spans: list[Span] = []
    for index, fact in enumerate(wanted.facts):
        copies = found.all_copies(fact)
        if copies or found.rendered.in_arguments(fact):
            shown += 1
            spans += copies
        else:
            missing.append(f"fact[{index}] {_quoted(fact)}")
    for kind, ids, look in (("message", wanted.messages, found.message),
                            ("document", wanted.documents, found.document)):
        for item_id in ids:
            located = look(item_id, whole=True)
            if located:
                shown += 1
                spans += located
            else:
                missing.append(f"{kind} {item_id}")
    for name in wanted.tools:
        if name in found.rendered.tools:
            shown += 1
        else:
            missing.append(f"tool {name}")
    return shown, missing, spans


def _noise(wanted: Wanted, found: Finder) -> tuple[list[Span], list[str], list[str], int]:
    """What of the irrelevant material is shown.

    (spans of text, tools offered, what was shown, tokens of facts found only in tool-call
    arguments).
    """
    spans: list[Span] = []
    shown: list[str] = []
    in_calls = 0
    for index, fact in enumerate(wanted.facts):
        copies = found.all_copies(fact)
        # A fact the model reads in an old call's arguments is shown, as a required one is.
        only_in_calls = not copies and found.rendered.in_arguments(fact)
        if copies or only_in_calls:
            spans += copies
            in_calls += found.rendered.count(fact) if only_in_calls else 0
            shown.append(f"fact[{index}] {_quoted(fact)}")
    for kind, ids, look in (("message", wanted.messages, found.message),
                            ("document", wanted.documents, found.document)):
        for item_id in ids:
            located = look(item_id, whole=False)
            if located:
                spans += located
                shown.append(f"{kind} {item_id}")
    tools = [name for name in wanted.tools if name in found.rendered.tools]
    shown += [f"tool {name}" for name in tools]
    return spans, tools, shown, in_calls


def _placement(placement: Placement, request: Request, rendered: Rendered
               ) -> tuple[int, list[str]]:
    """(checks met, the failed ones described)."""
    met = 0
    failed: list[str] = []
    checks = [(f"head[{i}]", text, True) for i, text in enumerate(placement.head)]
    checks += [(f"tail[{i}]", text, False) for i, text in enumerate(placement.tail)]
    if placement.question_at_tail:
        checks.append(("question", request.user_input, False))
    for name, text, at_head in checks:
        copies = rendered.find_all(text)
        if not copies:
            failed.append(f"{name} not shown")
            continue
        span = copies[0] if at_head else copies[-1]
        where = relative_position((span.message, span.start), rendered.messages, rendered.count)
        if at_head and (span.message == 0 or where < HEAD):
            met += 1
        elif not at_head and (span.message == len(rendered.messages) - 1 or where > TAIL):
            met += 1
        else:
            failed.append(f"{name} sits at {where:.2f} of the context, not at the "
                          f"{'head' if at_head else 'tail'}")
    return met, failed


class Finder:
    """Finds a request's messages, documents and texts in its rendered context.

    A request message is shown only by a rendered message of its own: history and turn
    messages are placed in order, each on the first rendered message of its role that shows
    it whole and that no earlier message took. A copy of its words elsewhere (inside the
    user's input, in a later message that repeats it) does not stand for it.
    """

    def __init__(self, request: Request, rendered: Rendered) -> None:
        self.request = request
        self.rendered = rendered
        self._lists = [[parse_message(raw, f"{name}[{i}]") for i, raw in enumerate(messages)]
                       for name, messages in (("history", request.history),
                                              ("turn", request.turn))]
        self._placed: dict[tuple[int, int], int] | None = None
        # Looked up once per named id: a scan of every message per id was quadratic on a long
        # history whose messages a case names one by one.
        self._by_id: dict[str, list[tuple[int, int]]] = {}
        self._call_made_at: list[dict[str, int]] = []
        for list_index, messages in enumerate(self._lists):
            made: dict[str, int] = {}
            for position, message in enumerate(messages):
                if message.id is not None:
                    self._by_id.setdefault(message.id, []).append((list_index, position))
                for call in message.tool_calls:
                    made.setdefault(call.id, position)
            self._call_made_at.append(made)

    def all_copies(self, text: str) -> list[Span]:
        """Every verbatim copy of ``text``."""
        return self.rendered.find_all(text)

    def message(self, message_id: str, *, whole: bool) -> list[Span]:
        """Where the messages with this id are shown (empty: nowhere).

        ``whole=False`` also credits the sentences of a text message that was cut.
        """
        placed = self._placements()
        spans: list[Span] = []
        for list_index, position in self._by_id.get(message_id, ()):
            message = self._lists[list_index][position]
            at = placed.get((list_index, position))
            if at is not None:
                spans += self._spans_at(at, message)
            elif not whole:
                spans += self._parts(message, list_index, position)
        return spans

    def document(self, document_id: str, *, whole: bool) -> list[Span]:
        """Where the documents with this id (every version) are shown."""
        spans: list[Span] = []
        for document in self.request.documents:
            if document.id == document_id:
                spans += self._text(document.text, whole)
        return spans

    def _placements(self) -> dict[tuple[int, int], int]:
        """(list, position) of each request message shown whole → its rendered message."""
        if self._placed is None:
            self._placed = {}
            # The user's input is its own message: an earlier message with the same words
            # (the question asked again) is shown only by a message of its own.
            taken = set(self.rendered.showing("user", self.request.user_input)[-1:])
            for list_index, messages in enumerate(self._lists):
                calls: dict[str, tuple[Message, int | None]] = {}
                for position, message in enumerate(messages):
                    at = self._place(message, calls, taken)
                    if at is not None:
                        self._placed[(list_index, position)] = at
                        if message.role != "system":  # system messages share one rendered
                            taken.add(at)
                    for call in message.tool_calls:
                        calls[call.id] = (message, at)
        return self._placed

    def _place(self, message: Message, calls: Mapping[str, tuple[Message, int | None]],
               taken: set[int]) -> int | None:
        """The free rendered message showing ``message`` whole, if any.

        ``calls``: the message (and where it is shown) of each call id made so far.
        """
        rendered = self.rendered
        if message.role == "tool" and (message.tool_call_id or "") in calls:
            caller, at = calls[message.tool_call_id or ""]
            if at is None:
                return None
            wanted = rendered_call_ids(caller).result(message.tool_call_id)
            return next((index for index in rendered.results_after(at)
                         if index not in taken
                         and rendered.messages[index].get("tool_call_id") == wanted
                         and not _placeholder(rendered.contents[index])), None)
        if message.role == "system":
            # The build merges history system messages into the one system message.
            return next((index for index in rendered.with_role("system")
                         if message.content and message.content in rendered.contents[index]),
                        None)
        if message.tool_calls:
            first = rendered_call_ids(message).call(message.tool_calls[0].id)
            candidates: Iterable[int] = (
                index for index in rendered.holding_call(first)
                if rendered.makes_calls(index, message)
                and rendered.text_as_given(index) == message.content)
        else:
            candidates = rendered.showing(message.role, message.content)
        return next((index for index in candidates if index not in taken), None)

    def _spans_at(self, index: int, message: Message) -> list[Span]:
        """The spans of ``message`` shown whole by the rendered message ``index``."""
        content = self.rendered.contents[index]
        if message.role == "tool":
            return [_inside_fence(index, content)]
        spans = [Span(index, CALLS, CALLS)] if message.tool_calls else []
        if message.content:
            start = (content.find(message.content) if message.role == "system"
                     else len(content) - len(message.content))
            spans.append(Span(index, start, start + len(message.content)))
        return spans

    def _parts(self, message: Message, list_index: int, position: int) -> list[Span]:
        """What of a message not shown whole is shown: its calls' message, its sentences.

        ``list_index`` and ``position``: where the message is in the request.
        """
        if message.role == "tool":
            made_at = self._call_made_at[list_index].get(message.tool_call_id or "")
            made = made_at is not None and made_at < position
            # A result whose call is made shows through the call's block, or not at all.
            return [] if made else self._text(message.content, whole=False)
        spans: list[Span] = []
        if message.tool_calls:
            first = rendered_call_ids(message).call(message.tool_calls[0].id)
            spans += [Span(index, CALLS, CALLS) for index in self.rendered.holding_call(first)
                      if self.rendered.makes_calls(index, message)][:1]
        if message.content:
            spans += self._text(message.content, whole=False)
        return spans

    def _text(self, text: str, whole: bool) -> list[Span]:
        copies = self.rendered.find_all(text)
        if copies or whole:
            return copies[:1]
        spans: list[Span] = []
        for piece in sentences(text):
            spans += self.rendered.find_all(piece)[:1]
        return spans


def rendered_call_ids(message: Message) -> CallIds:
    """The Chat Completions ids of ``message``'s calls and of the results answering them.

    The rendering renames ids block by block (``CHAT_IDS``), so the block alone decides them.
    """
    ids = CallIds(CHAT_IDS)
    ids.open_block(message)
    return ids


def _unframed(content: str) -> str:
    """A rendered message's text as its request message had it.

    Without the line that marks a recalled turn, and without the backslash that escapes a
    text which only reads like that line.
    """
    if content.startswith(RECALL_PREFIX):
        marker, newline, rest = content.partition("\n")
        if newline and marker.endswith("]"):
            content = rest
    if content.startswith("\\") and looks_recalled(content[1:]):
        content = content[1:]
    return content


def sentences(text: str) -> list[str]:
    """The pieces of ``text`` looked for one by one: lines and sentences.

    Only pieces of ``PIECE_MIN_CHARS`` or more, long enough to say something.
    """
    pieces = (piece.strip() for piece in _PIECE_BREAK.split(text))
    return [piece for piece in pieces if len(piece) >= PIECE_MIN_CHARS]


def _inside_fence(index: int, content: str) -> Span:
    """The span of a shown tool result without its fence lines (framing, like a message's)."""
    start, end = 0, len(content)
    if content.startswith("<<data "):
        first = content.find("\n")
        last = content.rfind("\n<<end ")
        if 0 <= first < last:
            start, end = first + 1, last
    return Span(index, start, end)


def _text_of(message: Msg) -> str:
    return content_text(message)


def _in_json(text: str, arguments: object) -> bool:
    """Whether ``text`` is in the JSON text ``arguments``, as written or as decoded."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    if text in raw:
        return True
    try:
        value = json.loads(raw)
    except ValueError:
        return False
    return (text in json.dumps(value, ensure_ascii=False)
            or any(text in leaf for leaf in _strings(value)))


def _strings(value: object) -> Iterable[str]:
    """Every string in a JSON value: keys and values, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _placeholder(content: str) -> bool:
    return MISSING_RESULT in content or _DROPPED_PREFIX in content


def _same_json(shown: object, given: str) -> bool:
    if shown == given:
        return True
    try:
        return bool(json.loads(str(shown)) == json.loads(given))
    except ValueError:
        return False


def _tool_name(schema: Mapping[str, Any]) -> str:
    function = schema.get("function")
    return str(function.get("name")) if isinstance(function, Mapping) else ""


def _merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _quoted(text: str, limit: int = 40) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return json.dumps(shown, ensure_ascii=False)
