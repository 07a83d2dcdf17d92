"""``contextwright snapshots query|list|show|purge``, ``inspect``, ``diff`` and ``replay``.

Snapshots are read from ``--sink`` (or ``CONTEXTWRIGHT_SNAPSHOTS``), a URL as ``open_sink``
reads it; the default is ``sqlite:///snapshots.db`` in the working directory, and a SQLite file
that does not exist is refused rather than created. A snapshot is named by its id, by
``latest`` / ``latest~N`` (the N-th before the newest), or by a JSON file (``snapshots show
--json`` output). Hashed ids and texts of redacted snapshots are matched with the key of
``CONTEXTWRIGHT_FENCE_SECRET``, the secret the recording deployment ran with (never a command
line option: those are visible to every user of the machine). Every failure is one line on
stderr and exit code 2; lines of a JSONL file and rows of a database that are not snapshots
are skipped, and named in one warning line on stderr.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from contextwright.cli_common import OneLineUsageErrors, describe, fail, library_errors, printable
from contextwright.core.request import Request
from contextwright.errors import ContextwrightError, InvalidInputError
from contextwright.observe.diff import diff_snapshots
from contextwright.observe.query import summarize
from contextwright.observe.sinks import (
    JsonlSink,
    SkipsUnreadableRows,
    SnapshotQuery,
    SnapshotSink,
    open_sink,
    shown_id,
    snapshot_from_file,
)
from contextwright.observe.snapshot import Snapshot

snapshots_app = typer.Typer(cls=OneLineUsageErrors, add_completion=False,
                            no_args_is_help=True,
                            help="Query, list, show and purge recorded build snapshots.")

SinkOption = Annotated[str, typer.Option(
    "--sink", envvar="CONTEXTWRIGHT_SNAPSHOTS",
    help="Snapshot sink URL: sqlite:///file.db, jsonl:///file.jsonl, redis://…, postgresql://…")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
UserOption = Annotated[str | None, typer.Option(
    "--user", help="Only this user's builds (the id as the app gave it; redacted snapshots "
    "keep it hashed with the deployment's key, so set CONTEXTWRIGHT_FENCE_SECRET as the "
    "recording app did).")]
SessionOption = Annotated[str | None, typer.Option(
    "--session", help="Only this session's builds (matched as --user is).")]
DEFAULT_SINK = "sqlite:///snapshots.db"
_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@contextmanager
def _opened(url: str) -> Iterator[SnapshotSink]:
    scheme, _, rest = url.partition("://")
    if scheme in ("sqlite", "jsonl") and rest.startswith("/") and rest != "/" and not Path(
            rest[1:]).is_file():
        fail(f"no snapshot file at {printable(rest[1:])} (check --sink; these commands never "
             "create one)")
    quiet = logging.NullHandler()  # skipped lines are reported below, once, not logged too
    observe_log = logging.getLogger("contextwright.observe")
    observe_log.addHandler(quiet)
    try:
        with library_errors():
            sink = open_sink(url)
        try:
            yield sink
            _warn_unreadable(sink)
        except ContextwrightError as exc:
            fail(describe(exc))
        finally:
            sink.close()
    finally:
        observe_log.removeHandler(quiet)


def _warn_unreadable(sink: SnapshotSink) -> None:
    """One stderr line naming what reads skipped because it is not a snapshot.

    Lines of a JSONL file by number; rows of a database (SQLite, PostgreSQL, Redis) by id.
    """
    if isinstance(sink, JsonlSink):
        lines = sink.unreadable_lines()
        if lines:
            typer.echo(f"warning: skipped {len(lines)} unreadable line(s) of {sink.path.name}: "
                       + _first_few([f"line {number} ({reason})" for number, reason in lines]),
                       err=True)
    elif isinstance(sink, SkipsUnreadableRows):
        rows = sink.unreadable_rows()
        if rows:
            typer.echo(printable(
                f"warning: skipped {len(rows)} unreadable snapshot(s): "
                + _first_few([f"{shown_id(snapshot_id)} ({reason})"
                              for snapshot_id, reason in rows])), err=True)


def _first_few(named: list[str]) -> str:
    """The first three of ``named``, and how many more there are."""
    more = f"; and {len(named) - 3} more" if len(named) > 3 else ""
    return "; ".join(named[:3]) + more


def parse_time(value: str | None, now: float) -> float | None:
    """``15m`` / ``2h`` / ``7d`` ago, or an ISO 8601 time, as Unix time."""
    if value is None:
        return None
    relative = _RELATIVE.fullmatch(value.strip())
    if relative:
        return now - float(relative.group(1)) * _UNITS[relative.group(2)]
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InvalidInputError("times look like 15m, 2h, 7d or an ISO 8601 time") from None


def resolve(sink: SnapshotSink, ref: str) -> Snapshot:
    """A snapshot by id, ``latest``, ``latest~N`` or JSON file."""
    if ref.endswith(".json"):
        return snapshot_from_file(Path(ref))
    match = re.fullmatch(r"latest(?:~(\d+))?", ref)
    if match is None:
        if ref.startswith("latest~"):  # not an id either: say what a ref looks like
            raise InvalidInputError("latest~N takes a whole number N >= 0 (latest~1 is the "
                                    "one before the newest)")
        return sink.get(ref)
    back = int(match.group(1) or 0)
    found = sink.read(SnapshotQuery(limit=back + 1))
    if len(found) <= back:
        raise InvalidInputError(f"the sink holds {len(found)} snapshot(s); {ref} is not one")
    return found[0]


def _resolve_all(url: str, refs: list[str]) -> list[Snapshot]:
    if all(ref.endswith(".json") for ref in refs):
        with library_errors():
            return [snapshot_from_file(Path(ref)) for ref in refs]
    with _opened(url) as sink:
        return [resolve(sink, ref) for ref in refs]


def _print_json(data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (half an emoji, in a message object the caller built) cannot be
        # written as UTF-8; as JSON escapes it reads back the same (``inspect FILE.json``).
        text = json.dumps(data, ensure_ascii=True, indent=2)
    sys.stdout.write(text + "\n")


def _console() -> Console:
    return Console(width=160, soft_wrap=False, highlight=False)


@snapshots_app.command("query")
def query(sink: SinkOption = DEFAULT_SINK,
          plan: Annotated[str | None, typer.Option(help="Only this plan.")] = None,
          mode: Annotated[str | None, typer.Option(help="Only this mode.")] = None,
          source: Annotated[str | None, typer.Option(
              help="Limit the source and item tables to this source.")] = None,
          since: Annotated[str | None, typer.Option(help="15m, 2h, 7d or ISO time.")] = None,
          until: Annotated[str | None, typer.Option(help="15m, 2h, 7d or ISO time.")] = None,
          group_by: Annotated[str, typer.Option(help="plan or mode.")] = "plan",
          top: Annotated[int, typer.Option(min=0, help="Items in the most-dropped table.")
                         ] = 10,
          user: UserOption = None, session: SessionOption = None,
          as_json: JsonOption = False) -> None:
    """Context lengths (p50/p95/max, window share), unused grants, most cut and dropped."""
    if group_by not in ("plan", "mode"):
        fail("--group-by must be plan or mode")
    now = time.time()
    with library_errors():
        chosen = SnapshotQuery(since=parse_time(since, now), until=parse_time(until, now),
                               plan=plan, mode=mode, user_id=user, session_id=session)
    with _opened(sink) as opened:
        snapshots = opened.read(chosen)
    summary = summarize(snapshots, group_by=group_by, source=source,  # type: ignore[arg-type]
                        top=top)
    if as_json:
        _print_json(summary.to_dict())
        return
    from contextwright.observe.view import print_summary

    print_summary(summary, _console())


@snapshots_app.command("list")
def list_snapshots(sink: SinkOption = DEFAULT_SINK,
                   limit: Annotated[int, typer.Option(help="Newest this many.")] = 20,
                   plan: Annotated[str | None, typer.Option(help="Only this plan.")] = None,
                   user: UserOption = None, session: SessionOption = None,
                   as_json: JsonOption = False) -> None:
    """The newest snapshots: id, time, plan, mode, status, tokens."""
    with library_errors():
        chosen = SnapshotQuery(plan=plan, user_id=user, session_id=session, limit=limit)
    with _opened(sink) as opened:
        found = opened.read(chosen)
    rows: list[dict[str, Any]] = [
        {"id": s.id, "created_at": s.created_at, "plan": s.plan, "mode": s.mode,
         "status": s.status, "total_tokens": s.total_tokens, "window": s.window}
        for s in found]
    if as_json:
        _print_json(rows)
        return
    for row in rows:
        when = datetime.fromtimestamp(row["created_at"]).isoformat(timespec="seconds")
        typer.echo(printable(f"{row['id']}  {when}  {row['plan']}  {row['mode'] or '-'}  "
                             f"{row['status']}  {row['total_tokens']}/{row['window']}"))


@snapshots_app.command("show")
def show(ref: Annotated[str, typer.Argument(help="Snapshot id, latest, latest~N.")],
         sink: SinkOption = DEFAULT_SINK, as_json: JsonOption = False,
         messages: Annotated[bool, typer.Option(help="Also print the messages.")] = False
         ) -> None:
    """One snapshot: as JSON (a file ``inspect`` and ``diff`` read back) or as tables."""
    (snapshot,) = _resolve_all(sink, [ref])
    if as_json:
        _print_json(snapshot.to_dict())
        return
    from contextwright.observe.view import print_snapshot

    print_snapshot(snapshot, _console(), messages=messages)


@snapshots_app.command("purge")
def purge(sink: SinkOption = DEFAULT_SINK,
          older_than: Annotated[str | None, typer.Option(
              help="Remove snapshots older than this (15m, 2h, 7d or ISO time).")] = None,
          keep: Annotated[int | None, typer.Option(help="Keep only the newest this many.")] = None
          ) -> None:
    """Apply retention now: by age, by count, or both."""
    if older_than is None and keep is None:
        fail("give --older-than, --keep or both")
    if keep is not None and keep < 0:
        fail("--keep must be 0 or more")
    with library_errors():
        cutoff = parse_time(older_than, time.time())
    with _opened(sink) as opened:
        removed = opened.purge(older_than=cutoff, keep_last=keep)
    typer.echo(f"removed {removed} snapshot(s)")


def _read_request(request: Path) -> Request:
    """The request file (``-``: standard input), read once even when built twice."""
    from contextwright.cli import _read_request as read

    with library_errors():
        return read(request)


def _request_snapshot(request: Request, plan: str | None, tokenizer: str | None) -> Snapshot:
    from contextwright.cli import _load_plan
    from contextwright.observe.replay import snapshot_of

    with library_errors():
        return snapshot_of(_load_plan(plan, request), request, tokenizer=tokenizer)


def inspect(ref: Annotated[str | None, typer.Argument(
                help="Snapshot id, latest, latest~N or a JSON file.")] = None,
            request: Annotated[Path | None, typer.Option(
                help="Build this request file (- reads standard input) now and inspect that "
                "build.")] = None,
            plan: Annotated[str | None, typer.Option(
                help="With --request: shipped plan name or plan file.")] = None,
            tokenizer: Annotated[str | None, typer.Option(help="With --request.")] = None,
            compare: Annotated[str | None, typer.Option(
                help="A second snapshot to compare with (an earlier one, latest~1): show the "
                "diff from it to this build too.")] = None,
            html: Annotated[Path | None, typer.Option(
                "--html", help="Write one self-contained HTML report here.")] = None,
            messages: Annotated[bool, typer.Option(help="Also print the messages.")] = False,
            sink: SinkOption = DEFAULT_SINK) -> None:
    """Look at a build: per source budget vs use, then every item with its fate."""
    if (ref is None) == (request is None):
        fail("give a snapshot or --request FILE (one of them)")
    if request is not None:
        snapshot = _request_snapshot(_read_request(request), plan, tokenizer)
        other = _resolve_all(sink, [compare])[0] if compare else None
    else:
        found = _resolve_all(sink, [ref, *([compare] if compare else [])])  # type: ignore[list-item]
        snapshot, other = found[0], (found[1] if compare else None)
    if html is not None:
        from contextwright.observe.html import render_html

        with library_errors():
            page = render_html(snapshot, other)
        _write_page(html, page)
        typer.echo(f"wrote {printable(str(html))}")
        return
    from contextwright.observe.view import print_diff, print_snapshot

    print_snapshot(snapshot, _console(), messages=messages)
    if other is not None:
        with library_errors():
            compared = diff_snapshots(other, snapshot)  # from the compared build to this one
        print_diff(compared, _console())


def diff(a: Annotated[str | None, typer.Argument(help="First snapshot.")] = None,
         b: Annotated[str | None, typer.Argument(help="Second snapshot.")] = None,
         request: Annotated[Path | None, typer.Option(
             help="Instead: build this request file (- reads standard input) under two --plan "
             "and diff the builds.")] = None,
         plan: Annotated[list[str] | None, typer.Option(
             help="With --request: two plans (shipped names or files).")] = None,
         tokenizer: Annotated[str | None, typer.Option(help="With --request.")] = None,
         sink: SinkOption = DEFAULT_SINK, as_json: JsonOption = False) -> None:
    """Items added / removed / cut differently, token deltas per source, first divergence."""
    if request is not None:
        if a is not None or b is not None or len(plan or []) != 2:
            fail("with --request give exactly two --plan and no snapshots")
        parsed = _read_request(request)
        first, second = (_request_snapshot(parsed, p, tokenizer) for p in plan or [])
    else:
        if a is None or b is None:
            fail("give two snapshots, or --request FILE with two --plan")
        first, second = _resolve_all(sink, [a, b])
    with library_errors():
        result = diff_snapshots(first, second)
    if as_json:
        _print_json(result.to_dict())
        return
    from contextwright.observe.view import print_diff

    print_diff(result, _console())


def _write_page(path: Path, page: str) -> None:
    """Write an HTML report; a path that cannot be written is one error line, exit 2."""
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {printable(str(path))}: {exc.strerror}")


def replay(ref: Annotated[str, typer.Argument(help="Snapshot id, latest, latest~N or file.")],
           plan: Annotated[str, typer.Option(help="Shipped plan name or plan file.")],
           sink: SinkOption = DEFAULT_SINK, as_json: JsonOption = False,
           html: Annotated[Path | None, typer.Option(
               "--html", help="Also write the HTML report of the replayed build, with the diff "
               "from the original, here.")] = None,
           window: Annotated[int | None, typer.Option(
               min=1, help="Model window to replay with (default: the snapshot's).")] = None,
           reserved_output: Annotated[int | None, typer.Option(
               min=0, help="Output reserve to replay with (default: the snapshot's).")] = None,
           available: Annotated[int | None, typer.Option(
               min=1, help="Tokens the replay may use (default: the snapshot's, unless "
               "--window or --reserved-output is given).")] = None,
           ) -> None:
    """Rebuild a snapshot's request under another plan and show the diff.

    The window, output reserve and available tokens are the snapshot's (a builder's model or
    --budget may have set them), not the plan's, unless --window / --reserved-output /
    --available are given.
    """
    from contextwright.cli import _load_plan
    from contextwright.observe.replay import replay as run_replay

    (snapshot,) = _resolve_all(sink, [ref])
    with library_errors():
        result = run_replay(snapshot, _load_plan(plan, None),  # type: ignore[arg-type]
                            window=window, reserved_output=reserved_output,
                            available=available)
    if html is not None:
        from contextwright.observe.html import render_html

        with library_errors():
            page = render_html(result.replayed, result.original)
        _write_page(html, page)
    if as_json:
        _print_json({"replayed": result.replayed.to_dict(), "diff": result.diff.to_dict(),
                     "missing_sources": list(result.missing_sources),
                     "notes": list(result.notes)})
        return
    from contextwright.observe.view import print_diff

    if result.missing_sources:
        typer.echo("not in the request, so not replayed: "
                   + ", ".join(result.missing_sources))
    for note in result.notes:
        typer.echo(f"note: {note}")
    for warning in result.replayed.warnings:
        typer.echo(printable(f"warning (replayed build): {warning}"))
    print_diff(result.diff, _console())
