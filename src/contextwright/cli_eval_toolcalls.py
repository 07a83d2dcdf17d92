"""``contextwright eval toolcalls``: tool-call accuracy of a model under three context builds.

A thin shell over ``contextwright.evaluate.toolcalls``: it loads the tasks (the 30 built-in
ones, or ``--tasks FILE``; ``--tasks -`` reads them from standard input), asks the model at
``--base-url`` once per task and configuration with a progress bar on stderr, and prints the
accuracy table (or ``--json``, or ``--markdown``) on stdout. The API key is read from the
environment variable named by ``--api-key-env``, never taken on the command line; without it a
placeholder is sent (local servers ignore it). Exit codes: 2 when the tasks, plan, options,
base URL or cache are bad (one line on stderr, before any call), 1 when a call failed for a
reason other than the model's answer or a too-long context (endpoint down, HTTP 5xx, a reply
that is no chat completion; the table is still printed), else 0.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from contextwright.cli_common import describe, fail, is_stdin, progress_bar, read_stdin
from contextwright.errors import ContextwrightError, InvalidInputError
from contextwright.evaluate.toolcall_score import ToolCallTask, load_tasks, parse_tasks
from contextwright.evaluate.toolcalls import (
    DEFAULT_BUDGET,
    Outcome,
    ResultCache,
    ToolcallRun,
    builtin_tasks,
    format_markdown,
    format_table,
    make_client,
    make_configs,
    run_toolcalls,
)

PLACEHOLDER_KEY = "not-needed"


def toolcalls(
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible API root, e.g. "
                                          "http://127.0.0.1:11434/v1 (Ollama).")],
    model: Annotated[str, typer.Option(help="Model name sent with every call.")],
    tasks: Annotated[Path | None, typer.Option(help="JSONL of tasks (default: the 30 built-in "
                                               "multi-tool tasks); - reads standard input."
                                               )] = None,
    budget: Annotated[int, typer.Option(min=1, help="Tokens for fixed truncation and the "
                                        "plans.")] = DEFAULT_BUDGET,
    config: Annotated[str, typer.Option(help="Configurations, comma-separated: a (no budget), "
                                        "b (fixed truncation), c (contextwright tool_heavy)."
                                        )] = "a,b,c",
    plan: Annotated[list[str] | None, typer.Option(help="Add a configuration with this plan "
                                                   "(shipped name or file); repeatable.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print summaries and every "
                                              "outcome as JSON.")] = False,
    markdown: Annotated[bool, typer.Option(help="Print the table in Markdown.")] = False,
    api_key_env: Annotated[str | None, typer.Option(help="Environment variable holding the "
                                                    "API key.")] = None,
    cache: Annotated[Path | None, typer.Option(help="JSONL file keeping outcomes: a rerun "
                                               "asks only what is not in it.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks.")] = None,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds per call.")] = 120.0,
    temperature: Annotated[float, typer.Option(min=0, help="Sampling temperature sent.")] = 0.0,
) -> None:
    """Tool-call accuracy of a model: no budget, fixed truncation and contextwright."""
    try:
        key = _api_key(api_key_env)
        loaded = _read_tasks(tasks) if tasks is not None else builtin_tasks()
        chosen = loaded[:limit] if limit is not None else loaded
        configs = make_configs([k.strip() for k in config.split(",") if k.strip()], plan or ())
        kept = ResultCache(cache, on_warning=_warn) if cache is not None else None
        client = make_client(base_url, key, timeout=timeout)
        with _progress(len(chosen) * len(configs)) as advance:
            run = run_toolcalls(chosen, configs, client=client, model=model, budget=budget,
                                cache=kept, temperature=temperature, on_outcome=advance)
    except ContextwrightError as exc:
        fail(describe(exc))
    _print(run, json_output, markdown)
    if run.api_errors:
        typer.echo(f"error: {run.api_errors} calls failed at the endpoint (see the API error "
                   "column)", err=True)
        raise typer.Exit(1)


def _read_tasks(path: Path) -> list[ToolCallTask]:
    """The tasks in the JSONL file ``path``, or on standard input for ``-``."""
    if not is_stdin(path):
        return load_tasks(path)
    try:
        text = read_stdin().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(
            f"cannot read tasks from standard input: {type(exc).__name__}") from None
    return parse_tasks(text, "stdin")


def _warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def _api_key(variable: str | None) -> str:
    if variable is None:
        return PLACEHOLDER_KEY
    value = os.environ.get(variable, "")
    if not value:
        raise InvalidInputError(f"environment variable {variable} is not set")
    return value


@contextmanager
def _progress(total: int) -> Iterator[Callable[[Outcome], None]]:
    columns = (TextColumn("toolcalls"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with progress_bar(*columns) as progress:
        task = progress.add_task("toolcalls", total=total)
        yield lambda _outcome: progress.advance(task)


def _print(run: ToolcallRun, json_output: bool, markdown: bool) -> None:
    if json_output:
        sys.stdout.write(json.dumps(run.to_dict(), ensure_ascii=False, indent=2) + "\n")
    elif markdown:
        typer.echo(format_markdown(run))
    else:
        typer.echo(format_table(run))
