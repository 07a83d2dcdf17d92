"""``contextwright session list|show|export|erase``: look after stored sessions from the shell.

The store comes from ``--store`` (or ``CONTEXTWRIGHT_STORE``), a URL as ``open_store`` reads it;
the default is ``sqlite:///contextwright.db`` in the working directory. These commands look after
sessions that exist, so a SQLite file or a PostgreSQL schema that does not is refused rather than
created (a mistyped path or ``?schema=`` would otherwise show an empty store). Ids and content
are printed escaped: a stored id may hold newlines or terminal escapes. Every failure is one
line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from contextwright.cli_common import OneLineUsageErrors, describe, fail, library_errors, printable
from contextwright.compress.summarize import Summary
from contextwright.errors import ContextwrightError
from contextwright.modes.zones import render_zone
from contextwright.session.state import SessionState
from contextwright.session.store import (
    MAX_SEQ,
    SessionKey,
    Store,
    _postgres_url_options,
    open_store,
    parse_store_url,
    validate_id,
)

session_app = typer.Typer(cls=OneLineUsageErrors, add_completion=False,
                          no_args_is_help=True,
                          help="List, show, export and erase stored sessions.")

StoreOption = Annotated[str, typer.Option(
    "--store", envvar="CONTEXTWRIGHT_STORE",
    help="Store URL: sqlite:///file.db, redis://…, postgresql://…")]
UserOption = Annotated[str, typer.Option("--user", help="The user id.")]
SessionOption = Annotated[str, typer.Option("--session", help="The session id.")]
DEFAULT_STORE = "sqlite:///contextwright.db"


@contextmanager
def _opened(url: str) -> Iterator[Store]:
    _refuse_missing_sqlite(url)
    with library_errors():
        store = _open_existing(url)
    try:
        yield store
    except ContextwrightError as exc:
        fail(describe(exc))
    finally:
        store.close()


def _open_existing(url: str) -> Store:
    """The store at ``url``; a PostgreSQL one only if its schema holds a store already."""
    kind, target, schema = parse_store_url(url)
    if kind != "postgresql":
        return open_store(url)
    from contextwright.session.postgres import PostgresStore

    dsn, options = _postgres_url_options(target)
    return PostgresStore(dsn, schema=schema, create=False, **options)


def _refuse_missing_sqlite(url: str) -> None:
    """Fail unless a ``sqlite:///path`` URL names an existing file (opening would create it).

    The URL is read as ``open_store`` reads it, so a malformed one (``?timeout=30``) is refused
    for what is wrong with it, not as a file that does not exist.
    """
    with library_errors():
        kind, target, _ = parse_store_url(url)
    if kind != "sqlite" or target == ":memory:":
        return  # other stores are open_store's to judge
    path = Path(target)
    if not path.is_file():
        fail(f"no SQLite database at {printable(str(path))} (check --store; these commands "
             "never create one)")
    _refuse_foreign_sqlite(path)


STORE_TABLES = frozenset(("sessions", "messages", "states"))
"""Tables every SQLite session store has had: a database without them is not one."""


def _refuse_foreign_sqlite(path: Path) -> None:
    """Fail unless the SQLite file at ``path`` holds a session store.

    Opening a store creates its tables: pointed at another program's database (or an empty
    file), ``list`` would add them to it and show an empty store. Read-only here, so nothing
    is written to a file that turns out not to be a store.
    """
    shown = printable(str(path))
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError:
        return  # locked, unreadable...: the store's own opening says what is wrong
    except sqlite3.DatabaseError:
        fail(f"{shown} is not a SQLite database (check --store)")
    missing = sorted(STORE_TABLES - tables)
    if missing:
        fail(f"{shown} is a SQLite database but not a session store (no table "
             f"{', '.join(missing)}; check --store: these commands never add them)")


def _key(user: str, session: str) -> SessionKey:
    try:
        return SessionKey(user_id=user, session_id=session)
    except ContextwrightError as exc:
        fail(describe(exc))


def _check_user(user: str) -> None:
    """Fail unless ``user`` is a user id a store takes."""
    try:
        validate_id(user, "user_id")
    except ContextwrightError as exc:
        fail(describe(exc))


@session_app.command("list")
def list_sessions(store: StoreOption = DEFAULT_STORE,
                  user: Annotated[str | None, typer.Option(help="Only this user.")] = None,
                  as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List sessions with their message counts."""
    with _opened(store) as opened:
        infos = opened.list_sessions(user)
    rows = [{"user_id": i.key.user_id, "session_id": i.key.session_id,
             "messages": i.message_count, "updated_at": i.updated_at} for i in infos]
    if as_json:
        _print_json(rows)
        return
    for info in infos:
        typer.echo(f"{printable(info.key.user_id)}\t{printable(info.key.session_id)}\t"
                   f"{info.message_count} messages")


@session_app.command()
def show(user: UserOption, session: SessionOption, store: StoreOption = DEFAULT_STORE,
         last: Annotated[int, typer.Option(help="Messages to show.", min=0,
                                           max=MAX_SEQ)] = 20,
         as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show a session's mode, mode history, summary, zones and last messages (with their calls)."""
    key = _key(user, session)
    with _opened(store) as opened:
        document = _existing_session(opened, key, last=last)
    if as_json:
        _print_json(document)
        return
    with library_errors():
        state = SessionState.from_dict(document["state"] or {})
    memory = _memory(state)  # before anything is printed: a malformed part fails the command
    typer.echo(f"session {printable(user)}/{printable(session)}: "
               f"{document['message_count']} messages, "
               f"mode {_mode_shown(state.mode)}, summary covers up to #{state.summary_upto}")
    for switch in state.mode_history:
        typer.echo(printable(f"  switch #{switch.at_seq}: {switch.old_mode} -> "
                             f"{switch.new_mode} ({switch.basis} {switch.trigger!r})"))
    for heading, text in memory:
        typer.echo(f"{heading}:")
        for line in text.splitlines():
            typer.echo(f"  {printable(line)}")
    for entry in document["messages"]:
        role = printable(str(entry["message"].get("role")))
        typer.echo(f"  #{entry['seq']} {role}: {printable(_message_line(entry['message']))}")


def _mode_shown(mode: str | None) -> str:
    """The session's mode as ``show`` prints it: a session no manager has routed has none."""
    return "(not routed yet)" if mode is None else printable(mode)


_SHOWN = 100
"""Characters shown of a message's text, and of each of its calls."""


def _memory(state: SessionState) -> list[tuple[str, str]]:
    """The session's running summary and non-empty zones as (heading, text)."""
    language = state.language or "en"
    parts = []
    if state.summary:
        with library_errors():
            parts.append(("summary", Summary.from_dict(state.summary).render(language)))
    for name in ("facts", "task", "tools"):
        text = render_zone(name, state.zones, language, heading=False)
        if text:
            parts.append((f"zone {name}", text))
    return parts


def _message_line(message: Mapping[str, Any]) -> str:
    """A stored message on one line: its text (images as ``[image]``), then each call it made.

    An assistant's refusal (the ``refusal`` field with no content, or a refusal part) is shown
    by its words, as a build reads it: it is the answer the model gave.
    """
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(_part_text(part) for part in content if isinstance(part, Mapping))
    refusal = message.get("refusal")
    if not content and isinstance(refusal, str):
        content = refusal
    text = " ".join(str(content or "").split())[:_SHOWN]
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        calls.append(f"→ {function.get('name')}({str(function.get('arguments', ''))[:_SHOWN]})")
    return " ".join([text, *calls]).strip()


def _part_text(part: Mapping[str, Any]) -> str:
    """A content part as ``show`` prints it: text and refusals by their words, images marked."""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "refusal":
        return str(part.get("refusal", ""))
    return "[image]"


@session_app.command()
def export(user: UserOption, session: SessionOption, store: StoreOption = DEFAULT_STORE,
           out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
           ) -> None:
    """Export a session (every message and the state) as JSON."""
    key = _key(user, session)
    with _opened(store) as opened:
        document = _existing_session(opened, key, last=None)
    text = json.dumps(document, ensure_ascii=True, indent=2) + "\n"
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text, "ascii")
    except OSError as exc:
        fail(f"cannot write {printable(str(out))}: {exc.strerror or type(exc).__name__}")


@session_app.command()
def erase(user: UserOption, store: StoreOption = DEFAULT_STORE,
          session: Annotated[str | None, typer.Option(
              help="Only this session (default: every session of the user).")] = None,
          yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False) -> None:
    """Erase one session, or everything of a user."""
    # The ids are checked before asking: a blank --session asked to erase every session of
    # the user, and was refused only once that was confirmed.
    _check_user(user)
    key = _key(user, session) if session is not None else None
    what = (f"session {printable(user)}/{printable(session)}" if session is not None
            else f"every session of user {printable(user)}")
    if not yes and not typer.confirm(f"Erase {what}?"):
        raise typer.Exit(1)
    with _opened(store) as opened:
        if key is not None:
            erased = int(opened.erase_session(key))
        else:
            erased = opened.erase_user(user)
    # Nothing to erase is no failure: what was asked for (no such session) holds, so a script
    # that erases a user's data on request need not tell "gone already" from "erased now". It
    # is said, though: a mistyped id must not read as done.
    if erased:
        typer.echo(f"erased {erased} session(s)")
    elif key is not None:
        typer.echo(f"nothing erased: no session {printable(user)}/{printable(key.session_id)}")
    else:
        typer.echo(f"nothing erased: user {printable(user)} has no sessions")


def _existing_session(store: Store, key: SessionKey, *, last: int | None) -> dict[str, Any]:
    """The session's document; exit 2 when it has neither messages nor state (no such session)."""
    document = _session_document(store, key, last=last)
    if document["message_count"] == 0 and document["state"] is None:
        fail(f"no such session {printable(key.user_id)}/{printable(key.session_id)}")
    return document


def _session_document(store: Store, key: SessionKey, *, last: int | None) -> dict[str, Any]:
    record = store.get_state(key)
    messages = store.read(key, last=last)
    return {
        "user_id": key.user_id, "session_id": key.session_id,
        "message_count": store.count(key),
        "state": dict(record.data) if record else None,
        "state_version": record.version if record else None,
        "messages": [{"seq": m.seq, "created_at": m.created_at, "message": dict(m.message)}
                     for m in messages],
    }


def _print_json(data: object) -> None:
    # ASCII escapes keep lone surrogates printable on any terminal and lossless for json.loads.
    sys.stdout.write(json.dumps(data, ensure_ascii=True, indent=2) + "\n")
