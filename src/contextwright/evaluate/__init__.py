"""Quality evaluation on real datasets (issue 4, R-EVAL-1): LoCoMo, τ-bench, HotpotQA.

Each suite loads a folder laid out like the matching folder of ``../shared/data``, turns every
case into a ``Request``, builds it with a plan at each budget, and measures the *rendered*
messages (``ctx.to_messages("openai")``) next to a baseline recomputed with the same tokenizer.
``contextwright eval`` and ``bench/quality.py`` are thin shells over ``load_suite`` /
``run_suite``. Evaluation reads files; it never writes outside the dump the caller asks for.
"""

from contextwright.evaluate.beir import BeirPool, Ranker, RankerFactory, evaluate_ranker, load_beir
from contextwright.evaluate.hotpotqa import HotpotSuite, load_hotpotqa
from contextwright.evaluate.locomo import LocomoSuite, load_locomo
from contextwright.evaluate.records import BudgetSummary, CaseOutcome, Ratio, SuiteResult
from contextwright.evaluate.runner import (
    DEFAULT_PLANS,
    SUITES,
    Suite,
    dump_line,
    load_suite,
    resolve_plan,
    run_suite,
)
from contextwright.evaluate.tables import format_markdown, format_text, table_rows
from contextwright.evaluate.tau import TauSuite, load_tau

__all__ = [
    "DEFAULT_PLANS",
    "SUITES",
    "BeirPool",
    "BudgetSummary",
    "CaseOutcome",
    "HotpotSuite",
    "LocomoSuite",
    "Ranker",
    "RankerFactory",
    "Ratio",
    "Suite",
    "SuiteResult",
    "TauSuite",
    "dump_line",
    "evaluate_ranker",
    "format_markdown",
    "format_text",
    "load_beir",
    "load_hotpotqa",
    "load_locomo",
    "load_suite",
    "load_tau",
    "resolve_plan",
    "run_suite",
    "table_rows",
]
