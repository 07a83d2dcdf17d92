"""A damaged line in a JSONL file's index (``<file>.idx``) costs a rebuild of the index, never a
read: the index is only a cache of the file. Real files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from contextwright import BuildPlan, Request
from contextwright.observe import JsonlSink
from contextwright.observe.replay import snapshot_of


def test_an_index_line_nested_too_deep_to_parse_is_rebuilt_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    template = snapshot_of(BuildPlan.named("simple_qa"), Request(user_input="hello"))
    series = [replace(template, id=f"s{n}", created_at=1000.0 + n) for n in range(3)]
    JsonlSink(path).write(series)
    with open(path.with_name("s.jsonl.idx"), "ab") as index:
        index.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert JsonlSink(path).read() == series
