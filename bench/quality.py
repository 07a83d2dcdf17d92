"""Quality benchmarks of issue 4 on ``../shared/data``: LoCoMo, τ-bench, HotpotQA.

Runs the three suites of ``contextwright.evaluate`` with their default plans (``chat``,
``tool_heavy`` with tool-result compression, ``rag_qa``) and budgets, each next to its baseline
recomputed with the same tokenizer, and prints Markdown tables for the README with the issue's
targets beside the numbers. HotpotQA runs twice: documents as given (``DocumentSource``), then
searched and reranked (``RetrievalSource``, ``contextwright eval hotpotqa --retrieval``).
``contextwright eval <suite>`` runs one suite with a chosen plan; the suites' module docstrings
define every metric.

Run from the repo root::

    .venv/bin/python bench/quality.py --data ../shared/data [--quick] [--tokenizer o200k_base]

``--quick`` keeps 40 cases of each set, spread evenly (a smoke run, not the reported
numbers). The exit status is 1 when a contextwright build failed or broke a tool pair.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from contextwright.errors import ContextwrightError
from contextwright.evaluate import format_markdown, load_suite, resolve_plan, run_suite

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data"
FOLDERS = {"locomo": "locomo-dev", "tau": "tau-bench-airline-dev", "hotpotqa": "hotpotqa-dev"}
QUICK_CASES = 40


def run_one(name: str, data: Path, tokenizer: str, limit: int | None,
            retrieval: bool = False) -> tuple[str, bool]:
    """(Markdown section, whether contextwright broke something) for one suite."""
    folder = data / FOLDERS[name]
    plan, label = resolve_plan(None, name)
    if retrieval:
        label += " + RetrievalSource"
    started = time.perf_counter()
    suite = load_suite(name, folder, plan=plan, tokenizer=tokenizer, limit=limit,
                       retrieval=retrieval)
    result = run_suite(suite, data=str(folder), plan_label=label, tokenizer=tokenizer)
    seconds = time.perf_counter() - started
    integrity = [row.contextwright.get("pair_integrity") for row in result.budgets]
    broken = result.failures > 0 or any(v is not None and v < 1 for v in integrity)
    section = f"{format_markdown(result)}\n- {len(suite)} cases, {seconds:.1f} s"
    return section, broken


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three suites and print their tables; 1 when contextwright broke something."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder holding locomo-dev, tau-bench-airline-dev, hotpotqa-dev")
    parser.add_argument("--tokenizer", default="o200k_base")
    parser.add_argument("--quick", action="store_true",
                        help=f"only {QUICK_CASES} cases of each set, spread evenly")
    args = parser.parse_args(argv)
    limit = QUICK_CASES if args.quick else None
    sections, broken = [], False
    # HotpotQA twice: documents as given (DocumentSource), then searched (RetrievalSource).
    runs = [(name, False) for name in FOLDERS] + [("hotpotqa", True)]
    for name, retrieval in runs:
        try:
            section, failed = run_one(name, args.data.resolve(), args.tokenizer, limit,
                                      retrieval)
        except ContextwrightError as exc:
            parser.error(f"{name}: {type(exc).__name__}: {exc}")
        sections.append(section)
        broken = broken or failed
    print("\n\n".join(sections))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
