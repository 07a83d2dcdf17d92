"""History and current-turn sources: conversation messages read newest-first, tool calls paired.

Both read the caller's message list backwards, one *block* at a time: a single message, or an
assistant message with tool calls together with the tool messages that follow it (paired by
position, since some agents reuse call ids). A block is one unit: it is kept or dropped whole, so a
call is never separated from its result. A tool message that answers no call is an
``InvalidInputError``; a call whose result is missing gets an explicit placeholder result.
Tool results are compacted from JSON to readable text (raw kept on the item) and marked untrusted.

History adds two things. Tiered retention: with ``tool_full`` set, only the newest call blocks keep
their results whole, older ones are reduced to key facts or one line (see
``compress.tool_results``), and a result whose message carries ``"consumed": true`` is reduced even
when it is among the newest. Relevance-selected history: with ``recall_share`` set, older turns
relevant to the input are interleaved into the newest-first stream (see ``recall``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple

from contextwright.compress.json_compact import compact_tool_result
from contextwright.compress.tool_results import (
    Tier,
    ToolTiers,
    dropped_tool_result,
    one_line_tool_result,
    reduce_tool_result,
)
from contextwright.core.caches import BoundedCache, memoized, register_cache, text_bytes
from contextwright.core.cutting import KEEP_HEAD
from contextwright.core.folding import shape
from contextwright.core.items import (
    NEEDS_REASONING,
    ContextItem,
    Layer,
    Message,
    parse_listed,
    parse_message,
    parsed_unchanged,
)
from contextwright.core.pairing import misplaced_result_message, pair_results
from contextwright.core.plan import FrozenOptions, options_text
from contextwright.core.request import Request
from contextwright.core.source import AddedSource, Layout, SourceTraits
from contextwright.errors import InvalidInputError
from contextwright.recall.history import RECALLED_UNITS, turn_index
from contextwright.recall.interleave import Interleaving, Segment, interleave
from contextwright.recall.lexical import LexicalTurnRecaller, RecallExpansion
from contextwright.recall.turns import (
    DEFAULT_RECALL_LIMIT,
    TurnIndex,
    TurnRecaller,
    asked_at,
    rank_turns,
    turn_focus,
)
from contextwright.sources.history_digest import history_digest, omitted_digest
from contextwright.sources.options import HistoryOptions, ToolResultOptions
from contextwright.tokens import estimate_tokens

MISSING_RESULT = "[no result was recorded for this call]"


class Block(NamedTuple):
    """A run of messages that must stay together, with the index of its first message.

    A named tuple rather than a dataclass: one is made for every message a build reads.
    """

    start: int
    messages: tuple[Message, ...]
    given: int
    """How many of ``messages`` were in the caller's list; the rest are placeholder results."""


def read_blocks_backward(raw: Sequence[Mapping[str, Any]], where: str, end: int | None = None,
                         begin: int = 0) -> Iterator[Block]:
    """Blocks of ``raw[begin:end]`` from the newest to the oldest, parsing only what is read.

    ``begin`` must be where a block starts (a turn's user message, say), or a tool result there
    would be an orphan.
    """
    index = (len(raw) if end is None else end) - 1
    while index >= begin:
        message = parse_listed(raw, where, index)
        if message.role != "tool":
            calls = _complete_calls(message, []) if message.tool_calls else (message,)
            yield Block(index, calls, 1)
            index -= 1
            continue
        results = [message]
        index -= 1
        while index >= begin:
            message = parse_listed(raw, where, index)
            if message.role != "tool":
                break
            results.append(message)
            index -= 1
        if index < begin or message.role != "assistant" or not message.tool_calls:
            raise InvalidInputError(misplaced_result_message(
                lambda at: parse_listed(raw, where, at), index + 1, begin, where))
        results.reverse()
        yield Block(index, _checked_block(message, results, where, index), 1 + len(results))
        index -= 1


def _check_results_answer_calls(call: Message, results: list[Message], where: str,
                                index: int) -> None:
    stray = pair_results([c.id for c in call.tool_calls], [r.tool_call_id for r in results]).stray
    if stray is not None:
        raise InvalidInputError(f"{where}[{index + 1 + stray}] answers no call of {where}[{index}]")


_Block = tuple[Message, list[Message], tuple[Message, ...]]
_MESSAGE_BYTES = 300
"""What one message object costs besides its text: the dataclass, its metadata and slots."""


def _block_bytes(_: tuple[int, ...], entry: _Block) -> int:
    """The call's and results' texts (the entry keeps them alive) and every message object.

    The completed messages share their texts with the results they name.
    """
    call, results, completed = entry
    texts = text_bytes(call.content) + sum(text_bytes(c.arguments) for c in call.tool_calls)
    texts += sum(text_bytes(result.content) for result in results)
    return texts + _MESSAGE_BYTES * (1 + len(results) + len(completed))


_BLOCKS: BoundedCache[tuple[int, ...], _Block] = BoundedCache(
    "sources.conversation.blocks", max_entries=200_000, share=0.03, size=_block_bytes)


def _checked_block(call: Message, results: list[Message], where: str,
                   index: int) -> tuple[Message, ...]:
    """``_complete_calls`` of a call and the results that follow it, checked to answer it.

    A block remembered for these very message objects passed the check when it was put (only
    checked blocks with results are put), so only a new block is checked again.
    """
    completed = _remembered_block(call, results)
    if completed is not None:
        return completed
    _check_results_answer_calls(call, results, where, index)
    return _complete_calls(call, results)


def _remembered_block(call: Message, results: list[Message]) -> tuple[Message, ...] | None:
    """The completed block remembered for exactly these message objects (None: not known)."""
    key = (id(call), *map(id, results))
    cached = _BLOCKS.get(key) or _BLOCKS.revive(key)
    if cached is not None and cached[0] is call and all(
        a is b for a, b in zip(cached[1], results, strict=True)
    ):
        return cached[2]
    return None


def _complete_calls(call: Message, results: list[Message]) -> tuple[Message, ...]:
    """The call, its results named after their calls, and placeholders for missing results.

    Remembered per message objects, so a re-read history yields the very same messages.
    """
    if not call.tool_calls:
        return (call,)
    cached = _remembered_block(call, results)
    if cached is not None:
        return cached
    completed = _name_and_complete(call, results)
    _BLOCKS.put((id(call), *map(id, results)), (call, list(results), completed))
    return completed


def _name_and_complete(call: Message, results: list[Message]) -> tuple[Message, ...]:
    names = {c.id: c.name for c in call.tool_calls}
    named = [r if r.name else _with_name(r, names.get(r.tool_call_id or "")) for r in results]
    answered = [r.tool_call_id for r in results]
    for tool_call in call.tool_calls:
        if tool_call.id in answered:
            answered.remove(tool_call.id)
        else:
            named.append(Message(role="tool", content=MISSING_RESULT, tool_call_id=tool_call.id,
                                 name=tool_call.name))
    return (call, *named)


REPEATS_SYSTEM_PROMPT = "repeats the system prompt (request.system), which is shown once"


def _without_copies_of(prompt: str, items: Iterator[ContextItem]) -> Iterator[ContextItem]:
    """``items``, with each system message whose text is ``prompt`` marked as omitted."""
    for item in items:
        yield _without_copy_of(prompt, item)


def _without_copy_of(prompt: str, item: ContextItem) -> ContextItem:
    """``item``, marked as omitted if it is a system message whose text is ``prompt``."""
    message = item.message
    if message.role == "system" and message.content.strip() == prompt:
        return replace(item, metadata={**item.metadata, "omitted": REPEATS_SYSTEM_PROMPT})
    return item


def _with_content(message: Message, content: str) -> Message:
    return Message(role=message.role, content=content, tool_calls=message.tool_calls,
                   id=message.id, timestamp=message.timestamp, images=message.images,
                   thinking=message.thinking)


def _with_name(result: Message, name: str | None) -> Message:
    return Message(role="tool", content=result.content, tool_call_id=result.tool_call_id,
                   name=name, id=result.id, timestamp=result.timestamp, images=result.images)


def block_items(block: Block, namespace: str, layer: Layer, rounds: bool,
                options: Mapping[str, Any], options_key: str,
                retention: Retention | None = None,
                reasoning: Sequence[int] | None = None) -> list[ContextItem]:
    """Context items of one block, in render order, sharing one group.

    Items are remembered per (message object, position, options, tier): a history is re-read on
    every turn and its old messages yield the very same items, so later steps can reuse their
    work. ``retention`` gives the tiers of the block's tool results (None: all whole).
    ``reasoning``: the block is in an open tool loop, whose assistant messages at these
    positions came with reasoning (``open_loop_reasoning``); they keep it, and the block's
    assistant message names the message whose reasoning its loop needs (None or empty:
    reasoning is left out, and reported).
    """
    keep_thinking = bool(reasoning)
    needs = _reasoning_before(reasoning, block.start) if reasoning else None
    if len(block.messages) == 1 and not keep_thinking:  # the common case
        message = block.messages[0]
        cached = _ITEMS.get((id(message), block.start, namespace, ""))
        if cached is not None and cached[0] is message:
            return [cached[1]]
    items = []
    for offset, message in enumerate(block.messages):
        index = block.start + offset
        if offset >= block.given:  # a placeholder: keyed and ordered after the block's results
            items.append(_item(message, f"{namespace}.m{block.start}.missing{offset}", layer,
                               f"b{block.start}", False if rounds else None,
                               block.start + block.given - 1 + offset / 1000, options))
            continue
        tier, why = retention.tier_of(index) if retention and message.role == "tool" else (
            "full", "")
        # Only a tool result is shown as the options say: any other message's item is the same
        # whatever they are, so every plan and every cut's tiers share it (and its rendering).
        shaped_by = (f"thinking|{needs}" if keep_thinking and message.role == "assistant"
                     else "" if message.role != "tool" else options_key if tier == "full"
                     else f"{options_key}|{tier}|{why}")
        cache_key = (id(message), index, namespace, shaped_by)
        cached = _ITEMS.get(cache_key) or _ITEMS.revive(cache_key)
        if cached is not None and cached[0] is message:
            items.append(cached[1])
            continue
        item = _item(message, f"{namespace}.m{index}", layer, f"b{block.start}",
                     (message.role == "user") if rounds else None, index, options, tier, why,
                     keep_thinking)
        if needs is not None and message.role == "assistant":
            # The provider refuses this call if the reasoning its loop opened with is not
            # sent: the builder keeps the two together (``core.builder``).
            item = replace(item, metadata={**item.metadata,
                                           NEEDS_REASONING: f"{namespace}.m{needs}"})
        _ITEMS.put(cache_key, (message, item))
        items.append(item)
    return items


class Retention(NamedTuple):
    """Tiers for the tool results of one call block."""

    tiers: ToolTiers
    rank: int
    """Call blocks newer than this one in the history (0: the newest)."""
    raw: Sequence[Mapping[str, Any]]
    """The caller's messages, to read the ``consumed`` flag the parsed message does not keep
    (empty for this turn's results: consumed ones are compressed on the *next* turn)."""

    def tier_of(self, index: int) -> tuple[Tier, str]:
        """Tier of the result at ``raw[index]`` and why (the report's reason)."""
        message = self.raw[index] if index < len(self.raw) else None
        consumed = isinstance(message, Mapping) and message.get("consumed") is True
        tier = self.tiers.tier(self.rank, consumed)
        if tier == "full":
            return tier, ""
        if consumed and self.rank < self.tiers.full:
            return tier, "marked consumed"
        newest = self.tiers.full if tier == "reduced" else self.tiers.full + self.tiers.reduced
        return tier, f"older than the newest {newest} call block(s)"


def _item_bytes(_: tuple[int, int, str, str], entry: tuple[Message, ContextItem]) -> int:
    """What the item adds to its message: a tiered or compacted text, the raw result."""
    message, item = entry
    added = 0 if item.message is message else text_bytes(item.message.content)
    return added + (text_bytes(item.raw) if item.raw is not None else 0) + 700


_ITEMS: BoundedCache[tuple[int, int, str, str], tuple[Message, ContextItem]] = BoundedCache(
    "sources.conversation.items", max_entries=200_000, share=0.15, size=_item_bytes)


_OPTION_KEYS: dict[int, tuple[Mapping[str, Any], str]] = {}


def options_key(options: Mapping[str, Any]) -> str:
    """A stable text key of a source's options, for caches.

    A plan's options (``FrozenOptions``) carry their own; other mappings are remembered per
    object (options are not edited while builds use them).
    """
    if isinstance(options, FrozenOptions):
        return options.cache_key
    cached = _OPTION_KEYS.get(id(options))
    if cached is not None and cached[0] is options:
        return cached[1]
    key = options_text(options)
    if len(_OPTION_KEYS) > 10_000:
        _OPTION_KEYS.clear()
    _OPTION_KEYS[id(options)] = (options, key)
    return key


def _item(message: Message, key: str, layer: Layer, group: str, round_start: bool | None,
          order: float, options: Mapping[str, Any], tier: Tier = "full",
          why: str = "", keep_thinking: bool = False) -> ContextItem:
    metadata: dict[str, Any] = {"message_id": message.id, "timestamp": message.timestamp}
    if message.role != "tool":
        raw = None
        sent = tuple(b for b in message.thinking if b.signed) if keep_thinking else ()
        if len(sent) < len(message.thinking):
            metadata["compaction"] = _reasoning_left_out(message, keep_thinking)
            raw, message = message.content, replace(message, thinking=sent)
        if looks_recalled(message.content):  # only a recalled turn may look recalled
            message = _with_content(message, "\\" + message.content)
        return ContextItem(key=key, message=message, layer=layer, group=group,
                           round_start=round_start, order=order, raw=raw,
                           truncatable=not message.tool_calls and not message.thinking,
                           metadata=metadata)
    shown_text = None
    if message.content != MISSING_RESULT:
        shown_text = _shown_result(message, options, tier)
        if tier != "full":
            metadata["compaction"] = _TIER_REASONS[tier].format(why=why)
    images = message.images
    if images and tier in ("line", "drop"):  # an early result's images go with its text
        metadata["compaction"] += f"; its {len(images)} image(s) left out"
        images = ()
    shown = message if shown_text is None and images is message.images else Message(
        role="tool", content=message.content if shown_text is None else shown_text,
        tool_call_id=message.tool_call_id, name=message.name, id=message.id,
        timestamp=message.timestamp, images=images)
    return ContextItem(key=key, message=shown, layer=layer, group=group, round_start=round_start,
                       order=order, untrusted=True, truncatable=True,
                       label=f"tool {message.name or 'result'}",
                       raw=None if shown_text is None else message.content, metadata=metadata)


def _reasoning_left_out(message: Message, open_loop: bool) -> str:
    """Why (some of) an assistant message's reasoning is not sent."""
    if not open_loop:
        return (f"its reasoning ({len(message.thinking)} thinking block(s)) is not sent: a "
                "provider takes an assistant's reasoning back only while its tool loop is open")
    unsigned = sum(1 for block in message.thinking if not block.signed)
    return (f"{unsigned} thinking block(s) without a signature not sent: a provider takes "
            "reasoning back only with the signature it gave")


_TIER_REASONS: dict[str, str] = {
    "reduced": "tool result reduced to its key facts ({why}); each value kept whole and "
               "verbatim, records row by row",
    "line": "early tool result reduced to one line of identifiers ({why})",
    "drop": "early tool result dropped ({why}); a placeholder answers its call",
}


def _shown_result(message: Message, options: Mapping[str, Any], tier: Tier) -> str | None:
    """The text a tool result is shown as in ``tier`` (None: as given)."""
    fields = options.get("fields", {}).get(message.name or "")
    if tier == "reduced":
        return reduce_tool_result(message.name, message.content, fields)
    if tier == "line":
        return one_line_tool_result(message.name, message.content,
                                    int(options.get("tool_line_chars", 240)))
    if tier == "drop":
        return dropped_tool_result(message.name)
    if not options.get("compact_tool_results", True):
        return None
    return compact_tool_result(message.name, message.content, fields)


class HistorySource:
    """Earlier turns (L5): newest round first, whole rounds, tool pairs atomic.

    Options:

    * ``max_rounds``: keep at most this many recent rounds (recalled turns not counted).
    * ``compact_tool_results`` (default true): JSON results as compact text.
    * ``fields``: ``{tool_name: [path, ...]}``, the fields to keep of that tool's JSON results
      (dotted paths, ``items[].name``, ``*``; see ``compress.json_compact``).
    * ``tool_full``, ``tool_reduced`` (default 3), ``tool_early`` (``line`` | ``drop``),
      ``tool_line_chars`` (default 240): tiered retention, off unless ``tool_full`` is set. The
      newest ``tool_full`` call blocks keep their results whole, the next ``tool_reduced`` are
      reduced to key facts, older ones to one line (or a placeholder). A tool message carrying
      ``"consumed": true`` (the model said it has used it) is reduced even among the newest.
    * ``recall_share`` (default 0: off), ``recall_limit`` (default 400): about this share of what
      history offers is older turns the recaller ranks relevant to the input, whole turns in
      their original order, placed before the recent ones and marked as recalled (with their
      date when they have a timestamp). ``recent_rounds`` (default 0): the newest this many
      rounds come first, before any recalled turn, so a vague follow-up ("ok, go on") still
      sees what was just said. A recalled turn that ends up in sequence (everything after it
      is kept) is shown unmarked.
    * ``digest_share`` (default 0: off), ``digest_scan`` (default 400): when rounds do not fit,
      about this share of history's budget holds one fenced item listing the exact values (ids,
      numbers, dates, codes) first seen in the omitted messages (see ``history_digest``).
    """

    namespace = "history"
    traits = SourceTraits(
        offers="messages", message_list="history", contiguous=True, max_item_share=0.5,
        fenced=True, digestible=True, recalls=True, request_part="history",
        layout=Layout(anchor_option="tier_anchor", recall_option="recall_share",
                      window_option="max_rounds",
                      shaping_options=("tool_full", "recall_share", "max_rounds")),
        labels={"en": "History", "zh": "历史对话"},
        added=AddedSource(weight=0.20, before=("user",), rank=0, options={
            # An added history is a conversation's: the newest rounds, then older turns that
            # the input recalls (as the chat plan shows them), tool results in tiers.
            "recall_share": 0.9, "recall_limit": 400, "recent_rounds": 3,
            "tool_full": 2, "tool_reduced": 3}))
    options_model = HistoryOptions

    def __init__(self, recaller: TurnRecaller | None = None) -> None:
        """``recaller`` ranks older turns for ``recall_share`` (default: lexical BM25)."""
        self.recaller: TurnRecaller = (recaller if recaller is not None
                                     else LexicalTurnRecaller(expansion=RecallExpansion()))

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """Items newest round first; each round's blocks newest first; recalled turns between.

        A history system message that repeats ``request.system`` is left out (and reported):
        the system source shows the prompt already.
        """
        share = float(options.get("recall_share", 0) or 0)
        prompt = request.system.strip() if request.system else ""
        if share > 0 and request.history:
            items = self._with_recall(request, options, min(share, 0.9))
            if prompt:
                items = _without_copies_of(prompt, items)
            yield from items
        else:
            yield from self._recent(request, options, prompt)

    def digest(self, request: Request, options: Mapping[str, Any],
               kept: Sequence[ContextItem], max_tokens: int,
               cost: Callable[[ContextItem], int]) -> ContextItem | None:
        """Exact values of the omitted messages, for ``digest_share`` (``history_digest``)."""
        return history_digest(request, options, kept, max_tokens, cost)

    def recall_focus(self, request: Request, options: Mapping[str, Any]) -> float | None:
        """How focused the input's recall is (``turn_focus``), None when nothing is recalled."""
        if not (float(options.get("recall_share", 0) or 0) > 0 and request.history):
            return None
        return turn_focus(self.recaller, request.user_input, turn_index(request.history).turns,
                          limit=int(options.get("recall_limit", DEFAULT_RECALL_LIMIT)),
                          now=asked_at(request.turn, request.history))

    def recalled_turns(self, request: Request, options: Mapping[str, Any],
                       starts: Sequence[int]) -> Iterator[ContextItem]:
        """The turns opening at ``starts`` (history positions) as recalled, marked turns.

        A build that keeps a stable prefix shows a turn recalled for an earlier input again in
        the same form, whatever the current input ranks.
        """
        if not starts:
            return
        index = turn_index(request.history)
        since_cut = calls_since_cut(request, options)
        for start in sorted(set(starts)):
            position = bisect_left(index.turns, start, key=lambda turn: turn.index)
            if position < len(index.turns) and index.turns[position].index == start:
                yield from cached_recalled_items(request, options, index, position, since_cut)

    def _recent(self, request: Request, options: Mapping[str, Any],
                prompt: str = "") -> Iterator[ContextItem]:
        """Items of history's blocks newest first, the tiers applied.

        ``prompt``: the system prompt (stripped); a history system message that repeats it is
        marked as omitted (``_without_copies_of``).

        Blocks are read as ``_recent_blocks`` reads them (a message that is a block by itself
        without a ``Block``).
        """
        max_rounds = options.get("max_rounds")
        rounds_done = 0
        for _, opens_round, items in _recent_blocks(request, options):
            if max_rounds is not None and rounds_done >= max_rounds:
                return
            for item in items:
                yield _without_copy_of(prompt, item) if prompt else item
            rounds_done += opens_round

    def _with_recall(self, request: Request, options: Mapping[str, Any],
                     share: float) -> Iterator[ContextItem]:
        """The recent stream with recalled turns interleaved to keep about ``share`` of it.

        A recalled turn is offered at a round boundary whenever recalled turns hold less than
        ``share`` of the (estimated) tokens offered so far, so whatever prefix of the stream
        the budget keeps has about that share recalled; the first ``recent_rounds`` rounds come
        before any. Only turns wholly older than everything the recent stream has offered are
        eligible, and the recent stream skips a turn already recalled: no turn is offered twice.
        """
        index = turn_index(request.history)
        # When the input is asked, as the messages tell it: its time words are dated from it.
        ranked = rank_turns(self.recaller, request.user_input, index.turns,
                            limit=int(options.get("recall_limit", DEFAULT_RECALL_LIMIT)),
                            now=asked_at(request.turn, request.history))
        segments = (Segment(items, _segment_tokens(items), opens_round, start)
                    for start, opens_round, items in _recent_blocks(request, options))
        rule = Interleaving(share=share, anchor=int(options.get("recent_rounds", 0) or 0),
                            max_rounds=options.get("max_rounds"))
        since_cut = calls_since_cut(request, options)
        yield from interleave(segments, ranked, index, rule, frontier=len(request.history),
                              recalled=lambda position: cached_recalled_items(
                                  request, options, index, position, since_cut))


def _tier_anchor(options: Mapping[str, Any]) -> float:
    """Where tiers are computed as of (``tier_anchor``; infinity: the end of the list).

    A build that keeps a stable prefix sets it to the list's length at its last cut: calls
    made since stay whole until the next cut, and older results keep the tier they were shown
    in, so what is shown of them does not change call after call.
    """
    anchor = options.get("tier_anchor")
    return float("inf") if anchor is None else int(anchor)


def calls_since_cut(request: Request, options: Mapping[str, Any]) -> int:
    """Call blocks of ``request.history`` since the last cut (``tier_anchor``; 0 without one).

    They do not age the tool results of older turns until the next cut. Counted once per
    build: a recalled turn's tiers need it, and the list may be long.
    """
    return _calls_from(request.history, _tier_anchor(options))


def _calls_from(history: Sequence[Mapping[str, Any]], anchor: float) -> int:
    """Call blocks at or after ``anchor`` (0 without one): they do not age older results."""
    if anchor == float("inf"):
        return 0
    return sum(1 for raw in history[int(anchor):]
               if isinstance(raw, Mapping) and raw.get("role") == "assistant"
               and raw.get("tool_calls"))


@memoized("sources.conversation.estimate", max_entries=65_536, share=0.03,
          size=lambda args, _: text_bytes(args[0]))
def _estimate(text: str) -> int:
    """``estimate_tokens``, remembered per content (the recent stream is re-read every build)."""
    return estimate_tokens(text)


_RECALLED_LIMIT = 20_000


def cached_recalled_items(request: Request, options: Mapping[str, Any], index: TurnIndex,
                          position: int, since_cut: int) -> list[ContextItem]:
    """``recalled_items``, remembered per turn, options and tool tiers.

    ``since_cut``: call blocks made since the last cut (``calls_since_cut``), which do not age
    the turn's tool results.

    The same turns are recalled build after build, for one input or another; handing back the
    very same items lets the builder reuse their rendering (the score each input recalls a
    turn at is noted for the report apart from them: ``core.notes``). A remembered turn is used
    only if each of its messages still parses to the same object (``parse_message`` notices a
    dict edited in place).
    """
    turn, end = index.turns[position], index.ends[position]
    history = request.history
    # A turn without tool calls is shown the same whatever the options and however many
    # calls were made since (they only tier tool results).
    if index.may_hold_calls(position):
        options_text = options_key(options)
        key: tuple[Any, ...] = (id(history[turn.index]), turn.index, end, options_text, _tier_rank(
            options, options_text, index.calls_newer_than(position) - since_cut))
    else:
        key = (id(history[turn.index]), turn.index, end)
    cached = RECALLED_UNITS.get(key)
    if cached is not None and _still_parsed_as(history, turn.index, cached[0]):
        return cached[1]
    items = recalled_items(request, options, index, position, since_cut)
    messages = tuple(parse_message(history[at], f"history[{at}]")
                     for at in range(turn.index, end))
    if len(RECALLED_UNITS) >= _RECALLED_LIMIT:
        RECALLED_UNITS.clear()
    RECALLED_UNITS[key] = (messages, items)
    return items


_TIER_ENDS: dict[str, int | None] = {}
"""Per options key: where the last tool-result tier ends (None: tiers off)."""


def _tier_rank(options: Mapping[str, Any], options_text: str, rank: int) -> int:
    """What of a turn's call rank (call blocks newer than it) its tool results' tiers tell.

    Past the last tier every older block is shown the same (one line, or a placeholder), so
    a turn recalled again after more calls were made is the same items: in an agent's session
    each new call would otherwise make every recalled turn with calls new items, rendered and
    counted again. ``options_text`` is ``options_key(options)``: the tiers are read once per
    options, not once per recalled turn of every build.
    """
    if options_text in _TIER_ENDS:
        end = _TIER_ENDS[options_text]
    else:
        tiers = ToolTiers.from_options(options)
        end = None if tiers is None else tiers.full + tiers.reduced
        if len(_TIER_ENDS) > 10_000:
            _TIER_ENDS.clear()
        _TIER_ENDS[options_text] = end
    return 0 if end is None else min(rank, end)


def _still_parsed_as(history: Sequence[Mapping[str, Any]], start: int,
                     messages: Sequence[Message]) -> bool:
    """Whether ``history[start:]`` still parses to ``messages``, object for object."""
    for at, message in enumerate(messages, start):
        if parsed_unchanged(history[at]) is not message:
            return False
    return True


def _recent_blocks(request: Request, options: Mapping[str, Any]
                   ) -> Iterator[tuple[int, bool, list[ContextItem]]]:
    """History's blocks newest first: (first position, opens a round, items; tiers applied).

    Every build reads the same messages again, so a message that is a block by itself (most
    are: a call comes with its results) is read without a ``Block``: its parse checked
    unchanged, its remembered item handed on (``block_items``'s common case).
    """
    history = request.history
    key = options_key(options)
    tiers = ToolTiers.from_options(options)
    anchor = _tier_anchor(options)
    calls_seen = 0
    open_from, reasoning = open_loop(history)
    index = len(history) - 1
    while index >= 0:
        message = parsed_unchanged(history[index]) or parse_listed(history, "history", index)
        if message.role != "tool" and not message.tool_calls:
            yield index, message.role == "user", [
                _lone_item(message, index, options, key, reasoning, open_from)]
            index -= 1
            continue
        block = next(read_blocks_backward(history, "history", index + 1))
        retention = None
        if tiers is not None and block.messages[0].tool_calls and block.start < anchor:
            retention = Retention(tiers, calls_seen, history)
            calls_seen += 1
        yield block.start, block.messages[0].role == "user", block_items(
            block, "history", Layer.HISTORY, True, options, key, retention,
            reasoning if block.start >= open_from else None)
        index = block.start - 1


def _lone_item(message: Message, index: int, options: Mapping[str, Any], key: str,
               reasoning: list[int], open_from: int) -> ContextItem:
    """The item of a history message that is a block by itself (no calls, not a result).

    ``block_items``'s common case without a ``Block``: the item remembered for this very
    message at this position, unless its open tool loop's reasoning shapes it.
    """
    cached = _ITEMS.get((id(message), index, "history", ""))
    if cached is not None and cached[0] is message and (not reasoning or index < open_from):
        return cached[1]
    item, = block_items(Block(index, (message,), 1), "history", Layer.HISTORY, True, options,
                        key, None, reasoning if index >= open_from else None)
    return item


def _segment_tokens(items: Sequence[ContextItem]) -> int:
    """Estimated tokens of a recent segment's items (each with its message's framing)."""
    if len(items) == 1:
        return _estimate(items[0].message.content) + 4
    return sum(_estimate(item.message.content) + 4 for item in items)


def open_loop_reasoning(messages: Sequence[Mapping[str, Any]], start: int) -> list[int]:
    """Positions from ``start`` on of the assistant messages that came with reasoning."""
    return [position for position in range(start, len(messages))
            if isinstance(raw := messages[position], Mapping)
            and raw.get("role") == "assistant" and raw.get("thinking_blocks")]


def last_call_position(messages: Sequence[Mapping[str, Any]]) -> int:
    """Position of the last assistant message with tool calls (-1: there is none).

    The loop it opened is still running: the provider takes back its reasoning and that of
    the calls before it. An assistant message after it answered the loop, so its reasoning is
    not sent (reported), and one that says nothing else is left out like an empty reply.
    """
    for position in range(len(messages) - 1, -1, -1):
        raw = messages[position]
        if isinstance(raw, Mapping) and raw.get("role") == "assistant" and raw.get("tool_calls"):
            return position
    return -1


def _reasoning_before(positions: Sequence[int], start: int) -> int | None:
    """The last of ``positions`` at or before ``start`` (None: none)."""
    at = bisect_right(positions, start) - 1
    return positions[at] if at >= 0 else None


def open_loop(history: Sequence[Mapping[str, Any]]) -> tuple[int, list[int]]:
    """Where the history's open tool loop starts, and which of its messages carry reasoning.

    The start is the history's length when there is no open loop; the positions are those of
    ``open_loop_reasoning``. A history that ends with a tool result ends in a loop the
    assistant has not answered yet: the messages after its last user message. The provider
    takes their reasoning back (``Message.thinking``); an answered turn's it does not.
    """
    end = len(history)
    if not end or not isinstance(history[-1], Mapping) or history[-1].get("role") != "tool":
        return end, []
    start = 0
    for position in range(end - 1, -1, -1):
        raw = history[position]
        if isinstance(raw, Mapping) and raw.get("role") == "user":
            start = position + 1
            break
    return start, open_loop_reasoning(history, start)


def recalled_items(request: Request, options: Mapping[str, Any], index: TurnIndex,
                   position: int, since_cut: int) -> list[ContextItem]:
    """One recalled turn as a single unit: its opening user message first, then the rest.

    One group, so the turn is kept or dropped whole; the opening message comes first so the unit
    opens a round (rendering sorts by ``order``, so the turn still reads in its own order).
    The opening message is marked as recalled (``recall_marker``); the marker line is named in
    ``metadata["keep_head"]``, so a cut keeps it and the builder can drop it when everything
    after the turn is kept too (the turn is then simply in its place, ``core.sequence``).
    """
    turn = index.turns[position]
    key = options_key(options)
    tiers = ToolTiers.from_options(options)
    calls_seen = index.calls_newer_than(position) - since_cut
    items: list[ContextItem] = []
    for block in read_blocks_backward(request.history, "history", index.ends[position],
                                      turn.index):
        retention = None
        if tiers is not None and block.messages[0].tool_calls:
            retention = Retention(tiers, calls_seen, request.history)
            calls_seen += 1
        items = block_items(block, "history", Layer.HISTORY, True, options, key,
                            retention) + items
    group = f"recalled{turn.index}"
    opening, rest = items[0], items[1:]
    content = recall_marker(opening.message.content, opening.message.timestamp)
    head = content[: len(content) - len(opening.message.content)]
    marked = Message(role=opening.message.role, content=content, id=opening.message.id,
                     timestamp=opening.message.timestamp, images=opening.message.images)
    reason = recall_reason(turn.index, index.ends[position])
    first = replace(opening, message=marked, group=group, round_start=True,
                    metadata={**opening.metadata, "recalled": reason, KEEP_HEAD: head})
    return [first, *(replace(item, group=group, round_start=False) for item in rest)]


def recall_reason(start: int, end: int) -> str:
    """The report's reason for keeping the turn ``history[start:end]``.

    The score it was recalled at is the input's, noted apart (``core.notes``) and added by the
    report.
    """
    return f"recalled: older turn relevant to the input (history[{start}:{end}])"


RECALL_PREFIX = "[recalled"
"""How a recalled turn's opening message starts; any other history message that starts so is
escaped with a backslash, so content cannot pass for a recalled turn."""


def looks_recalled(content: str) -> bool:
    r"""Whether ``content`` reads as a recalled turn's marker (``RECALL_PREFIX``).

    Judged as it reads (``core.folding.shape``), after any leading space, so
    ``\u200b[recalled``, ``［recalled``, `` [Recalled``, ``\u2800[recalled`` and look-alike
    letters (``[RΕCALLED`` with a Greek capital epsilon) count too.
    """
    return shape(content).lstrip().startswith(RECALL_PREFIX)


def recall_marker(content: str, timestamp: str | None = None) -> str:
    """``content`` under a line saying it is a recalled earlier turn, dated when known.

    ``[recalled 2023-05-08]`` for a timestamp in ISO 8601, else ``[recalled]``: the date tells
    the model when a turn shown out of its place was said (a "yesterday" in it is relative to
    that day), for a handful of tokens. Other timestamps are not shown (they are the caller's
    free text, and this line must not carry anything but the marker).
    """
    day = iso_day(timestamp)
    return f"{RECALL_PREFIX}{' ' + day if day else ''}]\n{content}"


def iso_day(timestamp: str | None) -> str | None:
    """The ``YYYY-MM-DD`` of an ISO 8601 timestamp, None for anything else."""
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return None


class ToolResultSource:
    """This turn's tool calls and results (L4), rendered after the user input, newest first.

    Options as for history: ``compact_tool_results``, ``fields``, the tiers (``tool_full``
    …), for an agent loop that makes many calls in one turn (``consumed`` waits for the next
    turn), and ``digest_share`` / ``digest_scan`` for the calls that do not fit.
    """

    namespace = "tool_results"
    traits = SourceTraits(
        offers="messages", message_list="turn", contiguous=True, fenced=True, digestible=True,
        request_part="turn", labels={"en": "Tool results", "zh": "工具结果"},
        layout=Layout(anchor_option="tier_anchor", shaping_options=("tool_full",)),
        added=AddedSource(weight=0.10, rank=1, options={"tool_full": 2, "tool_reduced": 3}))
    options_model = ToolResultOptions

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One unit per call block of ``request.turn``, newest first."""
        key = options_key(options)
        tiers = ToolTiers.from_options(options)
        anchor = _tier_anchor(options)
        calls_seen = 0
        loop_end = last_call_position(request.turn)
        reasoning = [p for p in open_loop_reasoning(request.turn, 0) if p <= loop_end]
        for block in read_blocks_backward(request.turn, "turn"):
            retention = None
            if tiers is not None and block.messages[0].tool_calls and block.start < anchor:
                retention = Retention(tiers, calls_seen, ())
                calls_seen += 1
            yield from block_items(block, "tool_results", Layer.EVIDENCE, False, options, key,
                                   retention, reasoning if block.start <= loop_end else None)

    def digest(self, request: Request, options: Mapping[str, Any],
               kept: Sequence[ContextItem], max_tokens: int,
               cost: Callable[[ContextItem], int]) -> ContextItem | None:
        """Exact values of this turn's omitted calls and results, for ``digest_share``."""
        return omitted_digest(request.turn, "turn", request.user_input, options, kept,
                              max_tokens, cost)


register_cache("sources.conversation.blocks", _BLOCKS)
register_cache("sources.conversation.items", _ITEMS)
register_cache("sources.conversation.option_keys", _OPTION_KEYS)
register_cache("sources.conversation.tier_ends", _TIER_ENDS)
register_cache("sources.conversation.estimate", _estimate)
