"""Shipped plans (YAML files in this package) and a per-request plan chooser (seed 004 §6.3)."""

from __future__ import annotations

from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request

__all__ = ["select_plan"]


def select_plan(request: Request) -> BuildPlan:
    """Pick a shipped plan from the shape of the request.

    Documents → ``rag_qa``; tools or tool activity this turn → ``tool_heavy``; no history and no
    tools → ``simple_qa``; otherwise ``chat``. For analysing one long document, name
    ``doc_analysis`` explicitly.
    """
    if request.documents:
        return BuildPlan.named("rag_qa")
    if request.tools or request.turn:
        return BuildPlan.named("tool_heavy")
    if not request.history:
        return BuildPlan.named("simple_qa")
    return BuildPlan.named("chat")
