"""Shipped plans (YAML files in this package) and a per-request plan chooser (seed 004 §6.3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from contextwright.core.builder import PARTS_AND_SOURCES
from contextwright.core.plan import NEVER_CUT_BY_DEFAULT, BuildPlan, SourceSpec
from contextwright.core.request import Request

__all__ = ["select_plan"]

HISTORY_SCAN = 200
"""Newest history messages ``select_plan`` reads for tool activity (a long history costs no
more to classify than a short one)."""

# Where a request part lands when the chosen plan has no source for it: (source, weight,
# max_tokens, the sources it goes before — the first one the plan has; at the end otherwise).
_ADDED: Mapping[str, tuple[float, int | None, tuple[str, ...]]] = {
    "system": (0.15, None, ("env", "tools", "history", "user")),
    "env": (0.02, 200, ("tools", "examples", "notes", "history", "user")),
    "tools": (0.15, None, ("examples", "notes", "history", "user")),
    "examples": (0.05, 400, ("notes", "history", "user")),
    "notes": (0.05, 400, ("history", "user")),
    "history": (0.20, None, ("rag", "user")),
    "rag": (0.25, None, ("user",)),
    "tool_results": (0.10, None, ()),
}


def select_plan(request: Request) -> BuildPlan:
    """Pick a shipped plan from the shape of the whole request; never leave a given part out.

    Tools, tool activity this turn, or tool calls and results in the newest history →
    ``tool_heavy``; else documents → ``rag_qa``; no history and no tools → ``simple_qa``;
    otherwise ``chat``. A part of the request the chosen plan has no source for (documents in an
    agent loop, examples, notes...) gets a source added with a modest weight, and the plan's
    name says so (``tool_heavy+rag``). For analysing one long document, name ``doc_analysis``
    explicitly.
    """
    if request.tools or request.turn or has_tool_activity(request.history):
        base = BuildPlan.named("tool_heavy")
    elif request.documents:
        base = BuildPlan.named("rag_qa")
    elif not request.history:
        base = BuildPlan.named("simple_qa")
    else:
        base = BuildPlan.named("chat")
    return covering(base, request)


def has_tool_activity(history: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the newest ``HISTORY_SCAN`` messages hold tool calls or tool results."""
    for message in history[-HISTORY_SCAN:]:
        if not isinstance(message, Mapping):
            continue  # the build names a malformed message; choosing a plan is not the place
        if message.get("role") == "tool" or message.get("tool_calls"):
            return True
    return False


def covering(plan: BuildPlan, request: Request) -> BuildPlan:
    """``plan`` with a source added for every given part of ``request`` it has none for."""
    missing = [source for part, source in PARTS_AND_SOURCES
               if getattr(request, part) and plan.spec(source) is None]
    if not missing:
        return plan
    sources = list(plan.sources)
    for source in missing:
        sources.insert(_position(sources, _ADDED[source][2]), _added_spec(source))
    return replace(plan, name=f"{plan.name}+{'+'.join(missing)}", sources=tuple(sources))


def _position(sources: list[SourceSpec], before: tuple[str, ...]) -> int:
    names = [spec.source for spec in sources]
    for name in before:
        if name in names:
            return names.index(name)
    return len(sources)


def _added_spec(source: str) -> SourceSpec:
    weight, max_tokens, _ = _ADDED[source]
    never_cut = source in NEVER_CUT_BY_DEFAULT
    return SourceSpec(source=source, weight=weight, max_tokens=max_tokens,
                      cuttable=not never_cut, required=never_cut)
