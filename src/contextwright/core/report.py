"""The build report: every decision a build made, and the per-source table aggregated from them.

``BuildReport.format_debug()`` prints that table as text, one line per source and the total.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from contextwright.core.cache import CacheReport

Action = Literal[
    "kept", "truncated", "compacted", "dropped", "deduplicated", "conflict", "placeholder",
    "failed", "hoisted",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What happened to one item (or to a run of unread items) and why."""

    source: str
    """Source name."""
    key: str
    """Item key, or ``<namespace>.*`` for a run of items the build never had to read."""
    action: Action
    """kept, truncated, compacted, dropped, deduplicated, conflict, placeholder, failed, hoisted."""
    reason: str
    """Why, in words (``budget``, ``duplicate of user.input``, ``lost to tools.x (priority)``)."""
    tokens_before: int = 0
    """Tokens of the item as the source offered it."""
    tokens_after: int = 0
    """Tokens of what went into the context (0 when dropped)."""
    count: int = 1
    """Number of items this decision covers (more than 1 only for unread runs)."""
    detail: str | None = None
    """The original text of a compacted or truncated item (kept for snapshots)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceReport:
    """One row of the per-source table."""

    source: str
    """Source name."""
    share: int
    """Weighted share of the available budget, after max/min clipping."""
    budget: int
    """Tokens granted after redistribution."""
    tokens: int
    """Tokens used in the final context."""
    chars: int
    """Characters used in the final context."""
    items: int
    """Items kept."""
    truncated: int = 0
    """Items cut to fit."""
    compacted: int = 0
    """Items rewritten in a compact form (tool results)."""
    dropped: int = 0
    """Items left out (budget, duplicate, conflict)."""
    error: str | None = None
    """Set when the source raised and was isolated."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildReport:
    """The whole account of one build."""

    plan: str
    """Plan name."""
    tokenizer: str
    """Tokenizer name."""
    exact_tokens: bool
    """False when counts are estimates."""
    available: int
    """Tokens the context may use."""
    total_tokens: int
    """Tokens the context uses (content, message overhead, tool schemas)."""
    sources: tuple[SourceReport, ...]
    """Per-source rows, in plan order."""
    decisions: tuple[Decision, ...]
    """Every decision, in the order made."""
    warnings: tuple[str, ...] = ()
    """Key conflicts, isolated source failures, placeholders."""
    cache: CacheReport | None = None
    """Builds with a cache policy: how this request's prefix compares with the previous one's."""

    def format_debug(self) -> str:
        """The debug table: one line per source and the total."""
        lines = [
            f"[ContextBuilder] source={row.source} tokens={row.tokens} items={row.items}"
            + (f" budget={row.budget}" if row.budget else "")
            + (f" dropped={row.dropped}" if row.dropped else "")
            + (f" truncated={row.truncated}" if row.truncated else "")
            + (f" compacted={row.compacted}" if row.compacted else "")
            + (f" error={row.error}" if row.error else "")
            for row in self.sources
        ]
        estimate = "" if self.exact_tokens else " (estimated)"
        lines.append(f"[ContextBuilder] total tokens before output {self.total_tokens}{estimate}")
        return "\n".join(lines)

    @property
    def framing_tokens(self) -> int:
        """Tokens of the total that belong to no source's row: ``total_tokens`` less the rows.

        What the build adds around the sources' items: the data note and the section labels
        of the merged system message, a repeated question, the framing of merged and added
        messages, and the reply primer. For a text target, the difference between the text
        prompt and the sources' chat counts, which may be negative. Rows and this sum to the
        total.
        """
        return self.total_tokens - sum(row.tokens for row in self.sources)

    def cuts(self) -> tuple[Decision, ...]:
        """Decisions that removed or changed content."""
        return tuple(d for d in self.decisions if d.action != "kept")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        data = asdict(self)
        data["cache"] = self.cache.to_dict() if self.cache is not None else None
        return data
