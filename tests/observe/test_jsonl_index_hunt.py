"""A JSONL snapshot file with many lines reads cannot use (records of a newer layout, damage)
opens, and names them, in one pass over the file. Real files; the bytes this process reads
are counted by the kernel (``/proc/self/io``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from contextwright import BuildPlan, Request
from contextwright.observe import JsonlSink
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
