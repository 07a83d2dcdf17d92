"""Pruning one source: fit its units into a grant (``core.select``), the digest's share set aside.

Shared by the build pipeline (``core.builder``) and the stable-prefix steps (``core.stepping``).
"""

from __future__ import annotations

from contextwright.core.cutting import make_cutter
from contextwright.core.digest import pruning_grant
from contextwright.core.gather import Costing, Gathered
from contextwright.core.select import CONTIGUOUS_SOURCES, PartialRounds, Selection, select_units
from contextwright.errors import PlanError


def prune_source(g: Gathered, grant: int, query: str, costing: Costing,
                 reserve: bool = True) -> Selection:
    """Fit one source's units into ``grant`` (less its digest's share, with ``reserve``)."""
    if not g.spec.cuttable:
        return Selection(kept=list(g.units))
    options = g.spec.options
    grant = pruning_grant(g, grant) if reserve else grant
    contiguous = options.get("contiguous", g.spec.source in CONTIGUOUS_SOURCES)
    share = options.get("max_item_share", 0.5 if g.spec.source == "history" else None)
    if g.complete and g.need <= grant:
        share = None  # everything fits: nothing to protect older rounds from
    return select_units(
        g.units, grant, contiguous=bool(contiguous),
        partial_rounds=partial_rounds(g),
        cutter=make_cutter(g.spec.strategy, query, costing),
        unit_cap=None if share is None else int(grant * float(share)),
    )


def partial_rounds(g: Gathered) -> PartialRounds:
    """The source's ``partial_rounds`` option (default ``tool_rounds``), checked."""
    value = g.spec.options.get("partial_rounds", "tool_rounds")
    if value is True or value is False or value == "tool_rounds":
        return value  # type: ignore[no-any-return]
    raise PlanError(f"{g.spec.source}: partial_rounds must be true, false or 'tool_rounds'")
