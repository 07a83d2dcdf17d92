"""Benchmark: tool-pair integrity and fact survival on τ-bench airline trajectories.

Runs the τ-bench suite of ``contextwright.evaluate.tau`` (whose docstring defines the case, the
budget rule and every metric) on all 60 trajectories and on the 39 that have a ``cut_index``,
with the shipped ``tool_heavy`` plan or a variant of it, one variable at a time:

* ``--no-compression``: without the tool-result tiers and the digest of omitted turns;
* ``--options '{"digest_share": 0.2}'``: options added to history and this turn's results.

``contextwright eval tau`` runs the same suite with any plan file. Run from the repo root::

    .venv/bin/python bench/tau_pairs.py [--data DIR] [--tokenizer o200k_base] [--json] \\
        [--no-compression] [--options JSON]

The exit status is 1 when any contextwright build fails or breaks a tool pair.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from contextwright import BuildPlan, ContextBuilder
from contextwright.errors import ContextwrightError
from contextwright.evaluate import format_markdown, run_suite
from contextwright.evaluate.records import SuiteResult
from contextwright.evaluate.tau import (
    TauSuite,
    load_tau,
    with_history_options,
    without_compression,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "tau-bench-airline-dev"


def plan_variant(compression: bool, options: Mapping[str, Any] | None) -> tuple[BuildPlan, str]:
    """The shipped ``tool_heavy`` with the asked-for change, and its label."""
    plan, label = BuildPlan.named("tool_heavy"), "tool_heavy"
    if not compression:
        plan, label = without_compression(plan), f"{label} without compression"
    if options:
        plan, label = with_history_options(plan, options), f"{label} + {json.dumps(options)}"
    return plan, label


def run(data: Path, tokenizer: str, compression: bool = True,
        options: Mapping[str, Any] | None = None) -> dict[str, SuiteResult]:
    """The suite on every trajectory (``all``) and on those with a ``cut_index``."""
    tau = load_tau(data)
    plan, label = plan_variant(compression, options)
    builder = ContextBuilder(tokenizer=tokenizer)
    subsets = {"all": tau, "with_cut": replace(tau, cases=tuple(
        case for case in tau.cases if case.has_cut))}
    return {name: run_suite(TauSuite(data=subset, builder=builder, plan=plan), data=str(data),
                            plan_label=f"{label} ({len(subset.cases)} trajectories)",
                            tokenizer=builder.tokenizer.name)
            for name, subset in subsets.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print; 1 when contextwright broke a pair or failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder of the tau-bench airline dev set")
    parser.add_argument("--tokenizer", default="o200k_base",
                        help="tokenizer for the library and the baseline (default o200k_base)")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.add_argument("--no-compression", action="store_true",
                        help="run the shipped plan without its tiers and digest of omitted turns")
    parser.add_argument("--options", type=json.loads, default=None,
                        help='JSON object added to history and turn options, e.g. '
                             '\'{"digest_share": 0.2}\'')
    args = parser.parse_args(argv)
    try:
        results = run(args.data.resolve(), args.tokenizer, not args.no_compression, args.options)
    except ContextwrightError as exc:
        parser.error(str(exc))
    if args.json:
        print(json.dumps({name: r.to_dict() for name, r in results.items()}, indent=2))
    else:
        print("\n\n".join(format_markdown(r) for r in results.values()))
    broken = any(row.failures or (row.contextwright.get("pair_integrity") or 0) < 1.0
                 for r in results.values() for row in r.budgets)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
