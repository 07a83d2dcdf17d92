"""Questions over many snapshots: how long contexts get, which sources waste or lose tokens.

``summarize`` reads snapshots (any sink's ``read``) and answers, per plan or mode: the
context-length distribution (p50 / p95 / max tokens and share of the window), over-budget and
``BudgetError`` counts; per source: tokens granted but not used, how often it is cut; per item:
which are dropped most. Percentiles are nearest-rank, so each is a length some build really had.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from contextwright.errors import InvalidInputError
from contextwright.observe.snapshot import Snapshot

GroupBy = Literal["plan", "mode"]
_CUT = frozenset(("truncated", "compacted", "dropped", "deduplicated", "conflict"))
_LEFT_OUT = frozenset(("dropped", "deduplicated", "conflict"))


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of ``values`` (``share`` in 0–1); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True, kw_only=True)
class LengthRow:
    """Context length of the builds of one plan (or mode)."""

    group: str
    """Plan or mode name."""
    builds: int
    """Builds counted."""
    p50_tokens: float
    """Median context tokens."""
    p95_tokens: float
    """95th percentile of context tokens."""
    max_tokens: int
    """Longest context."""
    p95_window_share: float
    """95th percentile of tokens / window."""
    max_window_share: float
    """Largest tokens / window."""
    over_budget: int
    """Builds that used more than they had (a bug if ever non-zero)."""
    budget_errors: int
    """Builds that raised ``BudgetError``."""
    truncated_builds: int
    """Builds in which something was truncated or dropped for the budget."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRow:
    """One source across the builds."""

    source: str
    """Source name."""
    builds: int
    """Builds it took part in."""
    granted: int
    """Tokens granted, summed."""
    used: int
    """Tokens used, summed."""
    unused: int
    """Granted but not used, summed."""
    unused_share: float
    """``unused / granted``."""
    builds_with_unused: int
    """Builds where it was granted tokens it did not use."""
    cut_builds: int
    """Builds in which it lost or shortened an item."""
    truncated: int
    """Items truncated, summed."""
    compacted: int
    """Items compacted, summed."""
    dropped: int
    """Items left out, summed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRow:
    """One item key and how often it was left out or cut."""

    source: str
    """Source name."""
    key: str
    """Item key (``<source>.*`` for runs the build never read)."""
    dropped: int
    """Times left out (items of unread runs counted one by one)."""
    cut: int
    """Times truncated or compacted."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotSummary:
    """The answer of ``summarize``."""

    builds: int
    """Snapshots read."""
    since: float | None
    """Time of the oldest."""
    until: float | None
    """Time of the newest."""
    lengths: tuple[LengthRow, ...]
    """Length distribution per group."""
    sources: tuple[SourceRow, ...]
    """Sources, most unused tokens first."""
    most_cut: tuple[SourceRow, ...]
    """Sources, most often cut first (those never cut left out)."""
    most_dropped: tuple[ItemRow, ...]
    """Items, most often dropped first."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return asdict(self)


def summarize(snapshots: Iterable[Snapshot], *, group_by: GroupBy = "plan",
              source: str | None = None, top: int = 10) -> SnapshotSummary:
    """Aggregate ``snapshots``; ``source`` limits the source and item tables to one source.

    ``top`` is how many items the most-dropped table holds (``InvalidInputError`` below 0:
    as a slice's end it cut the table's last rows instead).
    """
    if type(top) is not int or top < 0:
        raise InvalidInputError("top is a whole number >= 0 (items in the most-dropped table)")
    if group_by not in ("plan", "mode"):  # anything else grouped by mode, saying nothing
        raise InvalidInputError("group_by is plan or mode")
    chosen = list(snapshots)
    groups: dict[str, list[Snapshot]] = defaultdict(list)
    for snapshot in chosen:
        name = snapshot.plan if group_by == "plan" else (snapshot.mode or "-")
        groups[name].append(snapshot)
    rows = _source_rows(chosen, source)
    return SnapshotSummary(
        builds=len(chosen),
        since=min((s.created_at for s in chosen), default=None),
        until=max((s.created_at for s in chosen), default=None),
        lengths=tuple(_length_row(name, group) for name, group in sorted(groups.items())),
        sources=tuple(sorted(rows, key=lambda r: (-r.unused, r.source))),
        most_cut=tuple(sorted((r for r in rows if r.cut_builds),
                              key=lambda r: (-r.cut_builds, -r.dropped, r.source))),
        most_dropped=_item_rows(chosen, source, top),
    )


def _length_row(name: str, group: list[Snapshot]) -> LengthRow:
    built = [s for s in group if s.status == "ok"]
    tokens = [float(s.total_tokens) for s in built]
    shares = [s.window_share for s in built]
    return LengthRow(
        group=name, builds=len(group), p50_tokens=percentile(tokens, 0.5),
        p95_tokens=percentile(tokens, 0.95), max_tokens=int(max(tokens, default=0)),
        p95_window_share=round(percentile(shares, 0.95), 4),
        max_window_share=round(max(shares, default=0.0), 4),
        over_budget=sum(1 for s in built if s.total_tokens > s.available),
        budget_errors=sum(1 for s in group if s.status == "budget_error"),
        truncated_builds=sum(1 for s in group if _was_cut(s)),
    )


def _was_cut(snapshot: Snapshot) -> bool:
    return any(d["action"] == "truncated" or (
        d["action"] == "dropped" and str(d["reason"]).startswith("budget"))
        for d in snapshot.decisions)


def _source_rows(snapshots: list[Snapshot], only: str | None) -> list[SourceRow]:
    sums: dict[str, Counter[str]] = defaultdict(Counter)
    for snapshot in snapshots:
        for row in snapshot.sources:
            name = str(row["source"])
            if only is not None and name != only:
                continue
            total = sums[name]
            granted, used = int(row["budget"]), int(row["tokens"])
            total["builds"] += 1
            total["granted"] += granted
            total["used"] += used
            total["unused"] += max(0, granted - used)
            total["builds_with_unused"] += granted > used
            for field in ("truncated", "compacted", "dropped"):
                total[field] += int(row[field])
            total["cut_builds"] += any(int(row[f]) for f in ("truncated", "compacted", "dropped"))
    return [SourceRow(
        source=name, builds=c["builds"], granted=c["granted"], used=c["used"],
        unused=c["unused"], unused_share=round(c["unused"] / c["granted"], 4) if c["granted"]
        else 0.0, builds_with_unused=c["builds_with_unused"], cut_builds=c["cut_builds"],
        truncated=c["truncated"], compacted=c["compacted"], dropped=c["dropped"],
    ) for name, c in sums.items()]


def _item_rows(snapshots: list[Snapshot], only: str | None, top: int) -> tuple[ItemRow, ...]:
    dropped: Counter[tuple[str, str]] = Counter()
    cut: Counter[tuple[str, str]] = Counter()
    for snapshot in snapshots:
        for d in snapshot.decisions:
            source, key, action = str(d["source"]), str(d["key"]), str(d["action"])
            if only is not None and source != only:
                continue
            if action in _LEFT_OUT:
                dropped[(source, key)] += int(d.get("count", 1))
            elif action in _CUT:
                cut[(source, key)] += 1
    keys = sorted(set(dropped) | set(cut), key=lambda k: (-dropped[k], -cut[k], k))
    return tuple(ItemRow(source=s, key=k, dropped=dropped[(s, k)], cut=cut[(s, k)])
                 for s, k in keys[:top] if dropped[(s, k)])
