"""Sources for the request parts a plan has none for, so a build shows what the request gave.

A shipped plan is tuned for one kind of call, but requests mix: a chat whose history holds tool
calls, a document question asked in the middle of a conversation, this turn's tool results sent
with the ``chat`` plan. Leaving such a part out makes the model repeat the call it just made or
lose the conversation. ``covering`` adds a source with a modest weight for each given part the
plan lacks, at the place the part belongs in render order, and names the result
(``chat+tool_results``). Plans opt in with ``add_missing_sources`` (every shipped plan does); a
plan without it leaves such parts out, with a warning in the report. Pure: reads the plan and
which request fields are non-empty, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from contextwright.core.caches import register_cache
from contextwright.core.plan import NEVER_CUT_BY_DEFAULT, BuildPlan, FrozenOptions, SourceSpec
from contextwright.core.request import Request

PARTS_AND_SOURCES = (("history", "history"), ("turn", "tool_results"), ("tools", "tools"),
                     ("documents", "rag"), ("env", "env"), ("examples", "examples"),
                     ("notes", "notes"), ("system", "system"))
"""Each request field and the built-in source that renders it."""

# Where an added source lands: (weight, max_tokens, the sources it goes before — the first one
# the plan has; at the end otherwise). History goes before the user's input in every plan
# (some plans put documents after the question).
ADDED_SOURCES: Mapping[str, tuple[float, int | None, tuple[str, ...]]] = {
    "system": (0.15, None, ("env", "tools", "history", "user")),
    "env": (0.02, 200, ("tools", "examples", "notes", "history", "user")),
    "tools": (0.15, None, ("examples", "notes", "history", "user")),
    "examples": (0.05, 400, ("notes", "history", "user")),
    "notes": (0.05, 400, ("history", "user")),
    "history": (0.20, None, ("user",)),
    "rag": (0.25, None, ("user",)),
    "tool_results": (0.10, None, ()),
}

TOOL_TIERS: Mapping[str, int] = {"tool_full": 2, "tool_reduced": 3}
"""Older tool results reduced, as every shipped plan does: the newest two call blocks whole."""
ADDED_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    # An added history is a conversation's: the newest rounds, then older turns that the
    # input recalls (as the chat plan shows them), tool results in tiers.
    "history": {"recall_share": 0.9, "recall_limit": 400, "recent_rounds": 3, **TOOL_TIERS},
    "tool_results": TOOL_TIERS,
}

_COVERED: dict[tuple[int, tuple[str, ...]], tuple[BuildPlan, BuildPlan]] = {}
_MAX_COVERED = 512
"""Covered plans remembered (a plan object and the parts missing → the plan with them), so
builds of one plan share one covered plan object and its per-plan caches."""


def missing_sources(plan: BuildPlan, request: Request) -> tuple[str, ...]:
    """The built-in sources for the non-empty parts of ``request`` that ``plan`` does not have."""
    names = {spec.source for spec in plan.sources}
    return tuple(source for part, source in PARTS_AND_SOURCES
                 if getattr(request, part) and source not in names)


def covering(plan: BuildPlan, request: Request) -> BuildPlan:
    """``plan`` with a source added for every given part of ``request`` it has none for."""
    missing = missing_sources(plan, request)
    if not missing:
        return plan
    key = (id(plan), missing)
    known = _COVERED.get(key)
    if known is not None and known[0] is plan:
        return known[1]
    covered = _with_sources(plan, missing)
    if len(_COVERED) >= _MAX_COVERED:
        _COVERED.clear()
    _COVERED[key] = (plan, covered)
    return covered


def clear_covered() -> None:
    """Forget the remembered covered plans (``clear_caches``)."""
    _COVERED.clear()


def _with_sources(plan: BuildPlan, missing: tuple[str, ...]) -> BuildPlan:
    sources = list(plan.sources)
    for source in missing:
        sources.insert(_position(sources, ADDED_SOURCES[source][2]), _added_spec(source))
    return replace(plan, name=f"{plan.name}+{'+'.join(missing)}", sources=tuple(sources))


def _position(sources: list[SourceSpec], before: tuple[str, ...]) -> int:
    names = [spec.source for spec in sources]
    for name in before:
        if name in names:
            return names.index(name)
    return len(sources)


def _added_spec(source: str) -> SourceSpec:
    weight, max_tokens, _ = ADDED_SOURCES[source]
    never_cut = source in NEVER_CUT_BY_DEFAULT
    return SourceSpec(source=source, weight=weight, max_tokens=max_tokens,
                      cuttable=not never_cut, required=never_cut,
                      options=FrozenOptions(ADDED_OPTIONS.get(source, {})))


register_cache("core.covering.covered", _COVERED)
