"""What every ``contextwright`` command shares: failing with one line on stderr and an exit code.

A command's failure is one line, ``error: <what>``, whatever the error's text holds (a parser's
message may span lines, an id may carry terminal escapes), and exit code 2 for bad input unless
the command documents another. No command lets a ``ContextwrightError`` become a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import typer

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
