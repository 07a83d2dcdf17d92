"""The plan each mode of a ``ContextManager`` builds with: the configured one, made session-ready.

A mode's plan gets the session's memory (summary, zones) right after the system prompt, the mode's
retrieval parameters, and tool sources when it has none, so an agent loop's tool results are never
lost in any mode. No I/O but reading the plan files modes name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from contextwright.core.plan import (
    SHIPPED_PLANS,
    BuildPlan,
    FrozenOptions,
    SourceSpec,
    load_plan,
    thawed,
)
from contextwright.errors import PlanError
from contextwright.modes.config import ModesConfig, ModeSettings


def mode_plans(config: ModesConfig,
               plans: Mapping[str, BuildPlan | str] | None) -> dict[str, BuildPlan]:
    """The plan each mode of ``config`` builds with: an override from ``plans``, else its own.

    A plan that cannot be loaded is a ``PlanError`` naming where it was given (the modes
    config and the mode, or ``plans``). Only the plan a mode uses is loaded: one that ``plans``
    overrides may be a placeholder.
    """
    overrides = plans or {}
    return {name: _given_plan(name, overrides[name]) if name in overrides
            else _configured_plan(config, name) for name in config.modes}


def _given_plan(name: str, plan: BuildPlan | str) -> BuildPlan:
    try:
        return resolve_plan(plan)
    except PlanError as exc:
        raise PlanError(f"plans[{name!r}]: {exc}") from None


def _configured_plan(config: ModesConfig, name: str) -> BuildPlan:
    written = config.settings(name).plan
    try:
        if config.source is None or written in SHIPPED_PLANS:
            return resolve_plan(written)
        return _plan_next_to(written, config.source.parent)
    except PlanError as exc:
        raise PlanError(f"{config.origin}: modes.{name}.plan: {exc}") from None


PLAN_FILE_SUFFIXES = (".yaml", ".yml", ".toml", ".json")
"""The suffixes of the files ``BuildPlan.load`` reads a plan from."""


def _plan_next_to(written: str, folder: Path) -> BuildPlan:
    """The plan file ``written`` in a config file in ``folder``: a relative path starts there.

    As paths in config files usually do: the modes file and its plans travel together, and
    the process may run from any directory. A file that cannot be read is named as written
    and where it was looked for; a name that is no plan file's is named as written only.
    """
    path = Path(written)
    if path.is_absolute():
        return BuildPlan.load(written)
    found = folder / path
    shown = (f"{written} (looked for at {found}, next to the modes file)"
             if path.suffix.lower() in PLAN_FILE_SUFFIXES else written)
    return load_plan(found, shown=shown)


def resolve_plan(plan: BuildPlan | str) -> BuildPlan:
    """A plan given by name (a shipped one, or a file) loaded; a ``BuildPlan`` as it is."""
    if isinstance(plan, BuildPlan):
        return plan
    return BuildPlan.named(plan) if plan in SHIPPED_PLANS else BuildPlan.load(plan)


def plan_with_session(plan: BuildPlan, settings: ModeSettings,
                      budget: Mapping[str, Any] | None) -> BuildPlan:
    """``plan`` as a mode of the manager builds with it (``budget`` overrides its budget)."""
    # The session's memory sits right after the system prompt; retrieval sources get the
    # mode's retrieval parameters.
    if budget:
        plan = plan.with_budget(**budget)
    specs: list[SourceSpec] = []
    for spec in plan.sources:
        if spec.source in ("rag", "retrieval"):
            spec = replace(spec, options=FrozenOptions(
                {**settings.retrieval_options(), **thawed(spec.options)}))
        if spec.source == "history" and (settings.enable_summary or settings.recall is not None
                                         ) and spec.options.get("recall_share"):
            # With a running summary the request holds only the rounds after it, which fit
            # the budget anyway: recall works session-wide instead (``session_recall``), as it
            # does whenever the mode sets ``recall`` itself.
            spec = replace(spec, options=FrozenOptions(
                {**thawed(spec.options), "recall_share": 0}))
        specs.append(spec)
    if plan.spec("session") is None:
        specs.insert(_after(specs, "system"),
                     SourceSpec(source="session", weight=0.2 if settings.zones else 0.12))
    # An agent loop may call tools in any mode: a plan without them would silently lose this
    # turn's results. Unused, their share flows back to the other sources.
    if plan.spec("tools") is None:
        specs.insert(_after(specs, "session"), SourceSpec(source="tools", weight=0.1))
    if plan.spec("tool_results") is None:
        specs.insert(_after(specs, "user"), SourceSpec(source="tool_results", weight=0.1))
    return replace(plan, sources=tuple(specs))


def _after(specs: list[SourceSpec], source: str) -> int:
    return next((i + 1 for i, spec in enumerate(specs) if spec.source == source), len(specs))
