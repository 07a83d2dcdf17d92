"""The tool-pair rule, in one place: which tool results answer which calls.

An assistant message's tool calls are answered by the tool messages that directly follow it,
in any order, each call at most once (a later call block may reuse an id). The request check,
the history source and the output validation all apply this rule through ``pair_results``;
each decides what an unanswered call means (a placeholder when building, an error in output).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from contextwright.core.items import Message

__all__ = ["Pairing", "misplaced_result_message", "pair_results"]


class Pairing(NamedTuple):
    """How a run of tool results answers the calls before it."""

    stray: int | None
    """Offset (in the results) of the first result that answers no open call; None if all do."""
    unanswered: list[str]
    """The calls no result answered, in call order (up to ``stray`` when there is one)."""


def pair_results(call_ids: Sequence[str], result_ids: Iterable[str | None]) -> Pairing:
    """Pair the results that follow a call block with its ``call_ids``.

    A result answers the first still-open call with its id; one whose id names no open call
    (unknown, or answered already) is a stray, and pairing stops there.
    """
    pending = list(call_ids)
    for offset, result_id in enumerate(result_ids):
        if result_id is None or result_id not in pending:
            return Pairing(offset, pending)
        pending.remove(result_id)
    return Pairing(None, pending)


def misplaced_result_message(message_at: Callable[[int], Message], result_at: int,
                             begin: int, where: str) -> str:
    """Why the tool result at ``result_at`` opens a run that no assistant call heads.

    When an earlier assistant message (from ``begin`` on) made the call it answers, the
    message names that call and the message that stands between them (a user typing while
    the tool ran, say), so the caller sees what to move rather than a call that seems to be
    missing. Only an error path reads back this far, once.
    """
    orphan = f"{where}[{result_at}] is a tool result that follows no assistant tool call"
    call_id = message_at(result_at).tool_call_id
    if call_id is None:
        return orphan
    between: int | None = None
    for index in range(result_at - 1, begin - 1, -1):
        earlier = message_at(index)
        if earlier.role == "assistant" and any(c.id == call_id for c in earlier.tool_calls):
            if between is None or _answered_in_place(message_at, index, between, call_id):
                break
            role = message_at(between).role
            return (f"{where}[{result_at}] answers the call of {where}[{index}], but "
                    f"{where}[{between}] (a{'n' if role == 'assistant' else ''} {role} "
                    "message) stands between them: put tool results directly after the "
                    "assistant message that calls them")
        if earlier.role != "tool":
            between = index
    return orphan


def _answered_in_place(message_at: Callable[[int], Message], call_at: int, end: int,
                       call_id: str) -> bool:
    """Whether the results directly after the call at ``call_at`` already answer ``call_id``.

    Then a later result with that id is a second answer, not a misplaced first one.
    """
    results = (message_at(i).tool_call_id for i in range(call_at + 1, end))
    calls = [c.id for c in message_at(call_at).tool_calls]
    return call_id not in pair_results(calls, results).unanswered
