"""The JSONL sink reads through its sidecar index: only the lines a query returns are parsed,
and an index that does not describe the file (older writers, purges, edits, other processes)
is extended or rebuilt, never trusted blindly. Real files in a temporary folder."""

from __future__ import annotations

import multiprocessing
import os
import random
from dataclasses import replace
from pathlib import Path

import pytest
from observe_helpers import pressured

from contextwright.errors import InvalidInputError
from contextwright.observe import JsonlSink, Snapshot, SnapshotQuery
from contextwright.observe.replay import snapshot_of
from contextwright.observe.sinks import newest


@pytest.fixture(scope="module")
def base() -> Snapshot:
    plan, request = pressured()
    return snapshot_of(plan, request, redact=True)


def _of(base: Snapshot, index: int, user: str | None = None, at: float | None = None
        ) -> Snapshot:
    ids = None if user is None else {"user_id": user, "session_id": f"{user}-s"}
    return replace(base, id=f"{index:05d}snap", created_at=1000.0 + index if at is None else at,
                   session=ids, plan="chat" if index % 2 else "tool_heavy",
                   mode="agent" if index % 3 else None)


def _series(base: Snapshot, count: int) -> list[Snapshot]:
    return [_of(base, i, ("ada", "bob", None)[i % 3]) for i in range(count)]


def _line_spans(path: Path) -> list[tuple[int, int]]:
    """(offset, length) of each line of ``path``."""
    spans, at = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        spans.append((at, len(line)))
        at += len(line)
    return spans


def _garble_in_place(path: Path, line: int) -> None:
    """Overwrite line ``line`` (from 0) with as many bytes of garbage, newline kept."""
    at, size = _line_spans(path)[line]
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(b"x" * (size - 1))


def test_a_query_parses_only_the_lines_it_returns(base: Snapshot, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sink = JsonlSink(path)
    series = _series(base, 30)
    sink.write(series[:10])
    sink.write(series[10:])
    # Lines 3 and 20 are garbled in place: a read that parsed them would raise.
    _garble_in_place(path, 3)
    _garble_in_place(path, 20)
    assert sink.read(SnapshotQuery(limit=5)) == series[-5:]
    assert sink.read(SnapshotQuery(user_id="bob", since=1021.0)) == [
        s for s in series[21:] if s.session and s.session["user_id"] == "bob"]
    assert sink.get(series[29].id) == series[29]
    # Reading a garbled line through the index rebuilds it; the rebuild skips and names it.
    with pytest.raises(InvalidInputError, match="no snapshot"):
        sink.get(series[3].id)
    assert [number for number, _ in sink.unreadable_lines()] == [4, 21]


def test_reads_equal_a_filter_of_every_snapshot(base: Snapshot, tmp_path: Path) -> None:
    rng = random.Random(7)
    series = [_of(base, i, rng.choice(["ada", "bob", None]), at=1000.0 + rng.randrange(40))
              for i in range(120)]
    sink = JsonlSink(tmp_path / "s.jsonl")
    for start in range(0, len(series), 17):
        sink.write(series[start:start + 17])
    for _ in range(60):
        query = SnapshotQuery(
            since=rng.choice([None, 1010.0]), until=rng.choice([None, 1030.0]),
            plan=rng.choice([None, "chat", "tool_heavy"]), mode=rng.choice([None, "agent"]),
            user_id=rng.choice([None, "ada", "bob"]), limit=rng.choice([None, 0, 1, 7, 500]))
        assert sink.read(query) == newest(list(series), query), query
    # A second sink on the file (another process) reads the same from the index it finds.
    assert JsonlSink(tmp_path / "s.jsonl").read() == newest(list(series), SnapshotQuery())


def test_a_file_written_before_the_index_is_indexed_once(base: Snapshot, tmp_path: Path
                                                         ) -> None:
    path = tmp_path / "old.jsonl"
    series = _series(base, 12)
    path.write_text("".join(s.to_json() + "\n" for s in series), encoding="utf-8")
    sink = JsonlSink(path)
    assert (tmp_path / "old.jsonl.idx").exists()
    _garble_in_place(path, 0)  # indexed when the sink opened: no later read parses it
    assert sink.read(SnapshotQuery(limit=3)) == series[-3:]


def test_lines_an_older_writer_appends_are_indexed_on_the_next_read(base: Snapshot,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sink = JsonlSink(path)
    series = _series(base, 9)
    sink.write(series[:5])
    with open(path, "a", encoding="utf-8") as handle:  # no index line for these
        handle.write("".join(s.to_json() + "\n" for s in series[5:]))
    assert sink.read() == series
    assert sink.read(SnapshotQuery(limit=2)) == series[-2:]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    assert sink.read(SnapshotQuery(limit=1)) == series[-1:]  # the bad line is skipped
    assert [number for number, _ in sink.unreadable_lines()] == [10]


def test_a_file_replaced_or_rewritten_in_place_is_indexed_again(base: Snapshot,
                                                                tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sink = JsonlSink(path)
    series = _series(base, 16)
    sink.write(series)
    # Another program replaces the file (a purge of an older version): a new inode.
    replacement = tmp_path / "new.jsonl"
    replacement.write_text("".join(s.to_json() + "\n" for s in series[4:]), encoding="utf-8")
    os.replace(replacement, path)
    assert sink.read() == series[4:]
    # Two lines of one length swapped in place: same inode, same size; each read line is
    # checked against the id the index names there.
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines[0]) == len(lines[6])  # snapshots 4 and 10: same fields but id and time
    lines[0], lines[6] = lines[6], lines[0]
    path.write_bytes(b"".join(lines))
    assert sink.get(series[4].id) == series[4]
    assert sink.read(SnapshotQuery(limit=3)) == series[-3:]
    assert sink.read(SnapshotQuery(until=1011.0)) == series[4:11]


def test_purge_keeps_the_index_true(base: Snapshot, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sink = JsonlSink(path)
    series = _series(base, 20)
    sink.write(series)
    assert sink.purge(older_than=1005.0) == 5
    assert sink.purge(keep_last=10) == 5
    assert sink.purge(keep_last=10) == 0
    assert sink.read() == series[10:]
    sink.write([_of(base, 99)])
    assert sink.read(SnapshotQuery(limit=2)) == [series[-1], _of(base, 99)]
    # The kept lines were copied as they were: the file reads the same without its index.
    (tmp_path / "s.jsonl.idx").unlink()
    assert JsonlSink(path).read() == [*series[10:], _of(base, 99)]


def _append_from_a_process(path: str, start: int, count: int) -> None:
    plan, request = pressured()
    template = snapshot_of(plan, request, redact=True)
    sink = JsonlSink(path)
    for i in range(start, start + count):
        sink.write([replace(template, id=f"{i:05d}snap", created_at=1000.0 + i)])


def test_processes_appending_to_one_file_are_all_indexed(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.jsonl")
    JsonlSink(path)  # the file and its index exist before the writers start
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_append_from_a_process, args=(path, start, 40))
               for start in (0, 1000)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
        assert writer.exitcode == 0
    snapshots = JsonlSink(path).read()
    assert sorted(s.id for s in snapshots) == sorted(
        [f"{i:05d}snap" for i in range(40)] + [f"{i:05d}snap" for i in range(1000, 1040)])
