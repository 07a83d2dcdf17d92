"""Shipped plans (YAML files in this package) and a per-request plan chooser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextwright.core.covering import covering
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request

__all__ = ["select_plan"]

HISTORY_SCAN = 200
"""Newest history messages ``select_plan`` reads for tool activity (a long history costs no
more to classify than a short one)."""

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
