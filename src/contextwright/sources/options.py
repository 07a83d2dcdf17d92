"""The options models of the built-in sources: every option a plan may give each, typed.

A plan is checked against these when it loads (``core.plan``), so ``history: {recal_share:
0.3}`` is a ``PlanError`` naming the option and the closest valid one instead of being ignored.
The sources still check the values they read when they are called directly (their own rules,
their own messages); these models make sure the plan's names and types are right first.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from contextwright.core.source import SourceOptions
from contextwright.recall.turns import DEFAULT_RECALL_LIMIT

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)
Count = int
"""A whole number (strict: ``2.5`` and ``"2"`` are refused)."""


class EnvOptions(SourceOptions):
    """Options of the environment source."""

    model_config = _STRICT
    clock: bool = False
    """Add the current UTC time when the request gives none (builds are then not replayable)."""


class ToolResultOptions(SourceOptions):
    """Options of this turn's tool results (and, with more, of history)."""

    model_config = _STRICT
    compact_tool_results: bool = True
    """JSON results as compact text."""
    fields: dict[str, list[str]] | None = None
    """``{tool_name: [path, ...]}``: the fields kept of that tool's JSON results."""
    tool_full: Count | None = Field(default=None, ge=0)
    """Tiered retention: the newest this many call blocks keep their results whole (None: off)."""
    tool_reduced: Count = Field(default=3, ge=0)
    """The next this many are reduced to key facts."""
    tool_early: Literal["line", "drop"] = "line"
    """Older results become one line of identifiers, or a placeholder."""
    tool_line_chars: Count = Field(default=240, ge=0)
    """The longest an early one-line result may be."""
    digest_scan: Count = Field(default=400, ge=0)
    """How many omitted messages the digest reads for exact values."""
    tier_anchor: Count | None = Field(default=None, ge=0)
    """The list length tiers are computed as of (set by a build that keeps a stable prefix)."""


class HistoryOptions(ToolResultOptions):
    """Options of the history source (see ``HistorySource``)."""

    model_config = _STRICT
    max_rounds: Count | None = Field(default=None, ge=0)
    """Keep at most this many recent rounds (recalled turns not counted)."""
    recall_share: float | None = Field(default=None, ge=0)
    """About this share of what history offers is older turns relevant to the input (0: off)."""
    recall_limit: Count = Field(default=DEFAULT_RECALL_LIMIT, ge=0)
    """At most this many turns are recalled."""
    recent_rounds: Count | None = Field(default=None, ge=0)
    """The newest this many rounds come before any recalled turn."""


class ToolDefinitionOptions(SourceOptions):
    """Options of the tools source (see ``ToolDefinitionSource``)."""

    model_config = _STRICT
    select: Literal["all", "relevant"] = "all"
    """Offer every tool, or only the relevant, always-included and called ones."""
    always_include: str | list[str] | None = None
    """A tool name or names always offered, first."""
    always: str | list[str] | None = None
    """``always_include`` by another name."""
    max_tools: Count | None = Field(default=None, ge=0)
    """At most this many tools are offered."""
    recent_messages: Count = Field(default=20, ge=0)
    """How far back history is searched for tools already called."""
    compact_descriptions: bool | Literal["auto"] = "auto"
    """Compact descriptions always, never, or over ``description_budget``."""
    description_budget: Count = Field(default=1500, ge=0)
    """Estimated tokens of the offered schemas above which ``auto`` compacts."""
    keep: list[str] | None = None
    """Names offered again and shown first, in this order (set by a build that keeps a stable
    prefix)."""
    keep_compacted: list[str] | None = None
    """Which of ``keep`` are shown with compacted descriptions (set with ``keep``)."""


class DocumentOptions(SourceOptions):
    """Options of the documents source, ``rag``: retrieval settings.

    ``RetrievalSource`` reads the retrieval settings; the built-in ``DocumentSource`` reads only
    ``rank`` (which documents are kept when not all fit: the most relevant to the input, or the
    first as given) and accepts the rest, so one plan serves with either.
    """

    model_config = _STRICT
    top_k: Count = Field(default=8, ge=0)
    rerank_top_k: Count = Field(default=3, ge=0)
    chunk_size: Count = Field(default=200, ge=8)
    max_passage_tokens: Count = Field(default=400, ge=1)
    fill_limit: Count = Field(default=64, ge=0)
    similarity_threshold: float = Field(default=0.35, ge=0, le=1)
    fill_threshold: float = Field(default=0.1, ge=0, le=1)
    alpha: float | None = Field(default=None, ge=0, le=1)
    dense: bool = True
    keep_outdated: bool = False
    fill_budget: bool = False
    rank: Literal["relevance", "given"] = "relevance"
