"""Pruning one source: fit its units into a grant (``core.select``), the digest's share set aside.

Shared by the build pipeline (``core.builder``) and the stable-prefix steps (``core.stepping``).
"""

from __future__ import annotations

from contextwright.core.cutting import make_cutter
from contextwright.core.digest import pruning_grant
from contextwright.core.gather import Costing, Gathered
from contextwright.core.select import PartialRounds, Selection, select_units
from contextwright.core.source import core_options


def prune_source(g: Gathered, grant: int, query: str, costing: Costing,
                 reserve: bool = True) -> Selection:
    """Fit one source's units into ``grant`` (less its digest's share, with ``reserve``).

    Whether the source is cut as a run and how large one unit may be come from its options,
    else from its traits.
    """
    if not g.spec.cuttable:
        return Selection(kept=list(g.units))
    options = core_options(g.spec.source, g.spec.options)
    grant = pruning_grant(g, grant) if reserve else grant
    contiguous = g.traits.contiguous if options.contiguous is None else options.contiguous
    share = g.traits.max_item_share if options.max_item_share is None else options.max_item_share
    if g.complete and g.need <= grant:
        share = None  # everything fits: nothing to protect older rounds from
    return select_units(
        g.units, grant, contiguous=contiguous,
        partial_rounds=partial_rounds(g),
        cutter=make_cutter(g.spec.strategy, query, costing),
        unit_cap=None if share is None else int(grant * share),
    )


def partial_rounds(g: Gathered) -> PartialRounds:
    """The source's ``partial_rounds`` option (default ``tool_rounds``), checked."""
    return core_options(g.spec.source, g.spec.options).partial_rounds
