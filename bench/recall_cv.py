"""LoCoMo evidence recall of the lexical recaller's expansion, with a cross-validated estimate.

    python bench/recall_cv.py --data ../shared/data/locomo-dev

Each setting of a small grid (neighbours, neighbour weight, feedback words) is run on every
conversation. The cross-validated estimate picks, for each conversation, the setting best on
the *other* conversations (mean strict recall over the budgets) and scores it on the held-out
one; pooled over the three, weighted by questions, it estimates recall on conversations the
setting was not chosen on. The shipped default is printed next to it.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from contextwright import BuildPlan, ContextBuilder
from contextwright.evaluate.locomo import LocomoSet, LocomoSuite, load_locomo
from contextwright.evaluate.runner import run_suite
from contextwright.sources.conversation import HistorySource
from contextwright.sources.recall import LexicalTurnRecaller, RecallExpansion

BUDGETS = (2000, 4000, 8000)
Setting = tuple[int, float, int]
"""(neighbours, neighbour_weight, feedback_terms)."""
GRID: tuple[Setting, ...] = tuple(itertools.product((0, 1, 2), (0.5, 0.7, 0.9), (0, 8)))


def recall(data: LocomoSet, setting: Setting | None) -> tuple[list[float], int]:
    """Strict recall per budget on ``data`` and its question count (no expansion for None)."""
    expansion = None if setting is None else RecallExpansion(
        neighbours=setting[0], neighbour_weight=setting[1], feedback_terms=setting[2])
    builder = ContextBuilder(sources=[HistorySource(LexicalTurnRecaller(expansion=expansion))])
    suite = LocomoSuite(data=data, builder=builder, plan=BuildPlan.named("chat"))
    rows = run_suite(suite, BUDGETS).budgets
    return [float(row.contextwright["strict_recall"] or 0.0) for row in rows], len(data.cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    full = load_locomo(args.data)
    parts = {sid: LocomoSet(conversations={sid: conv},
                            cases=tuple(c for c in full.cases if c.sample_id == sid))
             for sid, conv in sorted(full.conversations.items())}
    default = RecallExpansion()
    shipped: Setting = (default.neighbours, default.neighbour_weight, default.feedback_terms)
    table = {(sid, s): recall(part, s) for sid, part in parts.items()
             for s in (None, *GRID)}
    estimate, total = [0.0] * len(BUDGETS), 0
    for held in parts:
        def others(setting: Setting, held: str = held) -> float:
            return sum(sum(table[sid, setting][0]) * table[sid, setting][1]
                       for sid in parts if sid != held)
        chosen = max(GRID, key=others)
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
