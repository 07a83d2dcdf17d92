"""A JSONL snapshot file shared by processes and met after crashes: purges lose no other
process's appends, a half-written or torn line hides no other snapshot, and a file that can
only be read can be read. Real files and real processes."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from contextwright import BuildPlan, Request
from contextwright.observe import JsonlSink, Snapshot, SnapshotQuery
from contextwright.observe.replay import snapshot_of


def _template() -> Snapshot:
    return snapshot_of(BuildPlan.named("simple_qa"), Request(user_input="hello " * 200))


def _snap(template: Snapshot, name: str, at: float) -> Snapshot:
    return replace(template, id=name, created_at=at)


def _append_new(path: str, count: int, started: multiprocessing.synchronize.Event) -> None:
    sink, template = JsonlSink(path), _template()
    started.set()
    for i in range(count):
        sink.write([_snap(template, f"new{i:04d}", 2_000_000_000.0 + i)])


def test_a_purge_loses_nothing_another_process_appends_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    sink, template = JsonlSink(path), _template()
    context = multiprocessing.get_context("spawn")
    started = context.Event()
    writer = context.Process(target=_append_new, args=(str(path), 300, started))
    writer.start()
    assert started.wait(60)
    rewrites, old = 0, 0
    while writer.is_alive() or rewrites == 0:
        # Each round adds an old snapshot and purges it: the file is rewritten every time.
        sink.write([_snap(template, f"old{old:05d}", 1000.0)])
        old += 1
        rewrites += sink.purge(older_than=2000.0)
    writer.join(60)
    assert writer.exitcode == 0
    stored = [s.id for s in JsonlSink(path).read()]
    assert stored == [f"new{i:04d}" for i in range(300)], (rewrites, len(stored))


def test_a_line_still_being_written_is_left_for_a_later_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sink, template = JsonlSink(path), _template()
    first, second = _snap(template, "first", 1.0), _snap(template, "second", 2.0)
    sink.write([first])
    line = (second.to_json() + "\n").encode()
    with open(path, "ab") as other_process:
        other_process.write(line[:len(line) // 2])
        other_process.flush()
        assert [s.id for s in sink.read()] == ["first"]  # the half line is not read yet
        assert [s.id for s in JsonlSink(path).read()] == ["first"]
        assert sink.unreadable_lines() == []
        other_process.write(line[len(line) // 2:])
    assert [s.id for s in sink.read()] == ["first", "second"]
    assert sink.get("second") == second


def test_a_torn_last_line_hides_nothing_and_the_next_append_starts_a_new_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.jsonl"
    template = _template()
    whole = [_snap(template, f"s{i}", float(i)) for i in range(3)]
    torn = _snap(template, "torn", 3.0).to_json()[:500]  # a writer killed mid-append
    path.write_text("".join(s.to_json() + "\n" for s in whole) + torn)
    sink = JsonlSink(path)  # an app starting up on this file
    assert sink.read() == whole
    assert sink.read(SnapshotQuery(limit=1)) == whole[-1:]
    after = _snap(template, "after", 4.0)
    sink.write([after])
    assert sink.get("after") == after
    assert [s.id for s in JsonlSink(path).read()] == ["s0", "s1", "s2", "after"]
    assert [number for number, _ in sink.unreadable_lines()] == [4]
    assert "line 4 of s.jsonl is not a snapshot" in caplog.text
    assert sink.purge(keep_last=1) == 3
    assert [s.id for s in sink.read()] == ["after"] and sink.unreadable_lines() == []


_READER = textwrap.dedent("""
    import sys
    from contextwright.observe import JsonlSink, SnapshotQuery
    sink = JsonlSink(sys.argv[1])
    print(len(sink.read()), sink.read(SnapshotQuery(limit=1))[0].id, sink.get("s1").id)
""")


def _read_only(folder: Path) -> list[str]:
    """A command prefix that runs what follows where ``folder`` cannot be written."""
    if os.geteuid() != 0:  # permissions bind an ordinary user
        folder.chmod(0o555)
        for file in folder.iterdir():
            file.chmod(0o444)
        return []
    if shutil.which("unshare") is None:
        pytest.skip("root ignores permissions, and unshare is missing for a read-only mount")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no mount namespace here for a read-only mount")
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec \"$@\""
    return ["unshare", "-m", "sh", "-c", mount, "sh"]


@pytest.mark.parametrize("with_index", [True, False])
def test_a_snapshot_file_that_cannot_be_written_can_be_read(tmp_path: Path,
                                                           with_index: bool) -> None:
    folder = tmp_path / "archive"
    path = folder / "s.jsonl"
    template = _template()
    JsonlSink(path).write([_snap(template, f"s{i}", float(i)) for i in range(3)])
    with open(path, "a") as handle:  # an older writer's line, so the index must be extended
        handle.write(_snap(template, "s3", 3.0).to_json() + "\n")
    if not with_index:
        (folder / "s.jsonl.idx").unlink()
    before = sorted(p.name for p in folder.iterdir())
    try:
        result = subprocess.run([*_read_only(folder), sys.executable, "-c", _READER, str(path)],
                                capture_output=True, text=True, timeout=60)
    finally:
        folder.chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["4", "s3", "s1"]
    assert sorted(p.name for p in folder.iterdir()) == before


def test_an_append_after_a_one_byte_torn_file_starts_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"{")
    sink, snapshot = JsonlSink(path), _snap(_template(), "only", 1.0)
    sink.write([snapshot])
    assert JsonlSink(path).read() == [snapshot]
    assert [number for number, _ in sink.unreadable_lines()] == [1]
