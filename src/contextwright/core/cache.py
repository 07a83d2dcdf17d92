"""Prompt-cache stability: what a build remembers of itself, and how its prefix compares.

Providers bill the part of a request that repeats the previous request's prefix at a fraction
of the input price. A build that knows the previous build of the same conversation (its
``Fingerprint``) keeps what it showed then, in the same order, and only appends, until a source
no longer fits; then that source's cut advances by a step (``CachePolicy.step``) so the next
calls only append again (``core.stable``). Each build's ``CacheReport`` says how much of the
rendered request repeats the previous one's prefix, where and why it broke, and what that costs
under each provider's price model.

A fingerprint is small (a short hash and a token count per message, a few per kept history
message) and plain JSON, so a session store can keep it and any worker continue the cache line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from contextwright.checks import whole_number
from contextwright.core.fence import SYSTEM_MESSAGE
from contextwright.core.items import Message
from contextwright.errors import InvalidInputError

FINGERPRINT_VERSION = 1

MAX_BREAKPOINTS = 4
"""Anthropic takes at most this many ``cache_control`` breakpoints in one request."""

LOOKBACK_BLOCKS = 20
"""How far before one of a request's breakpoints Anthropic looks for a prefix written earlier."""


def breakpoint_ends(points: Sequence[int], *, system: bool, tools: bool) -> tuple[int, ...]:
    """Indexes of the messages ending the prefixes a request's breakpoints write (-1: the tools).

    ``points``: the build's ``cache_points`` (indexes of its messages, the system message 0).
    The system prompt's breakpoint caches the tools before it too, so the tools get one only
    when there is no system prompt; the message points keep the latest that fit the limit
    (the later a breakpoint, the more of the request it caches).
    """
    fixed = (0,) if system else (-1,) if tools else ()
    marked = sorted(set(points) - {0, -1})
    return (*fixed, *marked[max(0, len(marked) - (MAX_BREAKPOINTS - len(fixed))):])


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """How a build trades budget fill for a stable prefix.

    ``step``: when a source's kept run no longer fits, it is cut again to leave this share of its
    grant free, so the next calls append into the room instead of cutting again (0.25: about
    every quarter of the grant's worth of new messages). Larger steps mean longer stable runs and
    less of the budget used right after a cut. ``recall_tail``: turns recalled for the current
    input that the kept run does not show are shown after it for this call only, in the room the
    run leaves (the next call drops them; the cached prefix ends before them), instead of a cut.
    ``recall_share``: the share of a source's grant that such turns may add to the kept run
    itself in one call (they stay until the next cut, cached by later calls; 0: none, the tail
    serves the input). ``head_share``: the first cut pins the oldest kept messages, up to this
    share of the grant, and later cuts keep them, so the cached prefix survives a cut (0: every
    cut starts the prefix again after the system prompt). ``head_growth``: a later cut keeps
    more of the previous run as its head (a longer cached prefix) when the cut after it still
    shows every plain message a cut after the ``head_share`` head shows, and of the recalled
    turns that cut shows all but at most this share of their tokens (the lowest ranked give
    way); None keeps the head at ``head_share``. Measured on LoCoMo dev through the builder
    (history cached / evidence recall at 4k and 8k): None 0.770 / 0.846 and 0.853 / 0.906; 0
    0.775 / 0.846 and 0.856 / 0.909; 0.02 0.775 / 0.846 and 0.860 / 0.909; 0.05 (the default)
    0.781 / 0.849 and 0.863 / 0.909; 0.1 0.795 / 0.841 and 0.869 / 0.901.
    ``objective``: what a cut frees its step from. ``"fill"`` takes it from the oldest plain
    messages only, so a cut keeps every recalled turn that fits: a source that is mostly recall
    (``chat``) is then nearly full after a cut and cuts again within a call or two. ``"cost"``
    also takes it from turns recalled below the best (the half of the grant the coverage
    counts), on every cut: cuts come about half as often and more of the prefix is cached, at
    some recall; with the recall tail, a cut that the input's recall forced still shows those
    turns, after the kept run, for that call only.
    ``"balanced"`` (the default) frees recalled turns only when the appended messages forced
    the cut (the run outgrew the grant); a cut forced by what this input needs recalled keeps
    every recalled turn that fits.
    ``min_recall_coverage``: when the kept run, the allowance and the tail would show less than
    this share (by tokens) of the turns recalled for the input (the best, up to half the grant),
    the cut advances instead, so recall serves the input first (0: never for recall; 1: whenever
    a recalled turn is missing); only an input that may cut for its recall (``recall_cuts``) is
    held to it. Measured on long chats before ``recall_cuts`` and the focus gate, when every
    input could cut (LoCoMo dev, 8k / 4k budgets, history cached and evidence recall; a fresh
    build's recall 0.914 / 0.859): coverage 0.68 0.711 / 0.461 and 0.909 / 0.849; 0.65 0.737 /
    0.482 and 0.901 / 0.849; 0.8 0.607 / 0.394 and 0.906 / 0.849; without the tail (allowance
    0.15, coverage 0.65) ``"balanced"`` 0.685 / 0.461, ``"fill"`` 0.633 / 0.436, ``"cost"``
    0.741 / 0.556 at evidence recall 0.880 / 0.820; ``"cost"`` with the tail 0.814 / 0.624 at
    0.896 / 0.828.
    ``min_recall_focus``: an input whose recall is diffuse — its best turn matches less than
    this share of what the input's words could match (``LexicalTurnRecaller.focus``: a long,
    chatty message whose words are spread over many turns) — never cuts the run for its
    recall: it is shown the missing turns that fit after the run (with ``recall_tail``), and
    the cut waits for a focused input ("When did Mel adopt the puppy?") or for the run to
    outgrow its grant (0: every input may cut; recallers that cannot say how focused they are
    count as focused). Measured on LoCoMo dev (history cached / evidence recall, 8k and 4k):
    0 gives 0.711 / 0.909 and 0.461 / 0.849; 0.1 0.721 / 0.909 and 0.483 / 0.849; 0.15 (the
    default) 0.788 / 0.909 and 0.594 / 0.846; 0.2 0.836 / 0.893 and 0.706 / 0.833; 0.25 0.866 /
    0.880 and 0.767 / 0.815. Chatty inputs of those conversations have a median focus of 0.18,
    the questions asked after them 0.35.
    ``diffuse_tail``: which diffuse inputs still get the recall tail. ``"questions"`` (the
    default): only those that ask something (``analysis.asks``: a question mark, a question
    word, "tell me…", "吗"); a diffuse statement ("Thanks, Mel! It really motivated me.") is
    shown the run as it is, with no uncached turns after it. ``"always"``: every diffuse input
    (the earlier default); ``"never"``: none. Measured on LoCoMo dev (history cached / evidence
    recall at 4k and 8k; before ``recall_cuts``, while any focused input could cut at coverage
    0.68): through ``ContextManager`` ``"always"`` 0.558 / 0.809 and 0.615 /
    0.906, ``"questions"`` 0.587 / 0.809 and 0.653 / 0.906 (input cost −10% / −13%),
    ``"never"`` 0.596 / 0.807 and 0.666 / 0.901; through the builder ``"always"`` 0.594 /
    0.846 and 0.788 / 0.909, ``"questions"`` 0.602 / 0.846 and 0.799 / 0.909. The questions
    evidence recall is measured on all ask something, so that column cannot show what a
    statement loses: only turns whose match with it is weak.
    ``recall_cuts``: which inputs may cut the kept run for their recall. ``"questions"`` (the
    default): only those that ask something (``analysis.asks``); a statement, however closely
    it matches older turns ("I finally adopted the puppy!"), is shown the ones that fit after
    the run (the tail), and the cut waits for a question or for the run to outgrow its grant.
    ``"any"``: every focused input (the earlier default). A cut costs every cached token after
    the pinned head, and a statement asks nothing of the past, so questions alone decide when
    the run is cut for recall; with cuts that rare, a question may ask for more of its turns
    before it is served by a tail (``min_recall_coverage`` 0.9, was 0.68). Measured on LoCoMo
    dev through the builder (history cached / evidence recall at 4k and 8k; a fresh build's
    recall 0.859 / 0.914): ``"any"`` with coverage 0.68 0.601 / 0.846 and 0.798 / 0.909 (input
    cost 0.70 / 0.43 of ``trim_messages``); ``"questions"`` with 0.68 0.796 / 0.843 and 0.894 /
    0.888 (the questions asked after the chat then find a run last cut for a statement's turns
    long ago and are served by a tail), with 0.9 0.770 / 0.846 and 0.853 / 0.906 (0.44 / 0.35
    of ``trim_messages``); coverage 0.95 and 1.0 gave the same recall and a little less cached.
    ``statement_tail``: which inputs that ask nothing (statements, ``analysis.asks``) may get
    the recall tail. ``"facts"`` (the default): a statement that names an exact value
    (``compress.facts``: an id, a code, an amount, a date, "my user ID is mia_li_3668") gets it,
    as a question does; one that names none ("I finally adopted the puppy!") is shown the run
    as it is. True: every focused statement gets it; False: none. A tail is sent uncached on
    every call that shows one, and in a chat most inputs are statements: on LoCoMo dev they
    drew 0.80 / 0.72 of the tail tokens through ``ContextManager`` (4k / 8k), the tail itself
    0.41 / 0.67 of the uncached history tokens. A statement that names a value refers back to
    something specific (a reservation, an order) whose turns it needs; chat statements name
    none (1 of LoCoMo dev's 551 speaker-A statements does; 77 of τ-bench dev's 312 user
    statements). Measured (history cached / evidence recall or fact survival): LoCoMo dev
    through ``ContextManager`` at 4k and 8k True 0.626 / 0.812 and 0.655 / 0.901, ``"facts"``
    0.707 / 0.812 and 0.775 / 0.901 (False 0.709 and 0.780); through the builder True 0.786 / 0.851
    and 0.862 / 0.914, ``"facts"`` 0.825 / 0.851 and 0.899 / 0.914 (input cost 0.39 → 0.34
    and 0.34 → 0.27 of ``trim_messages``). τ-bench dev through ``ContextManager`` at 1k / 2k /
    4k: False kept 0.993 of the required facts at 2k and 4k against True's 1.000; ``"facts"``
    keeps True's 0.998 / 1.000 / 1.000 and caches 0.609 / 0.687 / 0.755 after system (True
    0.608 / 0.683 / 0.750). The questions asked after the LoCoMo chats all ask something, so
    evidence recall cannot show what a statement loses; τ-bench's users state ids, and can.
    """

    step: float = 0.25
    recall_share: float = 0.0
    head_share: float = 0.3
    min_recall_coverage: float = 0.9
    objective: Literal["balanced", "fill", "cost"] = "balanced"
    recall_tail: bool = True
    min_recall_focus: float = 0.15
    diffuse_tail: Literal["always", "questions", "never"] = "questions"
    recall_cuts: Literal["questions", "any"] = "questions"
    head_growth: float | None = 0.05
    statement_tail: bool | Literal["facts"] = "facts"

    def __post_init__(self) -> None:
        """Refuse shares outside their range."""
        if not 0 <= self.head_share < 1:
            raise InvalidInputError("cache head_share must be in [0, 1)")
        if not 0 <= self.min_recall_coverage <= 1:
            raise InvalidInputError("cache min_recall_coverage must be in [0, 1]")
        if not 0 < self.step < 1:
            raise InvalidInputError("cache step must be a share of the grant, in (0, 1)")
        if not 0 <= self.recall_share < 1:
            raise InvalidInputError("cache recall_share must be in [0, 1)")
        if not 0 <= self.min_recall_focus <= 1:
            raise InvalidInputError("cache min_recall_focus must be in [0, 1]")
        if self.head_growth is not None and (isinstance(self.head_growth, bool)
                                             or not 0 <= self.head_growth <= 1):
            raise InvalidInputError("cache head_growth must be in [0, 1], or None")
        if not isinstance(self.recall_tail, bool):
            raise InvalidInputError("cache recall_tail must be true or false")
        if not isinstance(self.statement_tail, bool) and self.statement_tail != "facts":
            raise InvalidInputError("cache statement_tail must be true, false or 'facts'")
        if self.objective not in ("balanced", "fill", "cost"):
            raise InvalidInputError("cache objective must be 'balanced', 'fill' or 'cost'")
        if self.recall_cuts not in ("questions", "any"):
            raise InvalidInputError("cache recall_cuts must be 'questions' or 'any'")
        if self.diffuse_tail not in ("always", "questions", "never"):
            raise InvalidInputError(
                "cache diffuse_tail must be 'always', 'questions' or 'never'")


@dataclass(frozen=True, slots=True)
class SourceLayout:
    """What one message source (history, this turn) kept, in render order.

    ``length`` and ``tail`` say where the caller's message list ended (its size and the hash of
    its last message), so the next build can find the same place even if the list was re-read
    from a later offset. ``anchor`` is the list's size at the last cut: tool-result tiers and the
    digest of left-out messages are computed as of then, so they do not change between cuts.
    """

    messages: tuple[str, ...]
    """Hashes of the kept messages as rendered, in render order."""
    length: int
    tail: str
    anchor: int
    digest_room: int = 0
    """Tokens the digest of left-out messages was given (0: no digest)."""
    recalled: tuple[int, ...] = ()
    """Where the recalled turns it shows open in the list (to offer them again as shown);
    a session's stored turn is at ``DETACHED_ORDER`` plus its position in the session
    (``core.items.detached``; a small negative one, as earlier versions wrote it: that far
    before the list's start)."""
    spec: str = ""
    """Hash of the source's place in the plan (options, strategy): another one starts afresh."""
    lead: tuple[int, ...] = ()
    """Where its leading run of plain messages (the head a cut pins) starts and stops in the
    list, ``(start, stop)``; empty: none. The newest-first stream, read only as far as the
    budget, does not reach them once the list is long: they are read where they are."""
    reach: int | None = None
    """The oldest list position of a plain message it shows past the lead (the lead's start
    when nothing separates the two; the list's length when it shows none): how far back its
    source's plain stream must be read to find them again. None: not known (a fingerprint
    from an earlier version), so the stream is read as far as the budget reaches."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"messages": list(self.messages), "length": self.length, "tail": self.tail,
                "anchor": self.anchor, "digest_room": self.digest_room,
                "recalled": list(self.recalled), "spec": self.spec, "lead": list(self.lead),
                "reach": self.reach}

    @classmethod
    def from_dict(cls, data: Any) -> SourceLayout:
        """Read ``to_dict``'s form; anything else is an ``InvalidInputError``."""
        if not isinstance(data, Mapping):
            raise InvalidInputError("fingerprint layout must be an object")
        messages = data.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, str) for m in messages):
            raise InvalidInputError("fingerprint layout messages must be a list of hashes")
        recalled = data.get("recalled", [])
        if not isinstance(recalled, list) or not all(
                isinstance(r, int) and not isinstance(r, bool) for r in recalled):
            raise InvalidInputError("fingerprint layout recalled must be a list of positions")
        lead = data.get("lead", [])  # absent in earlier fingerprints: no lead to read
        if not isinstance(lead, list) or len(lead) not in (0, 2) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in lead):
            raise InvalidInputError("fingerprint layout lead must be [start, stop] or []")
        reach = data.get("reach")  # absent in earlier fingerprints: read as far as the budget
        if reach is not None and (not isinstance(reach, int) or isinstance(reach, bool)
                                  or reach < 0):
            raise InvalidInputError("fingerprint layout reach must be a position or null")
        return cls(messages=tuple(messages), length=_count(data, "length"),
                   tail=_text(data, "tail"), anchor=_count(data, "anchor"),
                   digest_room=_count(data, "digest_room"), recalled=tuple(recalled),
                   spec=_text(data, "spec"), lead=tuple(lead), reach=reach)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The previous build as the next build needs it (``build(..., previous=...)``)."""

    plan: str
    """Hash of the plan the build used: another plan starts a new cache line."""
    target: str
    tools: str
    """Hash of the tool schemas as sent."""
    tool_tokens: int
    messages: tuple[str, ...]
    """Hash of each rendered message, in order."""
    tokens: tuple[int, ...]
    """Tokens of each rendered message."""
    layouts: Mapping[str, SourceLayout] = field(default_factory=dict)
    kept: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Keys of what the other cuttable sources kept (tools, documents), in the order shown;
    kept first next call."""
    compacted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Of ``kept``, the keys its source showed compacted (``metadata["compaction"]``): shown so
    again next call, so a kept tool keeps its bytes."""
    stable: bool = True
    """False for a build made without a cache policy (its layout is today's)."""
    stable_end: int = -1
    """Index of the first message that changes every call (the tail; -1: unknown)."""
    language: str = ""
    """The labels' language of the build (``""``: not known, as in an older fingerprint). The
    next build of the cache line keeps it, so a user who switches language does not change
    the system message (the data note, the labels) and lose the cached prefix."""
    breakpoints: tuple[int, ...] | None = None
    """Where its Anthropic request's ``cache_control`` breakpoints end a prefix
    (``breakpoint_ends``): the next request can read only those from the cache. None: not known
    (an older fingerprint, a text build), the whole identical prefix is counted."""
    blocks: tuple[int, ...] | None = None
    """Content blocks each message takes in its Anthropic request (``stepping.anthropic_blocks``):
    Anthropic looks back for an earlier write ``LOOKBACK_BLOCKS`` blocks, not messages, and an
    assistant step or a turn of parallel tool results is several. None: not known (an older
    fingerprint, a text build), each message counted as one."""
    tokenizer: str = ""
    """The tokenizer the build counted with (``""``: not known, as in an older fingerprint).
    Another one means another model: a provider caches per model, so nothing is read."""
    model: str = ""
    """The model the build was made for, when it knows it (``""``: not known)."""
    version: int = FINGERPRINT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (what a session store keeps)."""
        return {"version": self.version, "plan": self.plan, "target": self.target,
                "tools": self.tools, "tool_tokens": self.tool_tokens,
                "messages": list(self.messages), "tokens": list(self.tokens),
                "layouts": {name: layout.to_dict() for name, layout in self.layouts.items()},
                "kept": {name: list(keys) for name, keys in self.kept.items()},
                **({"compacted": {name: list(keys) for name, keys in self.compacted.items()}}
                   if self.compacted else {}),
                "stable": self.stable, "stable_end": self.stable_end,
                "language": self.language, "tokenizer": self.tokenizer, "model": self.model,
                **({} if self.breakpoints is None else {"breakpoints": list(self.breakpoints)}),
                **({} if self.blocks is None else {"blocks": list(self.blocks)})}

    def to_json(self) -> str:
        """``to_dict`` as compact JSON."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any) -> Fingerprint:
        """Read ``to_dict``'s form; anything else is an ``InvalidInputError``."""
        if not isinstance(data, Mapping):
            raise InvalidInputError("fingerprint must be an object")
        if data.get("version") != FINGERPRINT_VERSION:
            raise InvalidInputError(
                f"fingerprint version {data.get('version')!r} is not {FINGERPRINT_VERSION}")
        messages, tokens = data.get("messages"), data.get("tokens")
        if not isinstance(messages, list) or not all(isinstance(m, str) for m in messages):
            raise InvalidInputError("fingerprint messages must be a list of hashes")
        if not isinstance(tokens, list) or len(tokens) != len(messages) or not all(
                isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens):
            raise InvalidInputError("fingerprint tokens must be one count per message")
        layouts = data.get("layouts", {})
        if not isinstance(layouts, Mapping):
            raise InvalidInputError("fingerprint layouts must be an object")
        kept = data.get("kept", {})
        if not isinstance(kept, Mapping) or not all(
                isinstance(keys, list) and all(isinstance(k, str) for k in keys)
                for keys in kept.values()):
            raise InvalidInputError("fingerprint kept must map sources to lists of keys")
        compacted = data.get("compacted", {})  # absent in earlier fingerprints
        if not isinstance(compacted, Mapping) or not all(
                isinstance(keys, list) and all(isinstance(k, str) for k in keys)
                for keys in compacted.values()):
            raise InvalidInputError("fingerprint compacted must map sources to lists of keys")
        breakpoints = data.get("breakpoints")
        if breakpoints is not None and (not isinstance(breakpoints, list) or not all(
                isinstance(b, int) and not isinstance(b, bool) and -1 <= b < len(messages)
                for b in breakpoints)):
            raise InvalidInputError("fingerprint breakpoints must be message indexes")
        blocks = data.get("blocks")  # absent in earlier fingerprints and text builds
        if blocks is not None and (not isinstance(blocks, list) or len(blocks) != len(messages)
                                   or not all(isinstance(b, int) and not isinstance(b, bool)
                                              and b >= 0 for b in blocks)):
            raise InvalidInputError("fingerprint blocks must be one count per message")
        return cls(plan=_text(data, "plan"), target=_text(data, "target"),
                   tools=_text(data, "tools"), tool_tokens=_count(data, "tool_tokens"),
                   messages=tuple(messages), tokens=tuple(tokens),
                   layouts={str(k): SourceLayout.from_dict(v) for k, v in layouts.items()},
                   kept={str(name): tuple(keys) for name, keys in kept.items()},
                   compacted={str(name): tuple(keys) for name, keys in compacted.items()},
                   stable=bool(data.get("stable", True)),
                   stable_end=_count(data, "stable_end") if data.get("stable_end", -1) != -1
                   else -1, language=_text(data, "language"),
                   breakpoints=None if breakpoints is None else tuple(breakpoints),
                   blocks=None if blocks is None else tuple(blocks),
                   tokenizer=_text(data, "tokenizer"), model=_text(data, "model"))

    @classmethod
    def from_json(cls, text: str) -> Fingerprint:
        """Read ``to_json``'s form."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InvalidInputError(f"fingerprint is not valid JSON: {exc}") from None
        return cls.from_dict(data)


def _count(data: Mapping[str, Any], name: str) -> int:
    return whole_number(data.get(name, 0), f"fingerprint {name}")


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name, "")
    if not isinstance(value, str):
        raise InvalidInputError(f"fingerprint {name} must be a string")
    return value


def short_hash(text: str) -> str:
    """16 hex digits of BLAKE2b: enough to tell messages of one conversation apart."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def plan_hash(plan: object) -> str:
    """A short hash of everything in a plan or source spec (frozen dataclasses: ``repr``)."""
    return short_hash(repr(plan))


def tools_hash(schema_jsons: Sequence[str]) -> str:
    """A short hash of the tool schemas as sent."""
    return short_hash("\x1e".join(schema_jsons))


def message_hash(message: Message) -> str:
    """Hash of everything of a message a provider sees.

    Its images too: another image, or another detail, is another message.
    """
    calls = "\x1f".join(f"{c.id}\x1e{c.name}\x1e{c.arguments}" for c in message.tool_calls)
    parts = [message.role, message.content, calls, message.tool_call_id or "", message.name or ""]
    if message.images:
        parts.append("\x1f".join(image.digest() for image in message.images))
    return short_hash("\x1d".join(parts))


@dataclass(frozen=True, slots=True)
class PriceModel:
    """A provider's input pricing relative to its base input price (1.0)."""

    name: str
    cache_read: float
    """Price of a cached input token."""
    cache_write: float
    """Price of an input token written to the cache (1.0 where writes cost nothing extra)."""
    min_prefix: int
    """Shortest prefix the provider caches at all."""
    granularity: int = 1
    """The cached prefix is counted in steps of this many tokens (OpenAI: 128)."""
    breakpoints: bool = False
    """The provider reads only a prefix an earlier request wrote at one of its breakpoints
    (Anthropic's ``cache_control``), not any identical prefix (OpenAI)."""

    def cached(self, prefix_tokens: int) -> int:
        """Tokens of a ``prefix_tokens`` identical prefix the provider bills as cached."""
        if prefix_tokens < self.min_prefix:
            return 0
        return prefix_tokens - (prefix_tokens - self.min_prefix) % self.granularity

    def relative_cost(self, prefix_tokens: int, input_tokens: int) -> float:
        """Cost of one call's input relative to sending it all uncached (1.0).

        An input of no tokens has nothing cached either: 1.0, as for any input too short to
        be cached. Never 0.0, which would read as a call that cost nothing thanks to the cache.
        """
        if input_tokens <= 0:
            return 1.0
        if input_tokens < self.min_prefix:  # too short to be cached: nothing read or written
            return 1.0
        cached = self.cached(min(prefix_tokens, input_tokens))
        return (cached * self.cache_read + (input_tokens - cached) * self.cache_write) / (
            input_tokens)


PRICE_MODELS: tuple[PriceModel, ...] = (
    # Anthropic: reads 0.1x, writes (5-minute cache) 1.25x, from 1,024 tokens (Sonnet/Opus).
    # Only prefixes written at an earlier request's breakpoints are read.
    PriceModel("anthropic", cache_read=0.1, cache_write=1.25, min_prefix=1024,
               breakpoints=True),
    # OpenAI: automatic caching from 1,024 tokens in 128-token steps; cached input at 0.1x
    # (GPT-5 family and later; 0.25-0.5x for older models), no write surcharge.
    PriceModel("openai", cache_read=0.1, cache_write=1.0, min_prefix=1024, granularity=128),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheReport:
    """How a build's rendered request compares with the previous build's."""

    previous: bool
    """Whether the build knew a previous build."""
    input_tokens: int
    """Tokens of this request (tools, system, messages)."""
    prefix_tokens: int
    """Tokens at the start of this request identical to the previous request's start (what a
    provider that caches any prefix, OpenAI, can read; Anthropic: ``readable_tokens``)."""
    messages_kept: int
    """Messages of the previous request this one repeats at its start, in place."""
    broke_at: int | None = None
    """Index of the first message that differs (None: the whole previous request is repeated)."""
    broke_key: str | None = None
    """Source name of that message in this build."""
    broke_item: str | None = None
    """Item key of that message in this build (``history.m12``, ``system``...)."""
    reason: str | None = None
    """Why the prefix broke, in words."""
    advanced: tuple[str, ...] = ()
    """Sources whose cut advanced in this build (each a planned break)."""
    cost: Mapping[str, float] = field(default_factory=dict)
    """Input cost relative to sending everything uncached, per price model."""
    transient: tuple[str, ...] = ()
    """Item keys of the recalled turns shown after the kept run for this call only (the recall
    tail): the next call drops them, and the cached prefix ends before them."""
    recall_focus: Mapping[str, float] = field(default_factory=dict)
    """Per source with a previous layout and turns recalled for this input, how focused that
    recall is (0–1, ``LexicalTurnRecaller.focus``): under ``CachePolicy.min_recall_focus`` the
    input cuts no run for its recall."""
    readable_tokens: Mapping[str, int] = field(default_factory=dict)
    """Per price model, the tokens of the identical prefix its provider can read from the cache
    (``cost`` prices them): ``prefix_tokens`` where any prefix is cached; where only a prefix an
    earlier request wrote at a breakpoint is (Anthropic), up to the previous request's last
    breakpoint inside it."""

    @property
    def hit_share(self) -> float:
        """Share of the input tokens that repeat the previous request's prefix."""
        return self.prefix_tokens / self.input_tokens if self.input_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"previous": self.previous, "input_tokens": self.input_tokens,
                "prefix_tokens": self.prefix_tokens, "hit_share": round(self.hit_share, 4),
                "messages_kept": self.messages_kept, "broke_at": self.broke_at,
                "broke_key": self.broke_key, "broke_item": self.broke_item,
                "reason": self.reason,
                "advanced": list(self.advanced), "cost": dict(self.cost),
                "transient": list(self.transient),
                "recall_focus": dict(self.recall_focus),
                "readable_tokens": dict(self.readable_tokens)}


def cache_report_from_dict(data: Mapping[str, Any]) -> CacheReport:
    """Read ``CacheReport.to_dict``'s form (``hit_share`` is computed, not read)."""
    try:
        return CacheReport(
            previous=bool(data["previous"]), input_tokens=int(data["input_tokens"]),
            prefix_tokens=int(data["prefix_tokens"]), messages_kept=int(data["messages_kept"]),
            broke_at=data.get("broke_at"), broke_key=data.get("broke_key"),
            broke_item=data.get("broke_item"), reason=data.get("reason"),
            advanced=tuple(data.get("advanced", ())), cost=dict(data.get("cost", {})),
            transient=tuple(str(key) for key in data.get("transient", ())),
            recall_focus={str(name): float(value)
                          for name, value in dict(data.get("recall_focus", {})).items()},
            readable_tokens={str(name): int(value)
                             for name, value in dict(data.get("readable_tokens", {})).items()})
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"cache report is malformed ({type(exc).__name__})") from None


def compare(previous: Fingerprint | None, current: Fingerprint, sections: Sequence[str],
            advanced: Sequence[str], reasons: Mapping[str, str],
            keys: Sequence[str] = ()) -> CacheReport:
    """This build's prefix against ``previous`` (tools first, then messages, as sent)."""
    input_tokens = current.tool_tokens + sum(current.tokens)
    if previous is None:
        return _report(False, input_tokens, 0, 0, None, None, "no previous build", advanced)
    if previous.tools != current.tools:
        return _report(True, input_tokens, 0, 0, 0, None, "the tool definitions changed",
                       advanced)
    prefix = current.tool_tokens
    kept = 0
    for old, new, tokens in zip(previous.messages, current.messages, current.tokens,
                                strict=False):
        if old != new:
            break
        prefix += tokens
        kept += 1
    written = written_prefix(previous, current, kept)
    if kept == len(previous.messages):
        return _report(True, input_tokens, prefix, kept, None, None, None, advanced, written)
    section = sections[kept] if kept < len(sections) else None
    why = reasons.get(section or "") or _default_reason(previous, current, kept, section)
    report = _report(True, input_tokens, prefix, kept, kept, section, why, advanced, written)
    return replace(report, broke_item=keys[kept] if kept < len(keys) else None)


def written_prefix(previous: Fingerprint, current: Fingerprint, kept: int) -> int | None:
    """Tokens of the identical prefix an earlier breakpoint wrote (None: breakpoints unknown).

    ``kept`` leading messages are identical. The prefix read is the one the previous request
    wrote at its last breakpoint within them, provided this request has a breakpoint at most
    ``LOOKBACK_BLOCKS`` content blocks after it, where the provider looks for it (this
    request's ``blocks``; one a message where they are not known). Tools alone (-1) are
    identical here already (``compare``).
    """
    if previous.breakpoints is None or current.breakpoints is None:
        return None
    ends = [end for end in previous.breakpoints if end < kept and any(
        end <= point and blocks_between(current, end, point) <= LOOKBACK_BLOCKS
        for point in current.breakpoints)]
    if not ends:
        return 0
    return current.tool_tokens + sum(current.tokens[:max(ends) + 1])


def blocks_between(fingerprint: Fingerprint, end: int, point: int) -> int:
    """Content blocks of ``fingerprint``'s request after message ``end``, through ``point``.

    The indexes are messages' (-1: the tools, before every message).
    """
    counts = fingerprint.blocks or (1,) * len(fingerprint.messages)
    return sum(counts[end + 1:point + 1])


def cache_line_change(previous: Fingerprint, model: str, tokenizer: str) -> str | None:
    """Why a build for ``model``, counted with ``tokenizer``, cannot read ``previous``'s cache.

    None: it may. A provider keys its cache by model: a build for another model (or counted
    with another tokenizer, which is another model) starts a new cache line whatever its
    messages. Only what both builds know is compared (an older fingerprint records neither;
    ``""``: not known).
    """
    if previous.model and model and previous.model != model:
        return (f"the previous build was for the model {previous.model}, this one for "
                f"{model}: a new cache line starts (a provider caches per model)")
    if previous.tokenizer and tokenizer and previous.tokenizer != tokenizer:
        return (f"the previous build was counted with the {previous.tokenizer} tokenizer, this "
                f"one with {tokenizer}: another model, so a new cache line starts (a provider "
                "caches per model)")
    return None


def _default_reason(previous: Fingerprint, current: Fingerprint, at: int,
                    section: str | None) -> str:
    # Sources a request adds for this call only (notes, documents) change the plan's hash
    # too: a break after the whole stable part is the volatile part's, whatever the plan.
    if 0 <= previous.stable_end <= at:
        return ("the previous request's stable part is repeated whole; only what changes "
                "every call (rendered after it) differs")
    if previous.plan != current.plan:
        return "the plan changed"
    if at >= len(current.messages):
        return "this request is shorter than the previous one"
    if not previous.stable:
        return "the previous build was made without a cache policy"
    if section == SYSTEM_MESSAGE:
        return "the system message changed (system prompt, notes or the data note)"
    return f"message {at} ({section}) differs from the previous request's"


def _report(previous: bool, input_tokens: int, prefix: int, kept: int, broke_at: int | None,
            section: str | None, reason: str | None, advanced: Sequence[str],
            written: int | None = None) -> CacheReport:
    """The report; ``written``: the prefix an earlier breakpoint wrote (``written_prefix``)."""
    readable = {model.name: prefix if written is None or not model.breakpoints
                else min(prefix, written) for model in PRICE_MODELS}
    cost = {model.name: round(model.relative_cost(readable[model.name], input_tokens), 4)
            for model in PRICE_MODELS}
    return CacheReport(previous=previous, input_tokens=input_tokens, prefix_tokens=prefix,
                       messages_kept=kept, broke_at=broke_at, broke_key=section, reason=reason,
                       advanced=tuple(advanced), cost=cost, readable_tokens=readable)
