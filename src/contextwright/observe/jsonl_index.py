"""The sidecar index of a JSONL snapshot file: where each line is and what queries filter on.

``<file>.idx`` holds a header naming the snapshot file it describes (its inode), then one JSON
line per snapshot line: the line's byte offset and length, and the snapshot's id, time, plan,
mode, status and session ids. A query filters the index and reads only the lines it returns, so
"the newest 20" of a file of thousands of 30 kB snapshots parses 20 of them, not all.

The index describes the file only as far as it can be checked, and is extended or rebuilt when
it does not:

* a file replaced as a whole (a purge, by this version or an older one) has another inode: the
  index is rebuilt from it;
* lines past what the index covers (a writer of an older version appends without indexing, or
  a process stopped between its two appends) are read and indexed on the next read;
* a line read for a query must hold the snapshot the index names there, else the file was
  rewritten in place and the index is rebuilt.

Rebuilding reads every line once, as reading did before there was an index. Several processes
may append to one file: each finds where its lines landed from the end of its own append, and
rows indexed twice are told apart by their offset.

Lines are read as far as they are whole: a last line without its newline is an append still
being written (or cut short by a crash) and is left for a later read. A whole line that is not a
snapshot is indexed as unreadable: reads skip it, a warning names it once, and
``unreadable`` lists it, so one damaged line hides no other snapshot. When the index file cannot
be written (a read-only file or folder), the index is kept in memory for this process only.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from contextwright.errors import CorruptRecordError, StoreError
from contextwright.observe.snapshot import Snapshot

INDEX_VERSION = 1

logger = logging.getLogger("contextwright.observe")


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One line of the snapshot file: where it is, and the fields queries filter on."""

    at: int
    """Byte offset of the line."""
    size: int
    """Its length in bytes, newline included."""
    id: str | None
    """The snapshot's id (None: a blank line, skipped by reads)."""
    created_at: float = 0.0
    plan: str = ""
    mode: str | None = None
    status: str = ""
    user_id: str | None = None
    session_id: str | None = None
    unreadable: str | None = None
    """Why the line is not a snapshot (None: a snapshot, or a blank line); reads skip it."""

    @classmethod
    def of(cls, snapshot: Snapshot, at: int, size: int) -> IndexRow:
        """The row of ``snapshot``, written ``size`` bytes at offset ``at``."""
        session = snapshot.session or {}
        return cls(at=at, size=size, id=snapshot.id, created_at=snapshot.created_at,
                   plan=snapshot.plan, mode=snapshot.mode, status=snapshot.status,
                   user_id=session.get("user_id"), session_id=session.get("session_id"))

    def to_line(self) -> bytes:
        """The row as one line of the index."""
        data: dict[str, Any] = {"at": self.at, "n": self.size}
        if self.id is not None:
            data.update(id=self.id, t=self.created_at, plan=self.plan, mode=self.mode,
                        status=self.status, user=self.user_id, session=self.session_id)
        elif self.unreadable is not None:
            data["bad"] = self.unreadable
        return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_line(cls, data: object) -> IndexRow | None:
        """A row read back (None when the line is not one this version wrote)."""
        if not isinstance(data, dict):
            return None
        at, size, snapshot_id = data.get("at"), data.get("n"), data.get("id")
        if type(at) is not int or type(size) is not int or at < 0 or size <= 0:
            return None
        if snapshot_id is None:
            reason = data.get("bad")
            return cls(at=at, size=size, id=None,
                       unreadable=reason if isinstance(reason, str) else None)
        fields = (data.get("t"), data.get("plan"), data.get("status"))
        if (not isinstance(snapshot_id, str) or not isinstance(fields[0], int | float)
                or not isinstance(fields[1], str) or not isinstance(fields[2], str)):
            return None
        optional = [data.get(name) for name in ("mode", "user", "session")]
        if any(value is not None and not isinstance(value, str) for value in optional):
            return None
        return cls(at=at, size=size, id=snapshot_id, created_at=float(fields[0]),
                   plan=fields[1], status=fields[2], mode=optional[0], user_id=optional[1],
                   session_id=optional[2])


class JsonlIndex:
    """The index of one snapshot file, kept in memory and extended from its sidecar file.

    Not thread-safe on its own: the sink calls it under its lock.
    """

    def __init__(self, data_path: Path) -> None:
        self.data_path = data_path
        self.path = data_path.with_name(data_path.name + ".idx")
        self._rows: dict[int, IndexRow] = {}
        """Rows by offset (a row indexed twice is kept once)."""
        self._describes: int | None = None
        """The inode of the snapshot file the loaded index names."""
        self._index_inode: int | None = None
        self._consumed = 0
        """Bytes of the index file read so far."""
        self._in_memory = False
        """The index file cannot be written: the rows live in this process only."""

    def rows(self) -> list[IndexRow]:
        """Every snapshot line of the file, by offset: the index brought up to date first."""
        size, inode = self._stat_data()
        self._load_new_lines()
        if self._describes != inode:
            return self._rebuild(inode)
        covered, rows = self._tiling()
        if covered is None or covered > size:
            return self._rebuild(inode)
        if covered < size:
            added = list(self._scan(covered))
            self._append(added)
            rows.extend(added)
        return rows

    def unreadable(self) -> list[tuple[int, str]]:
        """The lines reads skip as not snapshots: each line's number (from 1) and why."""
        bad = sorted((at, row.unreadable) for at, row in self._rows.items()
                     if row.unreadable is not None)
        numbers = self.line_numbers([at for at, _ in bad])
        return [(number, reason) for number, (_, reason) in zip(numbers, bad, strict=True)]

    def appended(self, rows: list[IndexRow]) -> None:
        """Index ``rows``, just appended to the file by this process."""
        if not self._in_memory and not self.path.exists():
            return  # the first write, or an index removed: rows() rebuilds
        self._append(rows)

    def replaced(self, rows: list[IndexRow], inode: int) -> None:
        """Write a new index for a new file (a purge), before that file replaces the old one."""
        self._write_index(rows, inode)
        if self._in_memory:
            self._rows, self._describes = {row.at: row for row in rows}, inode

    def rebuild(self) -> list[IndexRow]:
        """Index the whole file again (its lines changed under the index)."""
        return self._rebuild(self._stat_data()[1])

    def _stat_data(self) -> tuple[int, int]:
        try:
            stat = os.stat(self.data_path)
        except OSError as exc:
            raise StoreError(f"snapshot file {self.data_path.name}: {exc.strerror}") from None
        return stat.st_size, stat.st_ino

    def _load_new_lines(self) -> None:
        """Read what was added to the index file since the last read (all of it if replaced)."""
        if self._in_memory:
            return
        try:
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_ino != self._index_inode or stat.st_size < self._consumed:
                    self._forget()
                    self._index_inode = stat.st_ino
                handle.seek(self._consumed)
                self._read_index_lines(handle)
        except FileNotFoundError:
            self._forget()
        except OSError as exc:
            raise StoreError(f"snapshot index {self.path.name}: {exc.strerror}") from None

    def _read_index_lines(self, handle: IO[bytes]) -> None:
        for line in handle:
            if not line.endswith(b"\n"):
                break  # an append still being written: read it next time
            self._consumed += len(line)
            try:
                data = json.loads(line)
            except (ValueError, RecursionError):  # damaged: not a row, so the index is rebuilt
                data = None
            if isinstance(data, dict) and "file" in data:
                self._describes = data["file"] if data.get("v") == INDEX_VERSION else None
                continue
            row = IndexRow.from_line(data)
            if row is None:  # not written by this version: trust nothing of it
                self._describes = None
                continue
            self._rows.setdefault(row.at, row)

    def _forget(self) -> None:
        self._rows, self._describes, self._index_inode, self._consumed = {}, None, None, 0

    def _tiling(self) -> tuple[int | None, list[IndexRow]]:
        """How far from the start the rows cover the file without a gap, and those rows.

        None when two rows overlap: the index is not this file's.
        """
        covered, rows = 0, []
        for at in sorted(self._rows):
            row = self._rows[at]
            if at > covered:
                break  # a gap: what follows is read again from the file
            if at < covered:
                return None, []
            rows.append(row)
            covered += row.size
        return covered, rows

    def _scan(self, start: int) -> Iterator[IndexRow]:
        """Rows of the file's lines from offset ``start`` on, each snapshot read whole."""
        try:
            with open(self.data_path, "rb") as handle:
                handle.seek(start)
                at, seen = start, 0
                first: int | None = 1 if start == 0 else None
                for line in handle:
                    if not line.endswith(b"\n"):
                        return  # an append still being written (or cut short): not yet a line
                    row = self._row_of(line, at)
                    if row.unreadable is not None:
                        # Numbered as the lines go by, the lines before ``start`` counted
                        # once: counting from the file's start for each unreadable line made
                        # a file of thousands of them (a newer layout) take minutes to open.
                        if first is None:
                            first = self.line_number(start)
                        logger.warning(
                            "line %d of %s is not a snapshot (%s); reads skip it",
                            first + seen, self.data_path.name, row.unreadable,
                            extra={"contextwright": {"event": "snapshot_line_unreadable"}})
                    yield row
                    at, seen = at + len(line), seen + 1
        except OSError as exc:
            raise StoreError(f"snapshot file {self.data_path.name}: {exc.strerror}") from None

    def _row_of(self, line: bytes, at: int) -> IndexRow:
        """The row of ``line``, at byte ``at`` (``unreadable`` says why it is no snapshot)."""
        if not line.strip():
            return IndexRow(at=at, size=len(line), id=None)
        try:
            snapshot = Snapshot.from_json(line)
        except CorruptRecordError as exc:
            # The reason names a field, never its value, so it is safe to log and keep.
            return IndexRow(at=at, size=len(line), id=None, unreadable=str(exc))
        return IndexRow.of(snapshot, at, len(line))

    def line_number(self, at: int) -> int:
        """The number (from 1) of the file's line that starts at byte ``at``."""
        return self.line_numbers([at])[0]

    def line_numbers(self, offsets: list[int]) -> list[int]:
        """The numbers (from 1) of the lines starting at ``offsets`` (ascending), in one read."""
        numbers: list[int] = []
        count, read = 0, 0
        with open(self.data_path, "rb") as handle:
            for at in offsets:
                while read < at:
                    chunk = handle.read(min(at - read, 1 << 20))
                    if not chunk:
                        break
                    count, read = count + chunk.count(b"\n"), read + len(chunk)
                numbers.append(count + 1)
        return numbers

    def _rebuild(self, inode: int) -> list[IndexRow]:
        rows = list(self._scan(0))
        self._write_index(rows, inode)
        self._forget()
        self._rows = {row.at: row for row in rows}
        self._describes = inode
        if self._in_memory:
            return rows
        try:
            self._index_inode = os.stat(self.path).st_ino
            self._consumed = os.stat(self.path).st_size
        except OSError:
            self._index_inode = None  # read again next time
        return rows

    def _write_index(self, rows: list[IndexRow], inode: int) -> None:
        """Replace the index file with ``rows`` (atomically: a new file replaces it).

        When it cannot be written, the index is kept in memory from then on: reading a file
        needs no write access to it or its folder.
        """
        if self._in_memory:
            return
        header = json.dumps({"file": inode, "v": INDEX_VERSION}).encode() + b"\n"
        # A name of this writer's own: processes that open a file without an index at once
        # all index it, and with one shared name each truncated the others' half-written
        # index, and all but the first to rename found nothing left to rename.
        temporary = self.path.with_name(
            f"{self.path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            try:
                with open(temporary, "wb") as handle:
                    handle.write(header + b"".join(row.to_line() for row in rows))
                os.replace(temporary, self.path)
            except OSError:
                temporary.unlink(missing_ok=True)
                raise
        except OSError as exc:
            self._keep_in_memory(exc)

    def _append(self, rows: list[IndexRow]) -> None:
        if not rows:
            return
        if not self._in_memory:
            try:
                with open(self.path, "ab") as handle:
                    handle.write(b"".join(row.to_line() for row in rows))
            except OSError as exc:
                self._keep_in_memory(exc)
        for row in rows:  # read back from the file too, where one row is kept once
            self._rows.setdefault(row.at, row)

    def _keep_in_memory(self, exc: OSError) -> None:
        logger.info("snapshot index %s cannot be written (%s); kept in memory",
                    self.path.name, exc.strerror,
                    extra={"contextwright": {"event": "snapshot_index_in_memory"}})
        self._in_memory = True
