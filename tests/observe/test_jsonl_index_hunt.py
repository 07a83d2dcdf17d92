"""A JSONL snapshot file with many lines reads cannot use (records of a newer layout, damage)
opens, and names them, in one pass over the file. Real files; the bytes this process reads
are counted by the kernel (``/proc/self/io``)."""

from __future__ import annotations

import json
import logging
import multiprocessing
import multiprocessing.sharedctypes
import multiprocessing.synchronize
from dataclasses import replace
from pathlib import Path

import pytest

from contextwright import BuildPlan, Request
from contextwright.observe import JsonlSink, SnapshotQuery
from contextwright.observe.replay import snapshot_of

_IO = Path("/proc/self/io")


def _bytes_read() -> int:
    for line in _IO.read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not _IO.exists(), reason="needs Linux's /proc/self/io")
def test_a_file_of_many_unreadable_lines_is_read_once_not_once_per_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    record = snapshot_of(BuildPlan.named("chat"), Request(user_input="x" * 2000)).to_dict()
    record["schema"] = 99  # a layout of a newer version: every line is unreadable here
    line = json.dumps(record) + "\n"
    path = tmp_path / "newer.jsonl"
    path.write_text(line * 600)
    size = path.stat().st_size

    before = _bytes_read()
    with caplog.at_level(logging.WARNING, logger="contextwright.observe"):
        sink = JsonlSink(path)
        skipped = sink.unreadable_lines()
    read = _bytes_read() - before

    assert [number for number, _ in skipped] == list(range(1, 601))
    warned = [r.getMessage() for r in caplog.records if "is not a snapshot" in r.getMessage()]
    assert warned[0].startswith("line 1 of newer.jsonl") and warned[-1].startswith("line 600 ")
    # Each unreadable line was numbered by reading the file from its start: 600 lines read
    # the file about 600 times over (twice: once when indexed, once when listed).
    assert read < 5 * size, f"read {read / size:.0f} times the file's size"


def _index_anew(path: str, rounds: int, start: multiprocessing.synchronize.Event,
                fell_back: multiprocessing.sharedctypes.Synchronized) -> None:  # type: ignore[type-arg]
    """Open the file ``rounds`` times without an index (so each open indexes it), counting
    the opens that gave up writing the index file."""

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            event = getattr(record, "contextwright", {}).get("event")
            if event == "snapshot_index_in_memory":
                with fell_back.get_lock():
                    fell_back.value += 1

    logging.getLogger("contextwright.observe").addHandler(Count())
    logging.getLogger("contextwright.observe").setLevel(logging.INFO)
    start.wait(60)
    for _ in range(rounds):
        Path(path + ".idx").unlink(missing_ok=True)
        JsonlSink(path).read()


def test_processes_indexing_one_file_at_once_each_write_the_index(tmp_path: Path) -> None:
    template = snapshot_of(BuildPlan.named("chat"), Request(user_input="hello " * 300))
    path = tmp_path / "shared.jsonl"
    JsonlSink(path).write([replace(template, id=f"s{i:03d}", created_at=1000.0 + i)
                           for i in range(200)])
    context = multiprocessing.get_context("spawn")
    start, fell_back = context.Event(), context.Value("i", 0)
    workers = [context.Process(target=_index_anew, args=(str(path), 40, start, fell_back))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    # With one temporary name for all, a process whose half-written index another truncated
    # and renamed away found nothing to rename, and kept its index in memory from then on.
    assert fell_back.value == 0
    assert not list(tmp_path.glob("*.tmp"))
    assert [s.id for s in JsonlSink(path).read()] == [f"s{i:03d}" for i in range(200)]


def test_a_purge_keeps_the_lines_it_cannot_read(tmp_path: Path) -> None:
    template = snapshot_of(BuildPlan.named("chat"), Request(user_input="where is it?"))
    path = tmp_path / "shared.jsonl"
    sink = JsonlSink(path)
    sink.write([replace(template, id="old", created_at=1000.0)])
    # An upgraded process sharing the file appends a snapshot of a layout this one cannot read.
    newer = {**template.to_dict(), "schema": 99, "id": "newer-layout", "created_at": 1500.0}
    with path.open("a") as handle:
        handle.write(json.dumps(newer) + "\n")
        handle.write('{"id": "half-written", "crea\n')  # a crash mid-line: purges remove it
    sink.write([replace(template, id=f"new{i}", created_at=3000.0 + i) for i in range(3)])

    assert sink.purge(older_than=2000.0) == 1  # retention: removed "old"
    assert sink.purge(keep_last=2) == 1  # and "new0"
    lines = path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["newer-layout", "new1", "new2"]
    assert json.loads(lines[0]) == newer  # copied as it was, never rewritten
    assert [s.id for s in sink.read()] == ["new1", "new2"]
    assert sink.unreadable_lines() == [
        (1, "a snapshot record of a layout version this library does not read (99)")]
    assert [s.id for s in JsonlSink(path).read()] == ["new1", "new2"]


@pytest.mark.skipif(not _IO.exists(), reason="needs Linux's /proc/self/io")
def test_lines_appended_past_the_index_are_read_alone(tmp_path: Path) -> None:
    template = snapshot_of(BuildPlan.named("chat"), Request(user_input="x" * 2000))
    path = tmp_path / "big.jsonl"
    sink = JsonlSink(path)
    sink.write([replace(template, id=f"s{i:04d}", created_at=1000.0 + i) for i in range(600)])
    size = path.stat().st_size
    with path.open("a") as handle:  # a writer that does not index (an older version)
        handle.write(replace(template, id="late", created_at=5000.0).to_json() + "\n")
    before = _bytes_read()
    assert sink.read(SnapshotQuery(limit=1))[0].id == "late"
    # Numbering the new lines must not count the lines of the whole file before them.
    assert _bytes_read() - before < size // 10
