"""``contextwright eval locomo|tau|hotpotqa|cases|ablate``: measure context quality.

A thin shell over ``contextwright.evaluate``. The suites load a dataset folder, run every case at
every budget with a progress bar on stderr, print a table (or ``--json``) on stdout, and may write
one JSON line per case and budget (``--dump``). ``cases`` measures a user's own cases file and
compares it with a saved run (``--baseline``, ``--save``); ``ablate`` reruns a suite or a cases
file without each source or plan option in turn. Both may also have a model answer from each
context and a judge score it (``--judge-base-url``). Exit codes: 2 when a file, plan or option is
bad (one-line message on stderr); 1 when a contextwright build failed or broke a tool pair, a
case regressed against the baseline, a judged run was not confirmed, its endpoint failed, or a
judged task's call was refused (the table is printed when there is one); else 0.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TextIO, cast

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from contextwright.builder import ContextBuilder
from contextwright.cli_common import (
    OneLineUsageErrors,
    describe,
    fail,
    is_stdin,
    progress_bar,
    read_stdin,
)
from contextwright.cli_eval_toolcalls import toolcalls
from contextwright.core.plan import SHIPPED_PLANS, BuildPlan
from contextwright.errors import ContextwrightError, LLMError, PlanError
from contextwright.evaluate import (
    CaseOutcome,
    SuiteResult,
    dump_line,
    format_text,
    load_suite,
    resolve_plan,
    run_suite,
)
from contextwright.evaluate._files import spread
from contextwright.evaluate.ablation import (
    AblationResult,
    CasesTarget,
    SuiteTarget,
    Target,
    ablations,
    format_ablation,
    run_ablation,
)
from contextwright.evaluate.case_results import (
    CasesResult,
    Regression,
    checks_changed,
    find_regressions,
    format_cases,
    judged_not_compared,
    missing_from_run,
    new_in_run,
    no_longer_judged,
    parse_tolerances,
    read_baseline,
    setup_changes,
)
from contextwright.evaluate.cases import (
    MAX_FILE_BYTES,
    CaseRun,
    EvalCase,
    load_cases,
    parse_cases,
    run_cases,
)
from contextwright.evaluate.judge import (
    Estimate,
    Judge,
    NotConfirmed,
    ReplyCache,
    judge_ablation,
    judge_cases,
    refused_by_endpoint,
)
from contextwright.evaluate.runner import RECALLERS, SUITES, Recaller, make_embedder, run_label

eval_app = typer.Typer(cls=OneLineUsageErrors, add_completion=False,
                       no_args_is_help=True,
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
    "the budget; the default) or the built-in DocumentSource (whole documents, the most "
    "relevant to the question kept when they do not all fit).")]
DenseOption = Annotated[bool, typer.Option(
    "--dense", help="Hybrid search (BM25 + e5; needs the embeddings extra).")]
RecallerOption = Annotated[str, typer.Option(
    help="History recall: lexical (the history source's own), fused (the lexical ranking and e5's "
    "fused by rank) or hybrid (BM25 and e5 scores fused by weight); fused and hybrid need the "
    "embeddings extra.")]
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
    """History recall: lexical, fused or hybrid."""
    cache: Path | None = None
    """Embedding cache file."""

    @property
    def needs_embedder(self) -> bool:
        """Whether e5 is needed at all (it is loaded only then)."""
        return (self.retrieval and self.dense) or self.recaller in ("fused", "hybrid")

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
                           recaller=cast(Recaller, run.recaller))  # checked above
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
    with progress_bar(*columns) as progress:
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


# --- eval cases --------------------------------------------------------------------------------

JudgeUrlOption = Annotated[str | None, typer.Option(
    help="OpenAI-compatible endpoint: each case is also answered from its context and scored.")]
JudgeModelOption = Annotated[str | None, typer.Option(help="Model that judges the answers.")]
AnswerModelOption = Annotated[str | None, typer.Option(
    help="Model that answers from the context (default: the judge model).")]
ApiKeyOption = Annotated[str, typer.Option(envvar="OPENAI_API_KEY",
                                           help="API key of the endpoint (OPENAI_API_KEY).")]
CacheDirOption = Annotated[Path | None, typer.Option(
    help="Where replies are kept, so a run resumes and reruns cost nothing (default: "
    "$XDG_CACHE_HOME/contextwright/judge, else ~/.cache/contextwright/judge).")]
PriceOption = Annotated[float | None, typer.Option(min=0, help="Price per million tokens, for "
                                                   "the estimate.")]
SecondsOption = Annotated[float, typer.Option(
    min=0, help="Assumed seconds per model call, for the estimate.")]
YesOption = Annotated[bool, typer.Option("--yes", help="Do not ask before sending.")]
AnswerTokensOption = Annotated[int, typer.Option(min=1, help="max_tokens of an answer.")]
TimeoutOption = Annotated[float, typer.Option(min=1, help="Seconds per model call.")]
ConcurrencyOption = Annotated[int, typer.Option(
    "--judge-concurrency", min=1,
    help="Model calls in flight at once (identical requests are sent once).")]


@dataclass(frozen=True, slots=True, kw_only=True)
class _JudgeSettings:
    """The judge options of one ``ablate`` or ``cases`` invocation."""

    base_url: str
    """Endpoint."""
    judge_model: str
    """Judging model."""
    answer_model: str
    """Answering model."""
    api_key: str
    """API key."""
    cache_dir: Path
    """Reply cache folder."""
    price_input: float | None
    """Input price per million tokens."""
    price_output: float | None
    """Output price per million tokens."""
    seconds_per_call: float
    """Assumed latency, for the estimate."""
    yes: bool
    """Skip the confirmation."""
    answer_max_tokens: int
    """``max_tokens`` of an answer."""
    timeout: float
    """Seconds per call."""
    concurrency: int
    """Calls in flight at once."""


def _judge_settings(context: typer.Context, base_url: str | None, judge_model: str | None,
                    answer_model: str | None, api_key: str, cache_dir: Path | None,
                    price_input: float | None, price_output: float | None,
                    seconds_per_call: float, yes: bool,
                    answer_max_tokens: int, timeout: float, concurrency: int
                    ) -> _JudgeSettings | None:
    """The judge options given, or None when no judge was asked for.

    Exit 2 on half a pair, and on a judge-only option given without a judge: it would change
    nothing, and a user who gave it expects it to.
    """
    if (base_url is None) != (judge_model is None):
        fail("--judge-base-url and --judge-model go together")
    if (price_input is None) != (price_output is None):
        fail("--price-input and --price-output go together")
    if base_url is None or judge_model is None:
        _refuse_judge_only_options(context)
        return None
    return _JudgeSettings(
        base_url=base_url, judge_model=judge_model, answer_model=answer_model or judge_model,
        api_key=api_key, cache_dir=cache_dir or _default_cache_dir(), price_input=price_input,
        price_output=price_output, seconds_per_call=seconds_per_call, yes=yes,
        answer_max_tokens=answer_max_tokens, timeout=timeout, concurrency=concurrency)


_JUDGE_ONLY = ("answer_model", "api_key", "cache_dir", "price_input", "price_output",
               "seconds_per_call", "yes", "answer_max_tokens", "timeout", "concurrency")
"""Parameters that only a judged run reads."""


def _refuse_judge_only_options(context: typer.Context) -> None:
    """Fail naming the first judge-only option given on the command line.

    Only the command line counts: ``OPENAI_API_KEY`` in the environment is no request to judge.
    """
    for param in context.command.params:
        source = context.get_parameter_source(param.name) if param.name else None
        if param.name in _JUDGE_ONLY and source is not None and source.name == "COMMANDLINE":
            fail(f"{param.opts[0]} applies only to a judged run "
                 "(--judge-base-url and --judge-model)")


CasesFile = Annotated[Path, typer.Argument(help="Cases file: one JSON object per line (README "
                                           "'Evaluation on your own cases'); - reads standard "
                                           "input.")]
CasesPlanOption = Annotated[str | None, typer.Option(
    "--plan", help="Shipped plan name or plan file for every case (default: each case's plan, "
    "else the one contextwright build would choose).")]
CasesBudgetOption = Annotated[int | None, typer.Option(
    "--budget", min=1, help="Available tokens of every case (default: each case's budget, "
    "else the plan's).")]
BaselineOption = Annotated[Path | None, typer.Option(
    help="A result saved with --save: exit 1 when a metric got worse beyond its tolerance.")]
SaveOption = Annotated[Path | None, typer.Option(help="Write the result as JSON (a baseline).")]
ToleranceOption = Annotated[list[str] | None, typer.Option(
    help="metric=value: how far a metric may get worse before it is a regression (defaults: "
    "completeness, position, pair_integrity 0; density, noise 0.02). Repeatable.")]


@eval_app.command("cases")
def cases_command(context: typer.Context, file: CasesFile, plan: CasesPlanOption = None,
                  budget: CasesBudgetOption = None, baseline: BaselineOption = None,
                  save: SaveOption = None,
                  json_output: JsonOption = False, tokenizer: TokenizerOption = "o200k_base",
                  tolerance: ToleranceOption = None, judge_base_url: JudgeUrlOption = None,
                  judge_model: JudgeModelOption = None, answer_model: AnswerModelOption = None,
                  api_key: ApiKeyOption = "not-needed", cache_dir: CacheDirOption = None,
                  price_input: PriceOption = None, price_output: PriceOption = None,
                  seconds_per_call: SecondsOption = 2.0, yes: YesOption = False,
                  answer_max_tokens: AnswerTokensOption = 512, timeout: TimeoutOption = 60,
                  concurrency: ConcurrencyOption = 4) -> None:
    """Completeness, density, position and noise of your own cases; regressions vs a baseline."""
    settings = _judge_settings(context, judge_base_url, judge_model, answer_model, api_key,
                               cache_dir, price_input, price_output, seconds_per_call, yes,
                               answer_max_tokens, timeout, concurrency)
    with _exits_on_errors():
        tolerances = parse_tolerances(tolerance or [])
        if tolerance and baseline is None:
            # Nothing is compared without a baseline: a tolerance would change nothing.
            fail("--tolerance applies only with --baseline")
        if save is not None and not is_stdin(file) and _same_file(save, file):
            # Checked before the run: the result written there would replace the user's cases.
            fail(f"--save {save} is the cases file; save the result to another file")
        saved = read_baseline(baseline) if baseline is not None else None
        cases = _load_cases(file)
        run = CaseRun(plan=_plan(plan), budget=budget, base_dir=file.parent)
        builder = ContextBuilder(tokenizer=tokenizer)
        result, failed = _run_cases(cases, builder, run, str(file), settings, tokenizer)
    regressions = find_regressions(result, saved, tolerances) if saved is not None else []
    integrity = result.overall.get("pair_integrity")
    gate_failed = bool(regressions or result.failures
                       or (integrity is not None and integrity < 1.0))
    if save is not None:
        _save_result(save, baseline, result, gate_failed)
    _print_cases(result, regressions, json_output,
                 missing_from_run(result, saved) if saved is not None else [],
                 new_in_run(result, saved) if saved is not None else [])
    for change in setup_changes(result, saved) if saved is not None else []:
        typer.echo(f"note: {change}", err=True)
    for line in no_longer_judged(result, saved) if saved is not None else []:
        typer.echo(f"note: {line}", err=True)
    for line in checks_changed(result, saved) if saved is not None else []:
        typer.echo(f"note: {line}", err=True)
    if saved is not None and (skipped := judged_not_compared(result, saved)):
        typer.echo(f"note: the baseline has judged scores ({', '.join(skipped)}) and this run "
                   "is not judged, so they were not compared (pass --judge-base-url and "
                   "--judge-model to compare them)", err=True)
    # An unreadable verdict is no grade: a run that grades nothing must not pass a CI check.
    _exit_on_failed_calls(failed, unreadable_fails=True)
    if gate_failed:
        raise typer.Exit(1)


def _save_result(save: Path, baseline: Path | None, result: CasesResult,
                 gate_failed: bool) -> None:
    """Write ``result`` to ``save``, unless that is the baseline a failing run compared with.

    ``--baseline B --save B`` keeps a baseline up to date in CI; a run that fails its check
    written over B would make the next run compare with the failure and pass.
    """
    if gate_failed and baseline is not None and _same_file(save, baseline):
        typer.echo(f"note: not saved to {save}: it is the baseline this run failed against "
                   "(it is kept; --save another file to keep this run)", err=True)
        return
    _write_json(save, result.to_dict())


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one existing file (False when either cannot be looked up)."""
    try:
        return first.exists() and first.samefile(second)
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class _Failed:
    """Judged tasks of a run that got no score."""

    at_endpoint: int = 0
    """Tasks whose answer or judgment call the endpoint refused."""
    unreadable: int = 0
    """Tasks whose judge replied with something other than a verdict."""

    @staticmethod
    def of(judge: Judge) -> _Failed:
        """What ``judge`` could not score this run."""
        unreadable = len(judge.unreadable)
        return _Failed(at_endpoint=len(judge.errors) - unreadable, unreadable=unreadable)


def _exit_on_failed_calls(failed: _Failed, *, unreadable_fails: bool) -> None:
    """Exit 1 when judged tasks got no score (after the output).

    Such a task is left unjudged, not scored wrong: a run whose every call was refused (a 400
    for each request) would otherwise pass a CI check with nothing judged. Unreadable verdicts
    fail the run too when ``unreadable_fails``, else they are a warning. Neither is stored, so
    a rerun asks again.
    """
    if failed.unreadable:
        word = "error" if unreadable_fails else "warning"
        typer.echo(f"{word}: the judge's reply to {failed.unreadable} task(s) is not a verdict "
                   "(CORRECT or WRONG; see the notes); it is not stored: run again to ask the "
                   "judge again", err=True)
    if failed.at_endpoint:
        typer.echo(f"error: {failed.at_endpoint} judged task(s) failed at the endpoint (see "
                   "the notes); run again to ask them again", err=True)
    if failed.at_endpoint or (unreadable_fails and failed.unreadable):
        raise typer.Exit(1)


@contextmanager
def _exits_on_errors() -> Iterator[None]:
    """A judged run's failures as exits: not confirmed or the endpoint failed 1, bad input 2.

    A setting the client cannot use (a malformed base URL) is bad input, not an endpoint that
    failed; an endpoint that refuses the key or the model needs a fix before a rerun helps.
    """
    try:
        yield
    except NotConfirmed as exc:
        fail(str(exc), 1)
    except LLMError as exc:
        if exc.kind == "config":
            fail(describe(exc))
        if refused_by_endpoint(exc):
            fail(f"{describe(exc)}: the endpoint refuses the API key or the model (check "
                 "--judge-base-url, --judge-model, --answer-model and the API key); the "
                 "replies so far are stored", 1)
        fail(f"{describe(exc)}; the replies so far are stored: run again to resume", 1)
    except ContextwrightError as exc:
        fail(describe(exc))


def _run_cases(cases: Sequence[EvalCase], builder: ContextBuilder, run: CaseRun, source: str,
               settings: _JudgeSettings | None, tokenizer: str) -> tuple[CasesResult, _Failed]:
    """The run's result, and the judged tasks that got no score."""
    if settings is None:
        with _progress(len(cases)) as advance:
            return run_cases(cases, builder, run, source=source,
                             on_result=lambda _: advance()), _Failed()
    with _judging(settings, tokenizer, len(cases)) as judging:
        result = judge_cases(cases, builder, run, judging.judge, confirm=judging.confirm,
                             source=source, on_result=lambda _: judging.built(),
                             on_calls=judging.called, concurrency=settings.concurrency)
        return result, _Failed.of(judging.judge)


def _plan(name: str | None) -> BuildPlan | None:
    if name is None:
        return None
    return BuildPlan.named(name) if name in SHIPPED_PLANS else BuildPlan.load(name)


def _write_json(path: Path, data: object) -> None:
    """Write ``data`` to ``path`` whole or not at all.

    The text goes to a file beside it first, which then replaces ``path``: a write cut short
    (a full disk, Ctrl-C) must not leave half a baseline where ``--save B`` keeps the only one.
    """
    target = path.resolve() if path.is_symlink() else path  # a linked baseline stays linked
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        try:
            partial.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", "utf-8")
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)  # gone already when it replaced the target
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror}")


def _print_cases(result: CasesResult, regressions: list[Regression], json_output: bool,
                 missing: list[str], added: list[str]) -> None:
    lines = [f"regression: {r.describe()}" for r in regressions]
    lines += [f"note: baseline case {case} is not in this run" for case in missing]
    lines += [f"note: case {case} is not in the baseline" for case in added]
    if missing or added:
        lines.append("note: the overall means were compared over the cases both runs hold")
    if json_output:
        data = result.to_dict()
        data["regressions"] = [r.describe() for r in regressions]
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        typer.echo(format_cases(result))
    for line in lines:
        typer.echo(line, err=True)


# --- eval ablate -------------------------------------------------------------------------------

TargetArgument = Annotated[str, typer.Argument(
    help="locomo, tau or hotpotqa (with --data), or cases (with FILE).")]
FileArgument = Annotated[Path | None, typer.Argument(
    help="The cases file (target cases); - reads standard input.")]
DataForOption = Annotated[Path | None, typer.Option(
    "--data", help="Folder laid out like the matching folder of ../shared/data (suites).")]


@eval_app.command()
def ablate(context: typer.Context, target: TargetArgument, file: FileArgument = None,
           data: DataForOption = None, plan: CasesPlanOption = None,
           budget: CasesBudgetOption = None, limit: LimitOption = None,
           tokenizer: TokenizerOption = "o200k_base", json_output: JsonOption = False,
           judge_base_url: JudgeUrlOption = None,
           judge_model: JudgeModelOption = None, answer_model: AnswerModelOption = None,
           api_key: ApiKeyOption = "not-needed", cache_dir: CacheDirOption = None,
           price_input: PriceOption = None, price_output: PriceOption = None,
           seconds_per_call: SecondsOption = 2.0, yes: YesOption = False,
           answer_max_tokens: AnswerTokensOption = 512, timeout: TimeoutOption = 60,
           concurrency: ConcurrencyOption = 4) -> None:
    """Remove each source and plan option in turn and show every metric's change."""
    settings = _judge_settings(context, judge_base_url, judge_model, answer_model, api_key,
                               cache_dir, price_input, price_output, seconds_per_call, yes,
                               answer_max_tokens, timeout, concurrency)
    with _exits_on_errors():
        chosen = _target(target, file, data, plan, budget, limit, tokenizer)
        result, failed = _ablate(chosen, settings, tokenizer)
    if json_output:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n")
    else:
        typer.echo(format_ablation(result))
    # An ablation compares variants in one run, with no baseline to gate: its unreadable
    # verdicts are counted in each row's judge_errors and warned of.
    _exit_on_failed_calls(failed, unreadable_fails=False)
    if result.full_failures:
        # The plan as given does not build: every delta is measured against a partial row.
        typer.echo(f"error: {result.full_failures} build(s) of the full plan failed (see the "
                   "notes)", err=True)
        raise typer.Exit(1)


def _load_cases(file: Path) -> tuple[EvalCase, ...]:
    """The cases of ``file``, or of standard input for ``-``.

    A case's plan file is then found from the working directory (``Path("-").parent``).
    """
    if is_stdin(file):
        return parse_cases(read_stdin(MAX_FILE_BYTES + 1), "stdin")
    return load_cases(file)


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "contextwright" / "judge"


def _target(name: str, file: Path | None, data: Path | None, plan: str | None,
            budget: int | None, limit: int | None, tokenizer: str) -> Target:
    if name == "cases":
        if file is None or data is not None:
            fail("eval ablate cases takes a cases FILE (and no --data)")
        cases = spread(_load_cases(file), limit)
        return CasesTarget(cases=cases, builder=ContextBuilder(tokenizer=tokenizer),
                           run=CaseRun(plan=_plan(plan), budget=budget, base_dir=file.parent))
    if name not in SUITES:
        fail(f"the target must be one of {', '.join((*SUITES, 'cases'))}")
    if data is None or file is not None:
        fail(f"eval ablate {name} takes --data DIR (and no FILE)")
    full, label = resolve_plan(plan, name)
    suite = load_suite(name, data, plan=full, tokenizer=tokenizer, limit=limit,
                       retrieval=name == "hotpotqa")
    return SuiteTarget(suite=suite, budget_list=(budget,) if budget else (), label=label)


def _ablate(target: Target, settings: _JudgeSettings | None, tokenizer: str
            ) -> tuple[AblationResult, _Failed]:
    """The ablation, and the judged tasks that got no score."""
    total = len(target) * len(target.budgets) * (1 + len(ablations(target.plans())))
    if settings is None:
        with _progress(total) as advance:
            return run_ablation(target, on_built=lambda *_: advance()), _Failed()
    with _judging(settings, tokenizer, total) as judging:
        result = judge_ablation(target, judging.judge, confirm=judging.confirm,
                                on_calls=judging.called, on_built=lambda *_: judging.built(),
                                concurrency=settings.concurrency)
        return result, _Failed.of(judging.judge)


@dataclass(slots=True, kw_only=True)
class _Judging:
    """A judge for one run, with its progress bars: builds first, then the calls."""

    judge: Judge
    settings: _JudgeSettings
    builds: Progress
    calls: Progress

    def built(self) -> None:
        """One more build made."""
        self.builds.advance(self.builds.task_ids[0])

    def called(self, count: int) -> None:
        """``count`` more calls made."""
        self.calls.advance(self.calls.task_ids[0], count)

    def confirm(self, estimate: Estimate) -> bool:
        """Show the estimate and ask (``--yes``: don't); the calls' bar starts if agreed."""
        self.builds.stop()  # one live display at a time: the prompt and the calls' bar next
        agreed = _confirm(estimate, self.settings)
        if agreed and estimate.calls:
            self.calls.update(self.calls.task_ids[0], total=estimate.calls)
            self.calls.start()
        return agreed


@contextmanager
def _judging(settings: _JudgeSettings, tokenizer: str, builds: int) -> Iterator[_Judging]:
    """A ``_Judging`` over the settings' endpoint and reply cache, closed afterwards."""
    from contextwright.llm.client import OpenAIChatClient

    client = OpenAIChatClient(settings.base_url, settings.api_key, timeout=settings.timeout)
    try:
        cache = ReplyCache(settings.cache_dir / "replies.sqlite")
    except BaseException:
        client.close()
        raise
    judge = Judge(client=client, cache=cache, judge_model=settings.judge_model,
                  answer_model=settings.answer_model,
                  count=ContextBuilder(tokenizer=tokenizer).tokenizer.count,
                  answer_max_tokens=settings.answer_max_tokens)
    judging = _Judging(judge=judge, settings=settings, builds=_bar("builds", builds),
                       calls=_bar("model calls", 0))
    judging.builds.start()
    try:
        yield judging
    finally:
        judging.builds.stop()
        judging.calls.stop()
        client.close()
        cache.close()


def _bar(label: str, total: int) -> Progress:
    progress = progress_bar(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TimeRemainingColumn())
    progress.add_task(label, total=total)
    return progress


def _confirm(estimate: Estimate, settings: _JudgeSettings) -> bool:
    for line in estimate.describe(price_input=settings.price_input,
                                  price_output=settings.price_output,
                                  seconds_per_call=settings.seconds_per_call,
                                  concurrency=settings.concurrency):
        typer.echo(line, err=True)
    if not estimate.calls or settings.yes:
        return True
    try:
        agreed = typer.confirm("Send these calls?", default=False, err=True)
    except typer.Abort:  # input ended before an answer: that is no answer, so no
        agreed = False
    if not sys.stdin.isatty():  # a reply read from a pipe is not echoed: end the prompt's line
        typer.echo("", err=True)
    return agreed
