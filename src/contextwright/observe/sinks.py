"""Where snapshots are kept: the ``SnapshotSink`` protocol, JSONL and SQLite sinks, ``open_sink``.

SQLite is the embedded default (one file, WAL, safe for a writer and many readers); JSONL is an
append-only file for shipping elsewhere; Redis and PostgreSQL (``sinks_redis``,
``sinks_postgres``) keep a fleet's snapshots next to its sessions. Every sink stores the
snapshot's JSON and indexes its time, plan, mode and status, so a query reads only what it asks
for; SQLite and PostgreSQL also index the session's user and session ids (as the snapshot keeps
them, hashed or not), while Redis and JSONL read the time range and filter. Errors are the store
errors: ``StoreUnavailable``, ``StoreError``, ``CorruptRecordError``. A stored snapshot that
cannot be read (damaged, or of a newer version's layout) hides no other: reads skip it with a
warning and list it (``JsonlSink.unreadable_lines``, ``unreadable_rows`` of the others), and
``get`` of it is a ``CorruptRecordError`` naming it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar, runtime_checkable

from contextwright.errors import CorruptRecordError, InvalidInputError, StoreError
from contextwright.observe.jsonl_index import IndexRow, JsonlIndex
from contextwright.observe.snapshot import (
    OTHER_LAYOUT,
    Snapshot,
    identifier_forms,
    snapshot_key,
)
from contextwright.session.store import validate_id

T = TypeVar("T")

logger = logging.getLogger("contextwright.observe")


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotQuery:
    """Which snapshots to read; every field left out matches all."""

    since: float | None = None
    """Unix time: only snapshots made at or after it."""
    until: float | None = None
    """Unix time: only snapshots made before it."""
    plan: str | None = None
    """Only builds of this plan, or grown from it (``simple_qa`` also finds ``simple_qa+history``,
    a build that added the history its request held)."""
    mode: str | None = None
    """Only builds in this mode."""
    status: str | None = None
    """``ok`` or ``budget_error``."""
    user_id: str | None = None
    """Only a manager's builds for this user: the id as given, found in clear (unredacted
    snapshots) or hashed (``identifier_forms``: with the key of ``fence_secret`` or the built-in
    one, or as plain SHA-256 in records written before keyed hashing)."""
    session_id: str | None = None
    """Only builds of this session, matched as ``user_id`` is."""
    limit: int | None = None
    """Only the newest this many (still returned oldest first)."""
    fence_secret: str | bytes | None = field(default=None, repr=False, compare=False)
    """The deployment's secret the snapshots were recorded with (default
    ``CONTEXTWRIGHT_FENCE_SECRET``); read only when ``user_id`` or ``session_id`` is given."""
    user_forms: frozenset[str] = field(init=False, repr=False, compare=False)
    """Every form a snapshot may keep ``user_id`` in (empty: any user)."""
    session_forms: frozenset[str] = field(init=False, repr=False, compare=False)
    """Every form a snapshot may keep ``session_id`` in (empty: any session)."""

    def __post_init__(self) -> None:
        """Check the ids and the limit (``InvalidInputError``); hash the ids for every form."""
        if self.limit is not None and (type(self.limit) is not int or self.limit < 0):
            raise InvalidInputError("a snapshot query's limit is a whole number >= 0")
        key = snapshot_key(self.fence_secret) if self.by_session else b""
        object.__setattr__(self, "user_forms", _forms(self.user_id, "user_id", key))
        object.__setattr__(self, "session_forms", _forms(self.session_id, "session_id", key))

    def matches(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot`` is one this query asks for (the limit aside)."""
        session = snapshot.session or {}
        return self.matches_fields(snapshot.created_at, snapshot.plan, snapshot.mode,
                                   snapshot.status, session.get("user_id"),
                                   session.get("session_id"))

    def matches_fields(self, created_at: float, plan: str, mode: str | None, status: str,
                       user_id: str | None, session_id: str | None) -> bool:
        """``matches`` for a snapshot known by these fields (as an index holds them)."""
        return ((self.since is None or created_at >= self.since)
                and (self.until is None or created_at < self.until)
                and (self.plan is None or plan == self.plan or plan.startswith(self.plan + "+"))
                and (self.mode is None or mode == self.mode)
                and (self.status is None or status == self.status)
                and (not self.user_forms or user_id in self.user_forms)
                and (not self.session_forms or session_id in self.session_forms))

    @property
    def by_session(self) -> bool:
        """Whether the query names a user or session.

        A sink without an index on them reads the rest of the query, then filters.
        """
        return self.user_id is not None or self.session_id is not None


def _forms(value: str | None, name: str, key: bytes) -> frozenset[str]:
    """Every form of the id ``value`` (empty when None).

    ``InvalidInputError`` for an id no session can have (``validate_id``).
    """
    return frozenset() if value is None else identifier_forms(validate_id(value, name), key)


class SnapshotSink(Protocol):
    """Keeps snapshots. ``write`` is called from one writer thread; reads from any thread."""

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Store a batch of snapshots."""
        ...

    def read(self, query: SnapshotQuery | None = None) -> list[Snapshot]:
        """The snapshots ``query`` asks for, oldest first."""
        ...

    def get(self, snapshot_id: str) -> Snapshot:
        """One snapshot; ``InvalidInputError`` when there is none with that id."""
        ...

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        """Remove snapshots made before ``older_than`` and all but the newest ``keep_last``."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


def not_found(snapshot_id: str) -> InvalidInputError:
    """The error of a ``get`` for an id the sink does not hold."""
    shown = snapshot_id if snapshot_id.isalnum() and len(snapshot_id) <= 40 else "given"
    return InvalidInputError(f"no snapshot with id {shown}")


_PLAIN_ID = re.compile(r"[\w.:-]{1,80}", re.ASCII)


def shown_id(snapshot_id: str) -> str:
    """A stored snapshot's id as a message shows it: as it is when plain, else quoted and cut.

    A row written by another program may have any id; shown raw it could break a log line.
    """
    return snapshot_id if _PLAIN_ID.fullmatch(snapshot_id) else repr(snapshot_id[:80])


def stored_snapshot(snapshot_id: str, body: str | bytes) -> Snapshot:
    """The snapshot a sink holds under ``snapshot_id`` (for ``get``).

    ``CorruptRecordError`` naming the snapshot when its body cannot be read.
    """
    try:
        return Snapshot.from_json(body)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"snapshot {shown_id(snapshot_id)} cannot be read: {exc}"
                                 ) from None


@runtime_checkable
class SkipsUnreadableRows(Protocol):
    """A sink whose reads skip the stored snapshots they cannot read, and list them."""

    def unreadable_rows(self) -> list[tuple[str, str]]:
        """The snapshots reads skipped: id, why."""
        ...


class UnreadableRows:
    """The stored snapshots one sink's reads skipped because they cannot be read: id, why.

    A row damaged, or written by a newer version in a layout this one does not read, must not
    hide the others: reads skip it, a warning names it once, and ``listed`` keeps it until a
    purge (which may have removed it). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._skipped: dict[str, str] = {}
        self._logged: set[str] = set()

    def parse(self, rows: Iterable[tuple[str, str | bytes]]) -> list[Snapshot]:
        """The snapshots of ``rows`` (id, body), in their order; those not readable skipped."""
        snapshots = []
        for snapshot_id, body in rows:
            try:
                snapshots.append(Snapshot.from_json(body))
            except CorruptRecordError as exc:
                # The reason names a field, never its value, so it is safe to log and keep.
                self._skip(snapshot_id, str(exc))
        return snapshots

    def _skip(self, snapshot_id: str, reason: str) -> None:
        with self._lock:
            self._skipped[snapshot_id] = reason
            first = snapshot_id not in self._logged
            self._logged.add(snapshot_id)
        if first:
            logger.warning("snapshot %s is not readable (%s); reads skip it",
                           shown_id(snapshot_id), reason,
                           extra={"contextwright": {"event": "snapshot_row_unreadable"}})

    def listed(self) -> list[tuple[str, str]]:
        """The rows skipped since the sink was opened or last purged, by id."""
        with self._lock:
            return sorted(self._skipped.items())

    def purged(self) -> None:
        """Forget the rows skipped: a purge may have removed them.

        The next read finds those still there again, without logging them twice.
        """
        with self._lock:
            self._skipped.clear()


def read_sql(query: SnapshotQuery, fetch: Callable[[str, list[object]], Sequence[Any]], *,
             table: str, placeholder: str, session_id: str | None,
             unreadable: UnreadableRows, body: str = "body") -> list[Snapshot]:
    """The snapshots ``query`` asks for of a SQL sink, oldest first (``select_sql``'s rows).

    ``fetch`` runs a SELECT and returns its (id, body) rows; ``body`` is the SQL the body is
    read with (``select_sql``). Rows that are not readable
    snapshots are skipped (``unreadable``); when the SQL applied the query's limit, the
    skipped ones are made up for by asking for as many more, so a limit counts snapshots.
    """
    # The limit the SQL applies: none when the caller filters by user or session itself.
    limit = None if query.by_session and session_id is None else query.limit
    asked = query
    while True:
        sql, params = select_sql(asked, table, placeholder, session_id, body)
        rows = fetch(sql, params)  # newest first
        snapshots = unreadable.parse((row[0], row[1]) for row in reversed(rows))
        if limit is None or len(snapshots) >= limit or len(rows) < (asked.limit or 0):
            break
        # The newest rows hold unreadable ones: as many more rows than the limit hold the rest.
        asked = replace(query, limit=limit + len(rows) - len(snapshots))
    return newest(snapshots, query) if query.by_session else snapshots


def newest(snapshots: list[Snapshot], query: SnapshotQuery) -> list[Snapshot]:
    """``snapshots`` (oldest first) filtered by ``query``, cut to its limit."""
    chosen = [s for s in snapshots if query.matches(s)]
    chosen.sort(key=lambda s: (s.created_at, s.id))
    return newest_of(chosen, query.limit)


def newest_of(ordered: list[T], limit: int | None) -> list[T]:
    """The last ``limit`` of ``ordered`` (all when None; none for 0, where ``[-0:]`` is all)."""
    if limit is None:
        return ordered
    return ordered[-limit:] if limit else []


class JsonlSink:
    """Snapshots as JSON lines appended to one file (created with its folder if missing).

    Beside it, ``<file>.idx`` indexes each line's place and the fields queries filter on
    (``observe.jsonl_index``), so a query parses only the snapshots it returns. The index is
    checked against the file and extended or rebuilt when it does not describe it (a file
    written by an older version is indexed on its first read, once).

    Several processes may append to and purge one file: appends and purges hold a lock on the
    file shared by every process (``flock``), so a purge never drops what another process
    appends meanwhile. A line that is not a snapshot (one cut short by a crash) is skipped with
    a warning and listed by ``unreadable_lines``; ``get`` of a snapshot whose line is in a
    layout this version does not read raises ``CorruptRecordError`` naming it. A file that only
    needs reading needs no write access to it or its folder.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            if not self.path.exists():  # an existing file is only read here
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.touch(exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot open snapshot file {self.path.name}: {exc.strerror}"
                             ) from None
        self._index = JsonlIndex(self.path)
        with self._lock:
            self._index.rows()  # index what is there; an empty new file gets its header

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Append one line per snapshot, flush, and index them.

        A file that does not end in a newline (an append cut short) gets one first, so the new
        lines stay whole and only the cut one is unreadable.
        """
        lines = [(s.to_json() + "\n").encode("utf-8") for s in snapshots]
        with self._locked("a+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = b""
            if size:
                handle.seek(size - 1)
                start = b"" if handle.read(1) == b"\n" else b"\n"
            handle.write(start + b"".join(lines))  # appended at the end, wherever we read
            handle.flush()
            # In append mode the file's end is where this write ended: the lines' offsets
            # follow from it.
            at = handle.tell() - sum(len(line) for line in lines)
            rows = []
            for snapshot, line in zip(snapshots, lines, strict=True):
                rows.append(IndexRow.of(snapshot, at, len(line)))
                at += len(line)
            self._index.appended(rows)

    def unreadable_lines(self) -> list[tuple[int, str]]:
        """The lines reads skip because they are not snapshots: line number (from 1), why."""
        with self._lock:
            self._index.rows()
            return self._index.unreadable()

    def read(self, query: SnapshotQuery | None = None) -> list[Snapshot]:
        """The snapshots ``query`` asks for: the index filtered, then only those lines read."""
        query = query or SnapshotQuery()
        with self._lock:
            rows = [row for row in self._index.rows() if row.id is not None
                    and query.matches_fields(row.created_at, row.plan, row.mode, row.status,
                                             row.user_id, row.session_id)]
            rows.sort(key=lambda row: (row.created_at, row.id or ""))
            return self._snapshots(newest_of(rows, query.limit))

    def get(self, snapshot_id: str) -> Snapshot:
        """The snapshot with this id (found in the index, then read).

        ``CorruptRecordError`` naming it when its line holds it in a layout this version does
        not read (an upgraded process's, in a shared file).
        """
        with self._lock:
            rows = self._index.rows()
            for row in rows:
                if row.id == snapshot_id:  # none when its line changed to one unreadable
                    found = self._snapshots([row])
                    if found:
                        return found[0]
            self._refuse_unreadable(snapshot_id, [row for row in rows if row.unreadable])
        raise not_found(snapshot_id)

    def _refuse_unreadable(self, snapshot_id: str, unreadable: list[IndexRow]) -> None:
        """``CorruptRecordError`` when one of the ``unreadable`` lines names ``snapshot_id``.

        Only a ``get`` of an id the readable lines lack reads them: such lines are few.
        """
        with self._file("rb") as handle:
            for row in unreadable:
                handle.seek(row.at)
                try:
                    data = json.loads(handle.read(row.size))
                except (ValueError, RecursionError):
                    continue  # not JSON: no id to name
                if isinstance(data, dict) and data.get("id") == snapshot_id:
                    raise CorruptRecordError(
                        f"snapshot {shown_id(snapshot_id)} cannot be read: {row.unreadable}")

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        """Rewrite the file without the removed lines (atomically: a new file replaces it).

        A snapshot of a layout this version cannot read (appended by an upgraded process
        sharing the file) stays where it is: its age is unknown here, and it is not this
        version's to remove. Lines that are no snapshot at all (cut short by a crash) go.
        """
        with self._locked("rb") as source:  # no append, from any process, lands meanwhile
            lines = self._index.rows()
            rows = [row for row in lines if row.id is not None]
            keep = [row for row in rows if older_than is None or row.created_at >= older_than]
            keep.sort(key=lambda row: (row.created_at, row.id or ""))
            if keep_last is not None:
                keep = keep[max(0, len(keep) - keep_last):] if keep_last else []
            if len(keep) == len(rows):
                return 0
            kept = {row.at for row in keep}
            self._replace_with([row for row in lines if row.at in kept or (
                row.unreadable or "").startswith(OTHER_LAYOUT)], source)
        return len(rows) - len(keep)

    def close(self) -> None:
        """Nothing stays open between writes."""

    def _snapshots(self, rows: list[IndexRow]) -> list[Snapshot]:
        """The snapshots of ``rows``, in that order; each line must hold the one indexed."""
        try:
            return self._read_lines(rows)
        except _StaleIndex:
            fresh = {row.id: row for row in self._index.rebuild()}
            return self._read_lines([fresh[row.id] for row in rows if row.id in fresh])

    def _read_lines(self, rows: list[IndexRow]) -> list[Snapshot]:
        snapshots = []
        with self._file("rb") as handle:
            for row in rows:
                handle.seek(row.at)
                line = handle.read(row.size)
                try:
                    snapshot = Snapshot.from_json(line)
                except CorruptRecordError:
                    raise _StaleIndex from None
                if snapshot.id != row.id:
                    raise _StaleIndex
                snapshots.append(snapshot)
        return snapshots

    def _replace_with(self, keep: list[IndexRow], source: IO[bytes]) -> None:
        """Write the kept lines (copied as they are) to a new file that replaces this one."""
        temporary = self.path.with_name(self.path.name + ".tmp")
        kept, at = [], 0
        try:
            with open(temporary, "wb") as target:
                for row in keep:
                    source.seek(row.at)
                    target.write(source.read(row.size))
                    kept.append(replace(row, at=at))
                    at += row.size
            self._index.replaced(kept, os.stat(temporary).st_ino)
            os.replace(temporary, self.path)
        except OSError as exc:
            raise StoreError(f"snapshot file {self.path.name}: {exc.strerror}") from None

    @contextmanager
    def _file(self, mode: str) -> Iterator[IO[bytes]]:
        try:
            with open(self.path, mode) as handle:
                yield handle
        except OSError as exc:
            raise StoreError(f"snapshot file {self.path.name}: {exc.strerror}") from None

    @contextmanager
    def _locked(self, mode: str) -> Iterator[IO[bytes]]:
        """The file opened in ``mode``, locked against other threads and processes meanwhile.

        A purge replaces the file while holding the lock on it: a process that was waiting
        for that lock then holds it on the replaced file, so it opens the file again.
        """
        with self._lock:
            while True:
                with self._file(mode) as handle:
                    _lock_file(handle, self.path.name)
                    if _is_current(handle, self.path):
                        yield handle
                        return


def _lock_file(handle: IO[bytes], name: str) -> None:
    """Hold an exclusive lock on ``handle``'s file until it is closed (none on Windows)."""
    if sys.platform == "win32":
        return
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    except OSError as exc:
        raise StoreError(f"cannot lock snapshot file {name}: {exc.strerror}") from None


def _is_current(handle: IO[bytes], path: Path) -> bool:
    """Whether ``handle`` is still open on the file at ``path`` (not on one replaced)."""
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


class _StaleIndex(Exception):
    """A line read through the index is not the snapshot the index names there."""


_SQLITE_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS snapshots (
        id TEXT PRIMARY KEY, created_at REAL NOT NULL, plan TEXT NOT NULL, mode TEXT,
        status TEXT NOT NULL, body TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS snapshots_by_time ON snapshots (created_at)",
    "CREATE INDEX IF NOT EXISTS snapshots_by_plan ON snapshots (plan, created_at)",
)
_SQLITE_BODY = "CAST(body AS BLOB)"
"""A body as SQLite reads it for a snapshot: as bytes, decoded by the parser. Read as text, one
body that is not UTF-8 (damaged, or stored by another program) failed the whole SELECT."""
_SQLITE_SESSION_ID = "json_extract(body, '$.session.{name}')"
"""A snapshot's session ``user_id`` or ``session_id`` in SQLite, as its index reads it."""
_SQLITE_SESSION_INDEXES = tuple(
    f"CREATE INDEX IF NOT EXISTS snapshots_by_{name} ON snapshots "
    f"({_SQLITE_SESSION_ID.format(name=name)}, created_at)"
    for name in ("user_id", "session_id"))
"""Indexes on the session's ids inside the body: no column to fill, so a writer of an older
version still keeps them up to date, and snapshots stored before are indexed when the index
is made (the first open by this version reads every stored body once)."""


def query_sql(query: SnapshotQuery, placeholder: str,
              session_id: str | None = None) -> tuple[str, list[object]]:
    """The WHERE clause (and its parameters) of ``query`` for a SQL sink.

    ``session_id`` is the SQL of a snapshot's session id (``{name}`` stands for ``user_id`` or
    ``session_id``) when the sink indexes it; the user and session filters are then in the
    clause too, else the caller filters the rows (``read_sql``).
    """
    clauses: list[str] = []
    params: list[object] = []
    if session_id is not None:
        for name, forms in (("user_id", query.user_forms),
                            ("session_id", query.session_forms)):
            if forms:
                marks = ", ".join(placeholder for _ in forms)
                clauses.append(f"{session_id.format(name=name)} IN ({marks})")
                params.extend(sorted(forms))
    for column, op, value in (("created_at", ">=", query.since), ("created_at", "<", query.until),
                              ("mode", "=", query.mode), ("status", "=", query.status)):
        if value is not None:
            clauses.append(f"{column} {op} {placeholder}")
            params.append(value)
    if query.plan is not None:  # the plan, or one grown from it (``SnapshotQuery.plan``)
        clauses.append(f"(plan = {placeholder} OR substr(plan, 1, {placeholder}) = {placeholder})")
        params.extend((query.plan, len(query.plan) + 1, query.plan + "+"))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


_NEWEST_FIRST = " ORDER BY created_at DESC, id DESC"


def select_sql(query: SnapshotQuery, table: str, placeholder: str,
               session_id: str | None = None, body: str = "body") -> tuple[str, list[object]]:
    """The SELECT of the ids and bodies ``query`` asks for, newest first, and its parameters.

    The limit is applied in SQL unless the query names a user or session the sink cannot
    index (``session_id`` None: the caller filters, then cuts). A query by user or session
    with a limit asks each form of the id apart, newest first, and merges the answers: with an
    equality on the id the planner walks that id's index in time order and stops after the
    limit. Asked for all forms at once (``IN``), PostgreSQL walked the time index instead and
    parsed every newer snapshot's body to test its id (47 ms against 0.08 ms for 5 of 5,000).
    ``body`` is the SQL the body column is read with.
    """
    where, params = query_sql(query, placeholder, session_id)
    select = f"SELECT id, {body} FROM {table}{where}{_NEWEST_FIRST}"
    if query.limit is None or (query.by_session and session_id is None):
        return select, params
    if not query.by_session or session_id is None:
        return f"{select} LIMIT {placeholder}", [*params, query.limit]
    name, forms = (("session_id", query.session_forms) if query.session_forms
                   else ("user_id", query.user_forms))
    id_column = session_id.format(name=name)
    branches: list[str] = []
    merged: list[object] = []
    for number, form in enumerate(sorted(forms)):
        branches.append(
            f"SELECT id, created_at, body FROM (SELECT id, created_at, body FROM {table}{where}"
            f" AND {id_column} = {placeholder}{_NEWEST_FIRST} LIMIT {placeholder}) AS form{number}")
        merged += [*params, form, query.limit]
    union = " UNION ALL ".join(branches)
    return (f"SELECT id, {body} FROM ({union}) AS picked{_NEWEST_FIRST} LIMIT {placeholder}",
            [*merged, query.limit])


class SqliteSink:
    """Snapshots in a SQLite file (WAL; one writer thread, readers anywhere).

    A row that is not a snapshot this version reads (damaged, or of a newer layout) is skipped
    by reads with a warning and listed by ``unreadable_rows``; ``get`` of it raises
    ``CorruptRecordError`` naming it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._unreadable = UnreadableRows()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=10,
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            for statement in _SQLITE_SCHEMA:
                self._db.execute(statement)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the snapshot database ({type(exc).__name__})"
                             ) from None
        self._by_session = self._index_sessions()

    def _index_sessions(self) -> bool:
        """Make the session indexes; False when this SQLite cannot.

        Without JSON functions, or on a read-only file, a query by user or session reads the
        rest of the query, then filters.
        """
        try:
            for statement in _SQLITE_SESSION_INDEXES:
                self._db.execute(statement)
        except sqlite3.Error:
            return False
        return True

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Insert the batch in one transaction."""
        rows = [(s.id, s.created_at, s.plan, s.mode, s.status, s.to_json()) for s in snapshots]
        with self._errors():
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR REPLACE INTO snapshots VALUES (?,?,?,?,?,?)",
                                     rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def read(self, query: SnapshotQuery | None = None) -> list[Snapshot]:
        """Read through the time, plan, user and session indexes."""
        return read_sql(query or SnapshotQuery(), self._fetch, table="snapshots",
                        placeholder="?",
                        session_id=_SQLITE_SESSION_ID if self._by_session else None,
                        unreadable=self._unreadable, body=_SQLITE_BODY)

    def _fetch(self, sql: str, params: list[object]) -> list[Any]:
        with self._errors():
            return self._db.execute(sql, params).fetchall()

    def unreadable_rows(self) -> list[tuple[str, str]]:
        """The rows reads skipped because they are not snapshots: id, why."""
        return self._unreadable.listed()

    def get(self, snapshot_id: str) -> Snapshot:
        """One snapshot by id; ``CorruptRecordError`` naming it when it cannot be read."""
        with self._errors():
            row = self._db.execute(f"SELECT {_SQLITE_BODY} FROM snapshots WHERE id = ?",
                                   (snapshot_id,)).fetchone()
        if row is None:
            raise not_found(snapshot_id)
        return stored_snapshot(snapshot_id, row[0])

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        """Delete by age, then all but the newest ``keep_last``."""
        removed = 0
        with self._errors():
            if older_than is not None:
                removed += self._db.execute("DELETE FROM snapshots WHERE created_at < ?",
                                            (older_than,)).rowcount
            if keep_last is not None:
                removed += self._db.execute(
                    "DELETE FROM snapshots WHERE id NOT IN (SELECT id FROM snapshots "
                    "ORDER BY created_at DESC, id DESC LIMIT ?)", (keep_last,)).rowcount
        self._unreadable.purged()
        return removed

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                raise StoreError(f"snapshot database failed ({type(exc).__name__})") from None


def open_sink(url: str) -> SnapshotSink:
    """A sink from a URL: ``sqlite:///file.db``, ``jsonl:///file.jsonl``, ``redis://…``, ``postgresql://…``.

    Paths follow ``open_store``: ``sqlite:///snapshots.db`` is relative to the working
    directory, four slashes make it absolute. A Redis URL may carry ``?prefix=…`` and a
    PostgreSQL URL ``?schema=…``.
    """
    from contextwright.session.store import _pop_query

    scheme, sep, rest = url.partition("://") if isinstance(url, str) else ("", "", "")
    if not sep:
        raise InvalidInputError("a snapshot sink URL looks like scheme://…")
    if scheme in ("sqlite", "jsonl"):
        if not rest.startswith("/") or rest == "/":
            raise InvalidInputError(f"a {scheme} sink URL looks like {scheme}:///path/to/file")
        return SqliteSink(rest[1:]) if scheme == "sqlite" else JsonlSink(rest[1:])
    if scheme in ("redis", "rediss", "unix"):
        from contextwright.observe.sinks_redis import RedisSink

        url, prefix = _pop_query(url, "prefix", "contextwright")
        return RedisSink(url, prefix=prefix)
    if scheme in ("postgresql", "postgres"):
        from contextwright.observe.sinks_postgres import PostgresSink

        url, schema = _pop_query(url, "schema", "contextwright")
        return PostgresSink(url, schema=schema)
    raise InvalidInputError("unknown snapshot sink scheme (sqlite, jsonl, redis, postgresql)")


def snapshot_from_file(path: Path) -> Snapshot:
    """A snapshot saved as a JSON file (``snapshots show --json`` output)."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise InvalidInputError(f"cannot read snapshot file {path.name}: {exc.strerror}"
                                ) from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"snapshot file {path.name} is not valid UTF-8") from None
    except (ValueError, RecursionError):
        raise InvalidInputError(f"snapshot file {path.name} is not JSON") from None
    if isinstance(data, dict) and "schema" not in data and _looks_like_request(data):
        raise InvalidInputError(f"{path.name} is a request, not a snapshot: inspect a build of "
                                "it with --request FILE")
    return Snapshot.from_dict(data)


def _looks_like_request(data: Mapping[str, Any]) -> bool:
    """Whether a JSON object reads as a build request (a common mix-up on the command line)."""
    return bool({"user_input", "history", "system", "turn"} & set(data))
