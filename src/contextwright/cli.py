"""The ``contextwright`` command line: demo, build, plans, session, eval, snapshots, serve...

``demo``, ``build``, ``plans`` and ``agent`` are here; ``session``, ``eval``, the snapshot
commands (``snapshots``, ``inspect``, ``diff``, ``replay``) and the HTTP service (``serve``,
``api-key``) have their own modules.

A thin shell over the library: it reads files, calls the builder and prints JSON. Errors of the
library become a one-line message on stderr and exit code 2 (bad input) or 3 (budget, followed by
a line with the report), never a traceback: plan and request files are parsed with bounded work
(``core.parsing``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from contextwright.builder import ContextBuilder
from contextwright.cli_common import (
    BAD_INPUT,
    OneLineUsageErrors,
    describe,
    fail,
    is_stdin,
    library_errors,
    read_stdin,
    write_utf8,
)
from contextwright.cli_eval import eval_app
from contextwright.cli_observe import diff, inspect, replay, snapshots_app
from contextwright.cli_serve import api_key, serve
from contextwright.cli_session import session_app
from contextwright.core.cache import Fingerprint
from contextwright.core.parsing import MalformedDocument, parse_document
from contextwright.core.plan import SHIPPED_PLANS, BuildPlan, without_byte_order_mark
from contextwright.core.request import Request
from contextwright.errors import BudgetError, ContextwrightError, InvalidInputError

app = typer.Typer(cls=OneLineUsageErrors, add_completion=False,
                  no_args_is_help=True,
                  help="Decide what an LLM agent sees on every call.")
app.add_typer(session_app, name="session")
app.add_typer(eval_app, name="eval")
app.add_typer(snapshots_app, name="snapshots")
app.command("inspect")(inspect)
app.command("diff")(diff)
app.command("replay")(replay)
app.command()(serve)
app.command("api-key")(api_key)


@app.command()
def demo() -> None:
    """Replay the weather + memo agent, then a customer-service bot across three modes (offline)."""
    from contextwright.demo import run_demo
    from contextwright.demo_sessions import run_sessions_demo

    with library_errors():
        run_demo(typer.echo)
        typer.echo("")
        run_sessions_demo(typer.echo)


@app.command()
def plans() -> None:
    """List the shipped plans."""
    for name in SHIPPED_PLANS:
        with library_errors():
            plan = BuildPlan.named(name)
        typer.echo(f"{name:<13} {plan.description}")


def _load_plan(plan: str | None, request: Request) -> BuildPlan:
    from contextwright.plans import select_plan

    if plan is None:
        return select_plan(request)
    if plan in SHIPPED_PLANS:
        return BuildPlan.named(plan)
    return BuildPlan.load(plan)


MAX_REQUEST_BYTES = 256 << 20
"""Largest request file read (the cases file's limit): ``/dev/zero`` or an endless pipe would
otherwise be read until memory runs out."""


def _read_request(path: Path) -> Request:
    """The request in a JSON file, or on standard input for ``-``.

    Numbers must be finite: ``NaN``, ``Infinity`` or ``1e400`` (read as infinity) are not
    JSON, and the request printed from them could not be sent (the service refuses them too).
    """
    stdin = is_stdin(path)
    try:
        raw = read_stdin(MAX_REQUEST_BYTES + 1) if stdin else _read_bounded(path)
    except OSError as exc:
        where = "standard input" if stdin else f"request file {path}"
        raise InvalidInputError(f"cannot read {where}: {exc.strerror}") from None
    where = "the request on standard input" if stdin else f"request file {path.name}"
    if len(raw) > MAX_REQUEST_BYTES:
        raise InvalidInputError(f"{where} is larger than {MAX_REQUEST_BYTES} bytes")
    try:
        data = parse_document(without_byte_order_mark(raw), "json", finite=True)
    except MalformedDocument as exc:
        raise InvalidInputError(f"{where} is not valid JSON: {exc}") from None
    return Request.from_dict(data)


def _read_bounded(path: Path) -> bytes:
    """At most one byte more of ``path`` than a request may hold (the caller refuses more)."""
    with path.open("rb") as handle:
        return handle.read(MAX_REQUEST_BYTES + 1)


class ContextwrightErrorExit(Exception):
    """A failure to report on stderr with an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@app.command()
def build(
    request: Annotated[Path, typer.Option(help="Request JSON file (see README); - reads it "
                                          "from standard input.")],
    plan: Annotated[str | None, typer.Option(help="Shipped plan name or plan file.")] = None,
    window: Annotated[int | None, typer.Option(help="Model context window.")] = None,
    reserve_output: Annotated[int | None, typer.Option(help="Tokens kept for the answer.")] = None,
    budget: Annotated[int | None, typer.Option(min=1, help="Available tokens, set directly.")
                      ] = None,
    format: Annotated[str, typer.Option(
        help="openai, openai-responses, anthropic or text.")] = "openai",
    tokenizer: Annotated[str | None, typer.Option(
        help="o200k_base (default), cl100k_base, estimate or a tokenizer.json path.")] = None,
    model: Annotated[str | None, typer.Option(
        help="Model name: its tokenizer, window and output reserve (see contextwright.models), "
             "and the request's model field.")] = None,
    debug: Annotated[bool, typer.Option(
        help="Print the seed-style report, warnings and rendering notes on stderr.")] = False,
    previous: Annotated[Path | None, typer.Option(
        help="The previous call's fingerprint (the output's 'fingerprint', as JSON): keep its "
             "prefix stable for the provider's prompt cache.")] = None,
    cache: Annotated[bool, typer.Option(
        help="Build for a stable prefix even without --previous (and print the fingerprint).")
    ] = False,
) -> None:
    """Build a context from a request file and print messages, tokens, budget and report."""
    try:
        output = _build(request, plan, window, reserve_output, budget, format, tokenizer, debug,
                        model, previous, cache)
    except ContextwrightErrorExit as exc:
        fail(str(exc), exc.code)
    except BudgetError as exc:
        typer.echo(f"error: {exc}", err=True)
        typer.echo(json.dumps({"error": str(exc), "report": exc.report.to_dict()},
                              ensure_ascii=False), err=True)
        raise typer.Exit(3) from None
    except ContextwrightError as exc:
        fail(describe(exc))
    sys.stdout.write(json.dumps(output, ensure_ascii=False, indent=2) + "\n")


def _build(request_path: Path, plan_name: str | None, window: int | None,
           reserve_output: int | None, budget: int | None, fmt: str, tokenizer: str | None,
           debug: bool, model: str | None = None, previous_path: Path | None = None,
           cache: bool = False) -> dict[str, Any]:
    if fmt not in ("openai", "openai-responses", "anthropic", "text"):
        raise ContextwrightErrorExit(
            "--format must be openai, openai-responses, anthropic or text", 2)
    request = _read_request(request_path)
    # --window and --reserve-output win over the plan's and the model's.
    builder = ContextBuilder(tokenizer=tokenizer, model=model, window=window,
                             reserved_output=reserve_output)
    plan = _load_plan(plan_name, request)
    if budget is not None:
        # Set before the window and reserves are applied: with --budget the available tokens
        # are the ones given, so a window whose safety share the reserves exceed still holds it.
        plan = plan.with_budget(available_override=budget)
    plan = builder.effective_plan(plan)
    previous = _read_previous(previous_path) if previous_path is not None else None
    stable = cache or previous is not None
    ctx = builder.build(plan, request, target="text" if fmt == "text" else "chat",
                        previous=previous, cache=True if stable else None)
    if debug:
        typer.echo(ctx.report.format_debug(), err=True)
        notes = [] if fmt == "text" else ctx.rendering_notes(fmt)  # type: ignore[arg-type]
        for line in [*ctx.report.warnings, *notes]:
            typer.echo(f"[ContextBuilder] warning: {line}", err=True)
    else:
        # The report in the output holds them too, but a part of the request the build left
        # out (tools a plan has no source for...) must not go unnoticed by whoever ran it.
        for line in ctx.report.warnings:
            typer.echo(f"warning: {line}", err=True)
    output: dict[str, Any]
    if fmt == "text":
        output = {"text": ctx.to_text()}
    else:
        output = ctx.to_request(fmt)  # type: ignore[arg-type]
    b = plan.budget
    output.update({
        "total_tokens": ctx.total_tokens,
        "budget": {"window": b.window, "safety_ratio": b.safety_ratio,
                   "reserved_output": b.reserved_output,
                   "reserved_reasoning": b.reserved_reasoning, "available": b.available},
        "report": ctx.report.to_dict(),
    })
    if stable:
        output["fingerprint"] = ctx.fingerprint.to_dict()
    return output


def _read_previous(path: Path) -> Fingerprint:
    """A fingerprint file: the ``fingerprint`` object, or a whole earlier output holding it."""
    try:
        data = parse_document(path.read_bytes(), "json")
    except OSError as exc:
        raise InvalidInputError(f"cannot read fingerprint file {path}: {exc.strerror}"
                                ) from None
    except MalformedDocument as exc:
        raise InvalidInputError(f"fingerprint file {path.name} is not valid JSON: {exc}"
                                ) from None
    if isinstance(data, dict) and "fingerprint" in data:
        data = data["fingerprint"]
    elif isinstance(data, dict) and "version" not in data:
        # A build's output made without --cache, or a request: nothing to continue.
        raise InvalidInputError(f"{path.name} holds no fingerprint: pass the output of a "
                                "'build --cache' (or its 'fingerprint' object)")
    try:
        return Fingerprint.from_dict(data)
    except InvalidInputError as exc:
        # Its message names a field of the fingerprint; the file may be one of several passed.
        raise InvalidInputError(f"fingerprint file {path.name}: {exc}") from None


@app.command()
def agent(
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible endpoint, e.g. "
                                               "http://127.0.0.1:11434/v1 (Ollama).")],
    model: Annotated[str, typer.Option(help="Model name the endpoint serves.")],
    db: Annotated[Path, typer.Option(help="SQLite file of sessions and memos.")] = Path(
        "agent.db"),
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY",
                                         help="API key (OPENAI_API_KEY).")] = "none",
    user: Annotated[str, typer.Option(help="User id.")] = "me",
    session: Annotated[str, typer.Option(help="Session id.")] = "main",
) -> None:
    """Chat with the weather + memo agent; the session survives restarts.

    A failed model call keeps the question: /retry continues the turn.
    """
    from contextwright.agent import make_agent, repl

    with library_errors():
        running = make_agent(base_url, model, db, api_key=api_key)
        try:
            unanswered = repl(running, user, session)
        finally:
            running.close()
    if unanswered is not None:
        # Said already, on its own line: the exit code tells a script that piped its
        # questions in that the last one got no answer.
        raise typer.Exit(BAD_INPUT)


def main() -> None:
    """Console entry point: every command writes UTF-8 (``write_utf8``)."""
    write_utf8()
    app()
