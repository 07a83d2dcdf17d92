"""``contextwright session list|show|export|erase``: look after stored sessions from the shell.

The store comes from ``--store`` (or ``CONTEXTWRIGHT_STORE``), a URL as ``open_store`` reads it;
the default is ``sqlite:///contextwright.db`` in the working directory.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from contextwright.errors import ContextwrightError
from contextwright.session.state import SessionState
from contextwright.session.store import SessionKey, Store, open_store

session_app = typer.Typer(add_completion=False, no_args_is_help=True,
                          help="List, show, export and erase stored sessions.")

StoreOption = Annotated[str, typer.Option(
    "--store", envvar="CONTEXTWRIGHT_STORE",
    help="Store URL: sqlite:///file.db, redis://…, postgresql://…")]
UserOption = Annotated[str, typer.Option("--user", help="The user id.")]
SessionOption = Annotated[str, typer.Option("--session", help="The session id.")]
DEFAULT_STORE = "sqlite:///contextwright.db"


@contextmanager
def _opened(url: str) -> Iterator[Store]:
    try:
        store = open_store(url)
    except ContextwrightError as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        yield store
    except ContextwrightError as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    finally:
        store.close()


def _key(user: str, session: str) -> SessionKey:
    try:
        return SessionKey(user_id=user, session_id=session)
    except ContextwrightError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


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
    for row in rows:
        typer.echo(f"{row['user_id']}\t{row['session_id']}\t{row['messages']} messages")


@session_app.command()
def show(user: UserOption, session: SessionOption, store: StoreOption = DEFAULT_STORE,
         last: Annotated[int, typer.Option(help="Messages to show.")] = 20,
         as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show a session's mode, mode history, summary, zones and last messages."""
    key = _key(user, session)
    with _opened(store) as opened:
        document = _session_document(opened, key, last=last)
    if document["message_count"] == 0 and document["state"] is None:
        typer.echo("error: no such session", err=True)
        raise typer.Exit(1)
    if as_json:
        _print_json(document)
        return
    state = SessionState.from_dict(document["state"] or {})
    typer.echo(f"session {user}/{session}: {document['message_count']} messages, "
               f"mode {state.mode}, summary covers up to #{state.summary_upto}")
    for switch in state.mode_history:
        typer.echo(f"  switch #{switch.at_seq}: {switch.old_mode} -> {switch.new_mode} "
                   f"({switch.basis} {switch.trigger!r})")
    for entry in document["messages"]:
        content = _printable(str(entry["message"].get("content") or "")[:100])
        typer.echo(f"  #{entry['seq']} {entry['message'].get('role')}: {content}")


@session_app.command()
def export(user: UserOption, session: SessionOption, store: StoreOption = DEFAULT_STORE,
           out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
           ) -> None:
    """Export a session (every message and the state) as JSON."""
    key = _key(user, session)
    with _opened(store) as opened:
        document = _session_document(opened, key, last=None)
    text = json.dumps(document, ensure_ascii=True, indent=2) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, "ascii")


@session_app.command()
def erase(user: UserOption, store: StoreOption = DEFAULT_STORE,
          session: Annotated[str | None, typer.Option(
              help="Only this session (default: every session of the user).")] = None,
          yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False) -> None:
    """Erase one session, or everything of a user."""
    what = f"session {user}/{session}" if session else f"every session of user {user}"
    if not yes and not typer.confirm(f"Erase {what}?"):
        raise typer.Exit(1)
    with _opened(store) as opened:
        if session is not None:
            erased = int(opened.erase_session(_key(user, session)))
        else:
            erased = opened.erase_user(user)
    typer.echo(f"erased {erased} session(s)")


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


def _printable(text: str) -> str:
    # Stored content may hold lone surrogates and control characters (they round-trip
    # exactly); a terminal line shows them escaped instead of failing.
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in escaped)


def _print_json(data: object) -> None:
    # ASCII escapes keep lone surrogates printable on any terminal and lossless for json.loads.
    sys.stdout.write(json.dumps(data, ensure_ascii=True, indent=2) + "\n")
