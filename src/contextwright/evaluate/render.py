"""One contextwright build, rendered the way a model would receive it.

Metrics read only ``ctx.to_messages("openai")``, which also runs the library's validator (role
order, tool pairs, budget). A build or validation failure is returned as a reason, never hidden:
the runner counts it as a failure and its metrics as zero.
"""

from __future__ import annotations

from typing import Any

from contextwright.builder import ContextBuilder
from contextwright.core.final import FinalContext
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.errors import ContextwrightError

Rendered = tuple[list[dict[str, Any]], str | None]


def build_messages(builder: ContextBuilder, plan: BuildPlan, request: Request) -> Rendered:
    """(rendered OpenAI messages, ``None``) or (``[]``, why the build or its rendering failed)."""
    try:
        return render(builder.build(plan, request))
    except ContextwrightError as exc:
        return [], failure("build", exc)


def render(ctx: FinalContext) -> Rendered:
    """The validated OpenAI messages of a built context, or the validator's reason."""
    try:
        return ctx.to_messages("openai"), None
    except ContextwrightError as exc:
        return [], failure("rendering", exc)


def failure(stage: str, exc: ContextwrightError) -> str:
    """A one-line reason; library messages never echo payloads, so neither does this."""
    return f"{stage} failed: {type(exc).__name__}: {exc}"
