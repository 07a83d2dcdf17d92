"""Quality evaluation: dataset suites, a user's own cases, ablation, a judge.

Each suite loads a folder laid out like the matching folder of ``../shared/data`` (LoCoMo,
τ-bench, HotpotQA), turns every case into a ``Request``, builds it with a plan at each budget,
and measures the *rendered* messages (``ctx.to_messages("openai")``) next to a baseline
recomputed with the same tokenizer. ``load_cases`` / ``run_cases`` measure a user's own cases
file (completeness, density, position, noise), ``find_regressions`` compares a run with a saved
one, ``run_ablation`` reruns a suite or a cases file without each source or plan option, and
``judge_ablation`` also has a model answer from each context and scores the answer.
``contextwright eval`` and ``bench/quality.py`` are thin shells over these. Evaluation reads
files; it writes only what the caller asks for (a dump, a saved result, the judge's replies).
"""

from contextwright.evaluate.ablation import (
    Ablation,
    AblationResult,
    CasesTarget,
    SuiteTarget,
    ablations,
    format_ablation,
    run_ablation,
)
from contextwright.evaluate.beir import BeirPool, Ranker, RankerFactory, evaluate_ranker, load_beir
from contextwright.evaluate.case_results import (
    CaseResult,
    CasesResult,
    find_regressions,
    format_cases,
    read_baseline,
)
from contextwright.evaluate.cases import CaseRun, EvalCase, load_cases, run_cases
from contextwright.evaluate.hotpotqa import HotpotSuite, load_hotpotqa
from contextwright.evaluate.judge import Judge, ReplyCache, judge_ablation, parse_verdict
from contextwright.evaluate.locomo import LocomoSuite, load_locomo
from contextwright.evaluate.records import (
    BudgetSummary,
    CaseOutcome,
    ExpectedAnswer,
    ExpectedCall,
    Ratio,
    SuiteResult,
)
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
    "Ablation",
    "AblationResult",
    "BeirPool",
    "BudgetSummary",
    "CaseOutcome",
    "CaseResult",
    "CaseRun",
    "CasesResult",
    "CasesTarget",
    "EvalCase",
    "ExpectedAnswer",
    "ExpectedCall",
    "HotpotSuite",
    "Judge",
    "LocomoSuite",
    "Ranker",
    "RankerFactory",
    "Ratio",
    "ReplyCache",
    "Suite",
    "SuiteResult",
    "SuiteTarget",
    "TauSuite",
    "ablations",
    "dump_line",
    "evaluate_ranker",
    "find_regressions",
    "format_ablation",
    "format_cases",
    "format_markdown",
    "format_text",
    "judge_ablation",
    "load_beir",
    "load_cases",
    "load_hotpotqa",
    "load_locomo",
    "load_suite",
    "load_tau",
    "parse_verdict",
    "read_baseline",
    "resolve_plan",
    "run_ablation",
    "run_cases",
    "run_suite",
    "table_rows",
]
