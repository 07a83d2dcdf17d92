"""Mode hand-offs and the per-turn zone updates of structured mode.

A switch condenses the current window (≤ ~200 tokens: the user's original need, confirmed key
facts, what is still open) into the facts zone, clears the tools zone and records the switch.
Pure functions over ``SessionState``; the manager stores the result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from contextwright.compress.facts import extract_facts
from contextwright.compress.json_compact import compact_tool_result
from contextwright.compress.summarize import (
    _CHANGE_REQUEST,
    _CORRECTION,
    Summary,
    condense_for_handoff,
)
from contextwright.compress.tool_results import one_line_tool_result, reduce_tool_result
from contextwright.core.items import TOOL_ERROR_MARK, parse_message
from contextwright.errors import SummaryError
from contextwright.manager.turns import as_messages, split_rounds
from contextwright.modes.config import ModeSettings
from contextwright.modes.corrections import supersede_facts
from contextwright.modes.zones import (
    PENDING_RESULT,
    TOOL_RESULT_CHARS,
    Task,
    ToolRecord,
    add_facts,
    add_handoff,
    add_tool_calls,
    cut_result,
    fill_tool_results,
    note_answer,
    update_task,
)
from contextwright.session.state import MAX_MODE_HISTORY, ModeSwitch, SessionState
from contextwright.session.store import StoredMessage
from contextwright.tokens import CountingTokenizer

logger = logging.getLogger("contextwright.session")

HANDOFF_MAX_TOKENS = 200
"""Seed 003 §4.3: the hand-off summary stays under ~200 tokens."""


def hand_off(state: SessionState, switch: ModeSwitch, previous: Sequence[StoredMessage], *,
             window_size: int, tokenizer: CountingTokenizer) -> SessionState:
    """The state after ``switch``: the old window condensed into the facts zone, tools cleared.

    ``previous``: the session's messages up to the one that caused the switch (``at_seq``).
    That message belongs to the new mode's window, so it is condensed only when it corrects
    something ("Actually the order is 20241010"): the correction is then part of what the old
    mode hands over, and no later hand-off, which condenses only its own window, would see it.
    """
    history = (*state.mode_history, switch)[-MAX_MODE_HISTORY:]
    state = replace(state, mode=switch.new_mode, mode_history=history)
    if switch.old_mode is None:
        return state  # the session's first message: nothing to hand over
    rounds = split_rounds([m for m in previous if m.seq < switch.at_seq])
    window = [m for round_ in rounds[-max(window_size, 1):] for m in round_]
    window += [m for m in previous if m.seq == switch.at_seq and _corrects_something(m)]
    if not window:
        return replace(state, zones=add_handoff(state.zones, None))
    # Each hand-off merges into the previous one, so the facts zone holds one condensed
    # account of the session's earlier modes rather than overlapping copies.
    base = _with_task(Summary.from_dict(state.handoff) if state.handoff else None,
                           state.zones.task, state.language or "en")
    try:
        summary = condense_for_handoff(base, as_messages(window), tokenizer=tokenizer,
                                       max_tokens=HANDOFF_MAX_TOKENS,
                                       language=state.language or "en")
    except SummaryError as exc:
        # The switch itself must happen (the user's message is already stored): without a
        # summary that fits, the mode changes with the earlier hand-off text kept as it was.
        logger.warning("hand-off summary left out: %s", exc)
        return replace(state, zones=add_handoff(state.zones, None))
    # The hand-off line leaves out the facts the zone already lists: they are written once and
    # never removed, and they come before the hand-off in the zone's text (a cut from the end
    # reaches the hand-off first), so each fact is still shown once. The stored hand-off
    # summary keeps them all: the next hand-off merges into it.
    line = summary.without_facts(state.zones.facts).render(state.language or "en")
    return replace(state, handoff=summary.to_dict(), zones=add_handoff(state.zones, line))


def _corrects_something(stored: StoredMessage) -> bool:
    message = stored.message
    return message.get("role") == "user" and _is_correction(
        parse_message(message, f"session[seq {stored.seq}]").content)


def _is_correction(text: str) -> bool:
    """Whether a user message corrects something said before (as the summariser reads it)."""
    return _CORRECTION.search(text) is not None or _CHANGE_REQUEST.search(text) is not None


_NOT_DONE = {"en": "not done: {}", "zh": "未完成：{}"}


def _with_task(base: Summary | None, task: Task, language: str) -> Summary | None:
    """``base`` carrying the task of the mode being left, done or not.

    The window a switch condenses is the last rounds, which may hold only what made the mode
    let go (small talk, a question asked on the side); the task zone is cleared at the switch,
    so its goal goes into the hand-off as the need (unless an earlier hand-off named one), and
    the steps not yet run of a task left unfinished as still open.
    """
    if not task.goal:
        return base
    base = base or Summary()
    pending = () if task.closed else tuple(
        _NOT_DONE.get(language, _NOT_DONE["en"]).format(step) for step in task.next)
    return replace(base, need=base.need or task.goal,
                   unresolved=tuple(dict.fromkeys((*base.unresolved, *pending))))


def note_user_message(state: SessionState, text: str, settings: ModeSettings) -> SessionState:
    """The message may set the goal, plan steps, state key facts and correct listed ones.

    Goal, steps and new facts are structured mode's; a correction marks the facts it replaces
    in any mode, since the facts zone is shown in every mode.
    """
    zones = supersede_facts(state.zones, text, correction=_is_correction(text),
                            listing=settings.zones)
    if settings.zones:
        said = [fact for fact in extract_facts(text) if zones.replacement(fact) is None]
        zones = add_facts(update_task(zones, text), said)
    return state if zones == state.zones else replace(state, zones=zones)


def record_turn_in_zones(state: SessionState, batch: Sequence[Mapping[str, Any]],
                         settings: ModeSettings) -> SessionState:
    """Structured mode: recorded tool calls and their results enter the tools zone.

    An agent may record a call and its result in separate ``record`` calls: a result whose call
    is not in ``batch`` fills in that call's pending record in the zone. A turn that works on
    the task (a tool call, a step done) starts the count of kept turns again: ``keep_limit``
    bounds the messages a mode is kept for while nothing happens in it, not a task that
    advances with each of the user's "yes".
    """
    if not settings.zones:
        return state
    records = tool_records(batch)
    zones = fill_tool_results(state.zones, later_results(batch), _result_text)
    zones = add_tool_calls(zones, records, settings.tool_zone_keep)
    answer = _answer(batch)
    if answer is not None:
        zones = note_answer(zones, answer)
    worked = bool(records) or zones.task.done != state.zones.task.done
    kept_turns = 0 if worked else state.kept_turns
    if zones == state.zones and kept_turns == state.kept_turns:
        return state
    return replace(state, zones=zones, kept_turns=kept_turns)


def _answer(batch: Sequence[Mapping[str, Any]]) -> str | None:
    """The assistant's answer ``batch`` ends with (text, no further tool call), if it does."""
    last = batch[-1] if batch else None
    if last is None or last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    text = parse_message(last, "assistant answer").content
    return text if text.strip() else None


def tool_records(batch: Sequence[Mapping[str, Any]]) -> list[ToolRecord]:
    """One record per tool call in ``batch``, with its result when the batch holds it."""
    results = _results_by_call_id(batch)
    records = []
    for message in batch:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or call
            name = str(function.get("name", ""))
            call_id = _call_id(call)
            result = results.get(call_id) if call_id else None
            records.append(ToolRecord(
                name=name, arguments=_compact_json(function.get("arguments", "")),
                result=cut_result(_result_text(name, result)) if result is not None
                else PENDING_RESULT,
                call_id=call_id,
            ))
    return records


def later_results(batch: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Results in ``batch`` (call id → text) whose call came in an earlier batch."""
    calls_here = {_call_id(call) for message in batch for call in message.get("tool_calls") or ()}
    return {call_id: text for call_id, text in _results_by_call_id(batch).items()
            if call_id not in calls_here}


def _results_by_call_id(batch: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {str(m["tool_call_id"]): parse_message(m, "tool result").content for m in batch
            if m.get("role") == "tool" and m.get("tool_call_id")}


def _call_id(call: Mapping[str, Any]) -> str:
    return str(call.get("id") or "")


_COMPACT_LABEL = "Tool result: "
_REDUCED_LABEL = "Tool result, key facts: "
_LINE_LABEL = "Earlier tool result: "
"""What ``compact_tool_result``, ``reduce_tool_result`` and ``one_line_tool_result`` put before
a result of no named tool (in English, their default wording)."""


def _result_text(name: str, content: str) -> str:
    """A result as the tools zone shows it, within ``TOOL_RESULT_CHARS`` when it can be.

    JSON results as compact text, like the builder shows them; one too long for the zone as
    its key facts, then as the identifiers and dates that fit: a zone cut at a character count
    would split the order number or date the next step needs. The zone's line names the tool
    (``name``) with its call, so the result goes without the label that would name it again.
    """
    del name  # the line's call names the tool
    compact = compact_tool_result(None, content)
    shown = content if compact is None else _unlabelled(compact, _COMPACT_LABEL)
    if _fits_zone(shown):
        return shown
    reduced = _unlabelled(reduce_tool_result(None, content), _REDUCED_LABEL)
    if _fits_zone(reduced):
        return reduced
    line = one_line_tool_result(None, content, TOOL_RESULT_CHARS + len(_LINE_LABEL))
    return _unlabelled(line, _LINE_LABEL)


def _unlabelled(text: str, label: str) -> str:
    """``text`` without ``label``, which follows its failure mark when it has one."""
    mark = f"{TOOL_ERROR_MARK} "
    if text.startswith(mark):
        return mark + text[len(mark):].removeprefix(label)
    return text.removeprefix(label)


def _fits_zone(text: str) -> bool:
    return len(" ".join(text.split())) <= TOOL_RESULT_CHARS


def _compact_json(arguments: object) -> str:
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError:
            return cut_result(arguments)
    return cut_result(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
