"""``contextwright eval locomo|tau|hotpotqa``: run a quality suite and print the comparison.

A thin shell over ``contextwright.evaluate``: it loads the folder, runs every case at every
budget with a progress bar on stderr, prints a table (or ``--json``) on stdout, and may write
one JSON line per case and budget (``--dump``). Exit codes: 2 when the folder, plan or options
are bad (one-line message on stderr), 1 when a contextwright build failed or broke a tool pair
(the table is still printed), else 0.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from contextwright.cli_common import describe, fail
from contextwright.cli_eval_toolcalls import toolcalls
from contextwright.errors import ContextwrightError, PlanError
from contextwright.evaluate import (
    CaseOutcome,
    SuiteResult,
    dump_line,
    format_text,
    load_suite,
    resolve_plan,
    run_suite,
)
from contextwright.evaluate.runner import RECALLERS, make_embedder, run_label

eval_app = typer.Typer(add_completion=False, no_args_is_help=True,
                       help="Measure context quality on a dataset folder, next to a baseline.")
eval_app.command("toolcalls")(toolcalls)

DataOption = Annotated[Path, typer.Option("--data", help="Folder laid out like the matching "
                                          "folder of ../shared/data.")]
PlanOption = Annotated[str | None, typer.Option(help="Shipped plan name or plan file "
                                                "(default: the suite's plan).")]
BudgetOption = Annotated[int | None, typer.Option(min=1, help="Run this budget only.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the results as JSON.")]
DumpOption = Annotated[Path | None, typer.Option(help="Write one JSON line per case and budget: "
                                                 '{"case", "budget", "messages"}.')]
LimitOption = Annotated[int | None, typer.Option(min=1, help="Only N cases, spread evenly "
                                                 "over the set.")]
RetrievalOption = Annotated[bool, typer.Option(
    "--retrieval/--documents", help="Documents through RetrievalSource (search, rerank, fill "
    "the budget; the default) or the built-in DocumentSource (taken in the given order).")]
DenseOption = Annotated[bool, typer.Option(
    "--dense", help="Hybrid search (BM25 + e5; needs the embeddings extra).")]
RecallerOption = Annotated[str, typer.Option(
    help="History recall: lexical (the history source's own) or hybrid (BM25 + e5; needs the "
    "embeddings extra).")]
CacheOption = Annotated[Path | None, typer.Option(
    help="SQLite file that keeps e5 vectors between runs (default: one in the temp folder).")]
TokenizerOption = Annotated[str, typer.Option(help="Tokenizer of contextwright and the baseline."
                                              )]


@eval_app.command()
def locomo(data: DataOption, plan: PlanOption = None, budget: BudgetOption = None,
           json_output: JsonOption = False, dump: DumpOption = None, limit: LimitOption = None,
           tokenizer: TokenizerOption = "o200k_base", recaller: RecallerOption = "lexical",
           cache: CacheOption = None) -> None:
    """LoCoMo evidence recall (strict, lenient), density and position at total budgets."""
    _run(_Run(suite="locomo", data=data, plan=plan, budget=budget, json_output=json_output,
              dump=dump, limit=limit, tokenizer=tokenizer, recaller=recaller, cache=cache))


@eval_app.command()
def tau(data: DataOption, plan: PlanOption = None, budget: BudgetOption = None,
        json_output: JsonOption = False, dump: DumpOption = None, limit: LimitOption = None,
        tokenizer: TokenizerOption = "o200k_base") -> None:
    """τ-bench id-fact survival and tool-pair integrity at history budgets."""
    _run(_Run(suite="tau", data=data, plan=plan, budget=budget, json_output=json_output,
              dump=dump, limit=limit, tokenizer=tokenizer))


@eval_app.command()
def hotpotqa(data: DataOption, plan: PlanOption = None, budget: BudgetOption = None,
             json_output: JsonOption = False, dump: DumpOption = None, limit: LimitOption = None,
             tokenizer: TokenizerOption = "o200k_base", retrieval: RetrievalOption = True,
             dense: DenseOption = False, cache: CacheOption = None) -> None:
    """HotpotQA supporting-sentence recall of shuffled paragraphs at document budgets."""
    _run(_Run(suite="hotpotqa", data=data, plan=plan, budget=budget, json_output=json_output,
              dump=dump, limit=limit, tokenizer=tokenizer, retrieval=retrieval, dense=dense,
              cache=cache))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """One ``eval`` invocation's arguments."""

    suite: str
    """Suite name."""
    data: Path
    """Dataset folder."""
    plan: str | None
    """Plan name or file (None: the suite's)."""
    budget: int | None
    """One budget, or None for the suite's."""
    json_output: bool
    """Print JSON instead of a table."""
    dump: Path | None
    """Where to write one JSON line per case."""
    limit: int | None
    """Only this many cases."""
    tokenizer: str
    """Tokenizer name."""
    retrieval: bool = False
    """Documents through ``RetrievalSource``."""
    dense: bool = False
    """Hybrid document search."""
    recaller: str = "lexical"
    """History recall: lexical or hybrid."""
    cache: Path | None = None
    """Embedding cache file."""

    @property
    def needs_embedder(self) -> bool:
        """Whether e5 is needed at all (it is loaded only then)."""
        return (self.retrieval and self.dense) or self.recaller == "hybrid"

    def label(self, plan_label: str) -> str:
        """The plan label with what this run changed."""
        return run_label(plan_label, retrieval=self.retrieval, dense=self.dense,
                         recaller=self.recaller)


def _run(run: _Run) -> None:
    try:
        if run.recaller not in RECALLERS:
            raise PlanError(f"--recaller must be one of {', '.join(RECALLERS)}")
        plan, label = resolve_plan(run.plan, run.suite)
        embedder = make_embedder(run.cache) if run.needs_embedder else None
        suite = load_suite(run.suite, run.data, plan=plan, tokenizer=run.tokenizer,
                           limit=run.limit, retrieval=run.retrieval, embedder=embedder,
                           recaller="hybrid" if run.recaller == "hybrid" else "lexical")
        budgets = [run.budget] if run.budget is not None else list(suite.default_budgets)
        with _dump_file(run.dump) as sink, _progress(len(suite) * len(budgets)) as advance:
            def on_outcome(outcome: CaseOutcome) -> None:
                if sink is not None:
                    sink.write(dump_line(outcome) + "\n")
                advance()

            result = run_suite(suite, budgets, data=str(run.data), plan_label=run.label(label),
                               tokenizer=run.tokenizer, on_outcome=on_outcome)
    except ContextwrightError as exc:
        fail(describe(exc))
    _print(result, run.json_output)
    if _broken(result):
        raise typer.Exit(1)


@contextmanager
def _dump_file(path: Path | None) -> Iterator[TextIO | None]:
    if path is None:
        yield None
        return
    try:
        handle = path.open("w", encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror}")
    with handle:
        yield handle


@contextmanager
def _progress(total: int) -> Iterator[Callable[[], None]]:
    columns = (TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("eval", total=total)
        yield lambda: progress.advance(task)


def _print(result: SuiteResult, json_output: bool) -> None:
    if json_output:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n")
    else:
        typer.echo(format_text(result))


def _broken(result: SuiteResult) -> bool:
    """A failed build, or a tool pair broken by contextwright (integrity must be 100%)."""
    integrity = [row.contextwright.get("pair_integrity") for row in result.budgets]
    return result.failures > 0 or any(v is not None and v < 1.0 for v in integrity)
