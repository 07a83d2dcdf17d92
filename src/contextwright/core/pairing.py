"""The tool-pair rule, in one place: which tool results answer which calls.

An assistant message's tool calls are answered by the tool messages that directly follow it,
in any order, each call at most once (a later call block may reuse an id). The request check,
the history source and the output validation all apply this rule through ``pair_results``;
each decides what an unanswered call means (a placeholder when building, an error in output).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = ["Pairing", "pair_results"]


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
