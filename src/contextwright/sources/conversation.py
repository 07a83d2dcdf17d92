"""History and current-turn sources: conversation messages read newest-first, tool calls paired.

Both read the caller's message list backwards, one *block* at a time: a single message, or an
assistant message with tool calls together with the tool messages that follow it (paired by
position, since some agents reuse call ids). A block is one unit: it is kept or dropped whole, so a
call is never separated from its result. A tool message that answers no call is an
``InvalidInputError``; a call whose result is missing gets an explicit placeholder result.
Tool results are compacted from JSON to readable text (raw kept on the item) and marked untrusted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from contextwright.compress.json_compact import compact_tool_result
from contextwright.core.items import ContextItem, Layer, Message, parse_message
from contextwright.core.request import Request
from contextwright.errors import InvalidInputError

MISSING_RESULT = "[no result was recorded for this call]"


class Block(NamedTuple):
    """A run of messages that must stay together, with the index of its first message.

    A named tuple rather than a dataclass: one is made for every message a build reads.
    """

    start: int
    messages: tuple[Message, ...]
    given: int
    """How many of ``messages`` were in the caller's list; the rest are placeholder results."""


def read_blocks_backward(raw: Sequence[Mapping[str, Any]], where: str) -> Iterator[Block]:
    """Blocks of ``raw`` from the newest to the oldest, parsing only what is read."""
    index = len(raw) - 1
    while index >= 0:
        message = parse_message(raw[index], f"{where}[{index}]")
        if message.role != "tool":
            calls = _complete_calls(message, []) if message.tool_calls else (message,)
            yield Block(index, calls, 1)
            index -= 1
            continue
        results = [message]
        index -= 1
        while index >= 0:
            message = parse_message(raw[index], f"{where}[{index}]")
            if message.role != "tool":
                break
            results.append(message)
            index -= 1
        if index < 0 or message.role != "assistant" or not message.tool_calls:
            raise InvalidInputError(
                f"{where}[{index + 1}] is a tool result that follows no assistant tool call"
            )
        results.reverse()
        _check_results_answer_calls(message, results, where, index)
        yield Block(index, _complete_calls(message, results), 1 + len(results))
        index -= 1


def _check_results_answer_calls(call: Message, results: list[Message], where: str,
                                index: int) -> None:
    expected = [c.id for c in call.tool_calls]
    for offset, result in enumerate(results, start=1):
        if result.tool_call_id not in expected:
            raise InvalidInputError(
                f"{where}[{index + offset}] answers no call of {where}[{index}]"
            )
        expected.remove(result.tool_call_id)  # each call is answered once, by position


_BLOCKS: dict[tuple[int, ...], tuple[Message, list[Message], tuple[Message, ...]]] = {}


def _complete_calls(call: Message, results: list[Message]) -> tuple[Message, ...]:
    """The call, its results named after their calls, and placeholders for missing results.

    Remembered per message objects, so a re-read history yields the very same messages.
    """
    if not call.tool_calls:
        return (call,)
    key = (id(call), *map(id, results))
    cached = _BLOCKS.get(key)
    if cached is not None and cached[0] is call and all(
        a is b for a, b in zip(cached[1], results, strict=True)
    ):
        return cached[2]
    completed = _name_and_complete(call, results)
    if len(_BLOCKS) >= 200_000:
        _BLOCKS.clear()
    _BLOCKS[key] = (call, list(results), completed)
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


def _with_name(result: Message, name: str | None) -> Message:
    return Message(role="tool", content=result.content, tool_call_id=result.tool_call_id,
                   name=name, id=result.id, timestamp=result.timestamp)


def block_items(block: Block, namespace: str, layer: Layer, rounds: bool,
                options: Mapping[str, Any], options_key: str) -> list[ContextItem]:
    """Context items of one block, in render order, sharing one group.

    Items are remembered per (message object, position, options): a history is re-read on every
    turn and its old messages yield the very same items, so later steps can reuse their work.
    """
    if len(block.messages) == 1:  # the common case: one plain message, usually remembered
        message = block.messages[0]
        cached = _ITEMS.get((id(message), block.start, namespace, options_key))
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
        cache_key = (id(message), index, namespace, options_key)
        cached = _ITEMS.get(cache_key)
        if cached is not None and cached[0] is message:
            items.append(cached[1])
            continue
        item = _item(message, f"{namespace}.m{index}", layer, f"b{block.start}",
                     (message.role == "user") if rounds else None, index, options)
        if len(_ITEMS) >= _ITEMS_LIMIT:
            _ITEMS.clear()
        _ITEMS[cache_key] = (message, item)
        items.append(item)
    return items


_ITEMS: dict[tuple[int, int, str, str], tuple[Message, ContextItem]] = {}
_ITEMS_LIMIT = 200_000


_OPTION_KEYS: dict[int, tuple[Mapping[str, Any], str]] = {}


def options_key(options: Mapping[str, Any]) -> str:
    """A stable text key of a source's options, for caches.

    Remembered per options object: options belong to an immutable plan and are not edited.
    """
    cached = _OPTION_KEYS.get(id(options))
    if cached is not None and cached[0] is options:
        return cached[1]
    plain = options.thaw() if hasattr(options, "thaw") else dict(options)
    key = json.dumps(plain, sort_keys=True, default=str)
    if len(_OPTION_KEYS) > 10_000:
        _OPTION_KEYS.clear()
    _OPTION_KEYS[id(options)] = (options, key)
    return key


def _item(message: Message, key: str, layer: Layer, group: str, round_start: bool | None,
          order: float, options: Mapping[str, Any]) -> ContextItem:
    metadata = {"message_id": message.id, "timestamp": message.timestamp}
    if message.role != "tool":
        return ContextItem(key=key, message=message, layer=layer, group=group,
                           round_start=round_start, order=order,
                           truncatable=not message.tool_calls, metadata=metadata)
    compact = None
    if message.content != MISSING_RESULT and options.get("compact_tool_results", True):
        fields = options.get("fields", {}).get(message.name or "")
        compact = compact_tool_result(message.name, message.content, fields)
    shown = message if compact is None else Message(
        role="tool", content=compact, tool_call_id=message.tool_call_id, name=message.name,
        id=message.id, timestamp=message.timestamp)
    return ContextItem(key=key, message=shown, layer=layer, group=group, round_start=round_start,
                       order=order, untrusted=True, truncatable=True,
                       label=f"tool {message.name or 'result'}",
                       raw=None if compact is None else message.content, metadata=metadata)


class HistorySource:
    """Earlier turns (L5): newest round first, whole rounds, tool pairs atomic.

    Options: ``max_rounds`` (keep at most this many rounds), ``compact_tool_results`` (default
    true), ``fields`` (``{tool_name: [field, ...]}`` to keep from JSON results).
    """

    namespace = "history"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """Items newest round first; each round's blocks newest first."""
        max_rounds = options.get("max_rounds")
        key = options_key(options)
        rounds_done = 0
        for block in read_blocks_backward(request.history, "history"):
            if max_rounds is not None and rounds_done >= max_rounds:
                return
            yield from block_items(block, "history", Layer.HISTORY, True, options, key)
            if block.messages[0].role == "user":
                rounds_done += 1


class ToolResultSource:
    """This turn's tool calls and results (L4), rendered after the user input, newest first."""

    namespace = "tool_results"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One unit per call block of ``request.turn``, newest first."""
        key = options_key(options)
        for block in read_blocks_backward(request.turn, "turn"):
            yield from block_items(block, "tool_results", Layer.EVIDENCE, False, options, key)
