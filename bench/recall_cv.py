"""LoCoMo evidence recall of the recallers' settings, with a cross-validated estimate.

    python bench/recall_cv.py --data ../shared/data/locomo-dev [--recaller fused|hybrid]
        [--cache F]

Each setting of a small grid (neighbours, neighbour weight, feedback words) is run on every
conversation. The cross-validated estimate picks, for each conversation, the setting best on
the *other* conversations (mean strict recall over the budgets) and scores it on the held-out
one; pooled over the three, weighted by questions, it estimates recall on conversations the
setting was not chosen on. The shipped default is printed next to it. With ``--recaller
hybrid`` (needs the embeddings extra; e5 vectors kept in ``--cache``) the grid is the fusion's
lexical weight (alpha 0.2 / 0.3 / 0.5) by neighbours (0 or 2, weight 0.7); its "no expansion"
row is alpha 0.3 without neighbours. With ``--recaller fused`` the grid is the rank constant k
of ``FusedTurnRecaller`` (3 to 60); its "no expansion" row is k 10 over a lexical side without
expansion.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

from contextwright import BuildPlan, ContextBuilder
from contextwright.evaluate.locomo import LocomoSet, LocomoSuite, load_locomo
from contextwright.evaluate.runner import make_embedder, run_suite
from contextwright.recall import TurnRecaller
from contextwright.sources.conversation import HistorySource
from contextwright.sources.recall import LexicalTurnRecaller, RecallExpansion

BUDGETS = (2000, 4000, 8000)
Setting = tuple[int, float, int]
"""(neighbours, neighbour_weight, feedback_terms)."""
GRID: tuple[Setting, ...] = tuple(itertools.product((0, 1, 2), (0.5, 0.7, 0.9), (0, 8)))


HybridSetting = tuple[float, int]
"""(alpha, neighbours)."""
HYBRID_GRID: tuple[HybridSetting, ...] = tuple(itertools.product((0.2, 0.3, 0.5), (0, 2)))


def lexical_recaller(setting: Setting | None) -> TurnRecaller:
    """The lexical recaller with ``setting``'s expansion (none for None)."""
    expansion = None if setting is None else RecallExpansion(
        neighbours=setting[0], neighbour_weight=setting[1], feedback_terms=setting[2])
    return LexicalTurnRecaller(expansion=expansion)


def hybrid_recaller(embedder: Any, setting: HybridSetting | None) -> TurnRecaller:
    """The hybrid recaller at ``setting``'s alpha and neighbours (alpha 0.3, none for None)."""
    from contextwright.retrieval import HybridTurnRecaller

    alpha, neighbours = setting if setting is not None else (0.3, 0)
    expansion = RecallExpansion(neighbours=neighbours) if neighbours else None
    return HybridTurnRecaller(embedder, alpha=alpha, expansion=expansion)


FUSED_GRID: tuple[float, ...] = (3.0, 5.0, 10.0, 20.0, 40.0, 60.0)
"""Rank constants of the fused recaller."""


def fused_recaller(embedder: Any, k: float | None) -> TurnRecaller:
    """The fused recaller at rank constant ``k`` (None: k 10, lexical side without expansion)."""
    from contextwright.retrieval import FusedTurnRecaller

    if k is None:
        return FusedTurnRecaller(embedder, lexical=LexicalTurnRecaller())
    return FusedTurnRecaller(embedder, k=k)


def recall(data: LocomoSet, recaller: TurnRecaller) -> tuple[list[float], int]:
    """Strict recall per budget on ``data`` and its question count."""
    builder = ContextBuilder(sources=[HistorySource(recaller)])
    suite = LocomoSuite(data=data, builder=builder, plan=BuildPlan.named("chat"))
    rows = run_suite(suite, BUDGETS).budgets
    return [float(row.contextwright["strict_recall"] or 0.0) for row in rows], len(data.cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--recaller", choices=("lexical", "fused", "hybrid"), default="lexical")
    parser.add_argument("--cache", type=Path, default=None, help="e5 vector cache")
    args = parser.parse_args()
    full = load_locomo(args.data)
    parts = {sid: LocomoSet(conversations={sid: conv},
                            cases=tuple(c for c in full.cases if c.sample_id == sid))
             for sid, conv in sorted(full.conversations.items())}
    grid: tuple[Any, ...]
    if args.recaller == "hybrid":
        embedder = make_embedder(args.cache)
        grid, shipped = HYBRID_GRID, (0.3, RecallExpansion().neighbours)

        def make(setting: Any) -> TurnRecaller:
            return hybrid_recaller(embedder, setting)
    elif args.recaller == "fused":
        from contextwright.recall.hybrid import FUSION_K

        fused_embedder = make_embedder(args.cache)
        grid, shipped = FUSED_GRID, FUSION_K

        def make(setting: Any) -> TurnRecaller:
            return fused_recaller(fused_embedder, setting)
    else:
        default = RecallExpansion()
        grid = GRID
        shipped = (default.neighbours, default.neighbour_weight, default.feedback_terms)
        make = lexical_recaller
    table = {(sid, s): recall(part, make(s)) for sid, part in parts.items()
             for s in (None, *grid)}
    estimate, total = [0.0] * len(BUDGETS), 0
    for held in parts:
        def others(setting: Any, held: str = held) -> float:
            return sum(sum(table[sid, setting][0]) * table[sid, setting][1]
                       for sid in parts if sid != held)
        chosen = max(grid, key=others)
        scores, questions = table[held, chosen]
        print(f"held out {held}: chose {chosen}, strict {[round(x, 3) for x in scores]}")
        estimate = [e + x * questions for e, x in zip(estimate, scores, strict=True)]
        total += questions
    for label, setting in (("no expansion", None), ("shipped default", shipped)):
        pooled = [sum(table[sid, setting][0][i] * table[sid, setting][1] for sid in parts)
                  / total for i in range(len(BUDGETS))]
        print(f"{label:16} {[round(x, 3) for x in pooled]}")
    print(f"{'cross-validated':16} {[round(x / total, 3) for x in estimate]}")


if __name__ == "__main__":
    main()
