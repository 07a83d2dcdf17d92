"""Every shipped plan on every quality suite, next to the suite's recency baseline.

    python bench/plans_vs_recency.py --data ../shared/data [--plans chat rag_qa] [--suites tau]

A plan a user may pick must not do worse than keeping the most recent messages: for each suite,
budget and plan this prints each quality metric as contextwright / baseline and marks a row
``BELOW`` when contextwright is lower on any of them. Exit status 1 when any row is below.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from contextwright.core.plan import SHIPPED_PLANS, BuildPlan
from contextwright.evaluate.runner import load_suite, run_suite

FOLDERS: Mapping[str, str] = {"locomo": "locomo-dev", "tau": "tau-bench-airline-dev",
                              "hotpotqa": "hotpotqa-dev"}
QUALITY: Mapping[str, tuple[str, ...]] = {
    "locomo": ("strict_recall", "lenient_recall", "density"),
    "tau": ("fact_survival", "pair_integrity"),
    "hotpotqa": ("sentence_recall", "pooled_recall"),
}
"""The metrics where higher is better (positions and token counts describe, they do not rank)."""
Row = tuple[str, str, int, str, bool]
TOLERANCE = 0.0005
"""Printed values have three decimals; a difference below this is a tie."""


def rows(data: Path, suites: Sequence[str], plans: Sequence[str]) -> Iterator[Row]:
    """One row per suite, plan and budget: (suite, plan, budget, cells, below the baseline)."""
    for suite_name in suites:
        for plan_name in plans:
            suite = load_suite(suite_name, data / FOLDERS[suite_name],
                               plan=BuildPlan.named(plan_name))
            for row in run_suite(suite).budgets:
                cells, low = [], False
                for metric in QUALITY[suite_name]:
                    ours, base = row.contextwright[metric], row.baseline[metric]
                    cells.append(f"{metric} {_num(ours)} / {_num(base)}")
                    low = low or (ours is not None and base is not None
                                  and ours < base - TOLERANCE)
                yield suite_name, plan_name, row.budget, " | ".join(cells), low


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--plans", nargs="*", default=sorted(SHIPPED_PLANS))
    parser.add_argument("--suites", nargs="*", default=list(FOLDERS))
    args = parser.parse_args()
    below = 0
    for suite_name, plan_name, budget, cells, low in rows(args.data, args.suites, args.plans):
        below += low
        print(f"{suite_name:8} {plan_name:12} {budget:>6} | {cells}" + (" | BELOW" if low else ""),
              flush=True)
    print(f"rows below the baseline: {below}")
    return 1 if below else 0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
