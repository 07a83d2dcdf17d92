"""Sources for the request parts a plan has none for, so a build shows what the request gave.

A shipped plan is tuned for one kind of call, but requests mix: a chat whose history holds tool
calls, a document question asked in the middle of a conversation, this turn's tool results sent
with the ``chat`` plan. Leaving such a part out makes the model repeat the call it just made or
lose the conversation. ``covering`` adds a source with a modest weight (on the plan's scale:
``added_weight``) for each given part the plan lacks, at the place the part belongs in render
order, and names the result (``chat+tool_results``). Plans opt in with ``add_missing_sources``
(every shipped plan does); a plan without it leaves such parts out, with a warning in the
report. Pure: reads the plan and which request fields are non-empty, nothing else.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import replace

from contextwright.core.caches import register_cache
from contextwright.core.plan import BuildPlan, FrozenOptions, SourceSpec
from contextwright.core.request import Request
from contextwright.core.source import AddedSource, SourceTraits, registered_sources, traits_of

Part = tuple[str, str, SourceTraits]
"""A request field, the source that renders it, and that source's traits."""

_Key = tuple[int, tuple[tuple[str, int], ...]]
_COVERED: dict[_Key, tuple[BuildPlan, tuple[SourceTraits, ...], BuildPlan]] = {}
_MAX_COVERED = 512
"""Covered plans remembered (a plan object and the sources missing → the plan with them), so
builds of one plan share one covered plan object and its per-plan caches.

Keyed by object ids, so an entry keeps the plan and the missing sources' traits it was made
from, and is used only for those very objects: a builder's source may make its traits per
instance, and the traits of a source freed with its builder would otherwise leave their id to
another builder's, whose build would then add its source with the first one's options."""


def request_parts(sources: Mapping[str, object] | None = None) -> list[Part]:
    """Each request field a source renders (``SourceTraits.request_part``), in adding order.

    ``sources``: the builder's sources by namespace (default: the registered source classes).
    """
    known = registered_sources() if sources is None else sources
    parts = []
    for name, source in known.items():
        traits = traits_of(source)
        if traits.request_part is not None:
            rank = traits.added.rank if traits.added else len(known)
            parts.append((rank, name, traits.request_part, traits))
    return [(part, name, traits) for _, name, part, traits in sorted(
        parts, key=lambda entry: (entry[0], entry[1]))]


def missing_sources(plan: BuildPlan, request: Request,
                    sources: Mapping[str, object] | None = None) -> tuple[str, ...]:
    """The sources for the non-empty parts of ``request`` that ``plan`` does not have.

    Only those a build can add (their traits say how).
    """
    names = {spec.source for spec in plan.sources}
    return tuple(source for part, source, traits in request_parts(sources)
                 if traits.added is not None and getattr(request, part) and source not in names)


def covering(plan: BuildPlan, request: Request,
             sources: Mapping[str, object] | None = None) -> BuildPlan:
    """``plan`` with a source added for every given part of ``request`` it has none for."""
    parts = {name: traits for _, name, traits in request_parts(sources)}
    missing = missing_sources(plan, request, sources)
    if not missing:
        return plan
    traits = tuple(parts[name] for name in missing)
    key = (id(plan), tuple((name, id(parts[name])) for name in missing))
    known = _COVERED.get(key)
    if known is not None and _same_objects(known, plan, traits):
        return known[2]
    covered = _with_sources(plan, [(name, added, parts[name].never_cut) for name in missing
                                   if (added := parts[name].added) is not None])
    if len(_COVERED) >= _MAX_COVERED:
        _COVERED.clear()
    _COVERED[key] = (plan, traits, covered)
    return covered


def _same_objects(known: tuple[BuildPlan, tuple[SourceTraits, ...], BuildPlan], plan: BuildPlan,
                  traits: tuple[SourceTraits, ...]) -> bool:
    """Whether a remembered covered plan was made from ``plan`` and these very traits."""
    return known[0] is plan and len(known[1]) == len(traits) and all(
        map(operator.is_, known[1], traits))


def clear_covered() -> None:
    """Forget the remembered covered plans (``clear_caches``)."""
    _COVERED.clear()


def added_weight(plan: BuildPlan, added: AddedSource) -> float:
    """The weight a source is added to ``plan`` with: ``added.weight`` on the plan's scale.

    A source's share is its weight over the sum of the plan's weights, so ``0.2 / 0.5 / 0.3``
    and ``20 / 50 / 30`` are one plan. An added weight is given for plans whose weights sum to
    1 (every shipped plan's), and scaled to the plan's sum, so it takes the same share of
    either.
    """
    return added.weight * math.fsum(spec.weight for spec in plan.sources)


def _with_sources(plan: BuildPlan, missing: list[tuple[str, AddedSource, bool]]) -> BuildPlan:
    """``plan`` with each (source, how it is added, whether it is never cut) inserted."""
    sources = list(plan.sources)
    for name, added, never_cut in missing:
        sources.insert(_position(sources, added.before),
                       _added_spec(name, added, never_cut, added_weight(plan, added)))
    return replace(plan, name=f"{plan.name}+{'+'.join(name for name, _, _ in missing)}",
                   sources=tuple(sources))


def _position(sources: list[SourceSpec], before: tuple[str, ...]) -> int:
    names = [spec.source for spec in sources]
    for name in before:
        if name in names:
            return names.index(name)
    return len(sources)


def _added_spec(source: str, added: AddedSource, never_cut: bool, weight: float) -> SourceSpec:
    return SourceSpec(source=source, weight=weight, max_tokens=added.max_tokens,
                      cuttable=not never_cut, required=never_cut,
                      options=FrozenOptions(added.options))


register_cache("core.covering.covered", _COVERED)
