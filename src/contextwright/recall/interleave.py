"""The one interleaving step: recalled turns offered into a newest-first stream of recent items.

``HistorySource`` (the request's own older turns) and the manager's ``SessionHistorySource``
(turns no longer shown verbatim) both place recalled turns this way. A recalled turn is offered
at a round boundary whenever recalled turns hold less than ``share`` of the (estimated) tokens
offered so far, so whatever prefix of the stream the budget keeps has about that share
recalled; the first ``anchor`` rounds come before any. Recalled turns take at most
``max_tokens`` in all. The score each turn is recalled at is noted for the build's report
(``core.notes``), not put into its items.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from contextwright.core.items import ContextItem
from contextwright.core.notes import note_recall_score
from contextwright.recall.turns import TurnIndex


class Segment(NamedTuple):
    """A run of recent items offered together (a block of history, or one item)."""

    items: Sequence[ContextItem]
    tokens: int
    """Their estimated tokens."""
    opens_round: bool
    """Whether it starts a round (a round boundary follows it in the newest-first stream)."""
    start: int | None = None
    """Its first message's position in the index's numbering, when the stream shares it: a
    segment inside a recalled turn is then skipped, and only turns wholly older than every
    segment offered are recalled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Interleaving:
    """How recalled turns share the stream."""

    share: float
    """Recalled turns' share of the tokens offered."""
    anchor: int = 0
    """Rounds offered before any recalled turn."""
    max_tokens: float = math.inf
    """Estimated tokens all recalled turns together may take."""
    max_rounds: int | None = None
    """Recent rounds offered at most (recalled turns not counted); then the rest is recalled."""


def interleave(segments: Iterable[Segment], ranked: Sequence[tuple[int, float]],
               index: TurnIndex, rule: Interleaving, *, frontier: float = math.inf,
               recalled: Callable[[int], Sequence[ContextItem]]
               ) -> Iterator[ContextItem]:
    """The recent segments' items with ``ranked`` turns (best first) interleaved.

    ``recalled(position)`` renders the turn at ``position`` of ``index`` (its score is noted
    for the report, not passed: the items are the same for every input). ``frontier``:
    where the stream ends (one past its newest message, when it shares the index's numbering).
    No turn is offered twice: the stream skips a segment of a turn already recalled, and a turn
    the stream has already offered (part of) is not recalled.
    """
    pending = deque(ranked)
    covered: set[int] = set()  # positions of the messages of turns offered as recalled
    recent_tokens = recalled_tokens = rounds = 0
    for segment in segments:
        if segment.start is not None and segment.start in covered:
            continue
        if rule.max_rounds is not None and rounds >= rule.max_rounds:
            break  # max_rounds caps the recent rounds; recalled turns are not counted
        yield from segment.items
        recent_tokens += segment.tokens
        if segment.start is not None:
            frontier = segment.start
        if not segment.opens_round:
            continue
        rounds += 1
        while rounds >= rule.anchor and pending and recalled_tokens < min(
                rule.share * (recent_tokens + recalled_tokens), rule.max_tokens):
            position, score = pending.popleft()
            if index.ends[position] > frontier:
                continue  # the recent stream has it (or part of it) already
            covered.update(range(index.turns[position].index, index.ends[position]))
            recalled_tokens += index.tokens[position]
            yield from _noted(recalled(position), score)
    for position, score in pending:  # past the stream (or max_rounds): the rest, best first
        if recalled_tokens >= rule.max_tokens:
            break
        if index.ends[position] <= frontier:
            recalled_tokens += index.tokens[position]
            yield from _noted(recalled(position), score)


def _noted(items: Sequence[ContextItem], score: float) -> Sequence[ContextItem]:
    """``items`` (one recalled turn), with the score it was recalled at noted for the report.

    The score is this input's, so it stays out of the items (``core.notes``): the same turn
    recalled for the next input is the very same items, rendered and cached once.
    """
    if items:
        note_recall_score(items[0].key, score)
    return items
