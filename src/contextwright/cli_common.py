"""What every ``contextwright`` command shares: failing with one line on stderr and an exit code.

A command's failure is one line, ``error: <what>``, whatever the error's text holds (a parser's
message may span lines, an id may carry terminal escapes), and exit code 2 for bad input unless
the command documents another. No command lets a ``ContextwrightError`` become a traceback.
"""

from __future__ import annotations

import errno
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.progress import Progress, ProgressColumn
from typer.core import TyperGroup

from contextwright.errors import ContextwrightError

BAD_INPUT = 2
"""Exit code of a command refused because of its input (file, option, store, session)."""
STDIN = "-"
"""What an input file option or argument takes as standard input, as most tools do."""


def is_stdin(path: Path) -> bool:
    """Whether ``path`` names standard input (``-``; a file called so is ``./-``)."""
    return str(path) == STDIN


def read_stdin(limit: int | None = None) -> bytes:
    """Standard input as bytes, at most ``limit`` of them (a caller checks for more)."""
    return sys.stdin.buffer.read(-1 if limit is None else limit)


def printable(text: str) -> str:
    """``text`` safe for one terminal line: control and unprintable characters escaped.

    Stored ids and content may hold lone surrogates, escape sequences and newlines (they
    round-trip exactly in the store); shown raw they could forge rows or drive the terminal.
    """
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in escaped)


def write_utf8() -> None:
    """Make standard output and error write UTF-8, whatever the console's encoding says.

    Output redirected to a file on Windows is cp1252 or cp936 (GBK), which cannot hold most of
    what a context holds (Chinese, emoji): every command that prints user content would fail
    half-way. Output is JSON or text for files and pipes, and JSON is UTF-8. A character UTF-8
    cannot hold (a lone surrogate of stored content) is written as its escape, which is valid
    JSON and keeps an error on one line.
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(encoding="utf-8", errors="backslashreplace")


def progress_bar(*columns: str | ProgressColumn) -> Progress:
    """A progress bar on stderr that leaves nothing behind, shown only on a terminal.

    Written to a pipe or a file, a finished bar would leave a blank line before the next
    message, so the ``error: …`` line of a failed run would not be the only line.
    """
    console = Console(stderr=True)
    return Progress(*columns, console=console, transient=True, disable=not console.is_terminal)


def fail(message: str, code: int = BAD_INPUT) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit with ``code``."""
    typer.echo(f"error: {printable(' '.join(message.split()))}", err=True)
    raise typer.Exit(code)


def describe(exc: ContextwrightError) -> str:
    """``Type: message`` of a library error, for ``fail``."""
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def library_errors(code: int = BAD_INPUT) -> Iterator[None]:
    """Turn any ``ContextwrightError`` raised inside into ``fail`` (one line, ``code``)."""
    try:
        yield
    except ContextwrightError as exc:
        fail(describe(exc), code)


class OneLineUsageErrors(TyperGroup):
    """A command group whose usage errors are one ``error: …`` line and exit code 2.

    The framework would print a boxed usage message of many lines for an unknown option, a
    bad value or a missing one; every other failure of every command is already one line.
    Given to each ``typer.Typer`` of the CLI (``cls=``): the outermost group sees the errors of
    every subcommand's options, since it parses them while it invokes the subcommand.
    """

    # The framework's Context is typed by a private module: Any keeps to its signature.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Parse the group's own options (``contextwright --bogus``)."""
        with _usage_errors():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        """Find and run the subcommand (``contextwright bogus``, ``build --bogus``).

        Its output is flushed here, so a write that fails (a full disk under ``> out.json``)
        is one ``error: …`` line too, not a traceback or a failure while the process exits.
        """
        with _usage_errors(), _system_errors():
            result = super().invoke(ctx)
            sys.stdout.flush()
            return result


OUTPUT_FAILED = 1
"""Exit code of a command the system failed (its output could not be written: a full disk, a
device error), which is not the input's fault."""


@contextmanager
def _system_errors() -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise  # a reader that stopped early (| head): the framework exits quietly
        # Most often a write to standard output (which names no file); said as it is, since
        # the command cannot tell which of its reads and writes failed.
        where = "" if exc.filename is None else f": {exc.filename}"
        fail(f"{type(exc).__name__}: {exc.strerror or exc}{where}", OUTPUT_FAILED)


@contextmanager
def _usage_errors() -> Iterator[None]:
    try:
        yield
    except typer.TyperException as exc:
        # A group called with nothing shows its help, which is no error. The framework tells
        # that case apart by the class's name too (its class lives in a private module).
        if type(exc).__name__ == "NoArgsIsHelpError" or exc.exit_code != BAD_INPUT:
            raise
        fail(exc.format_message())
