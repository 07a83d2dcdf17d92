"""A builder or manager given something that is not a snapshot sink says so when it is made."""

from __future__ import annotations

import pytest

from contextwright import ContextBuilder, ContextManager
from contextwright.errors import ConfigurationError
from contextwright.observe import JsonlSink


@pytest.mark.parametrize("wrong", [5, "snapshots.jsonl", object()])
def test_a_snapshots_argument_that_is_no_sink_is_refused_when_made(wrong: object) -> None:
    with pytest.raises(ConfigurationError, match="SnapshotSink"):
        ContextBuilder(snapshots=wrong)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="SnapshotSink"):
        ContextManager(background=False, snapshots=wrong)  # type: ignore[arg-type]


def test_a_path_is_pointed_to_open_sink() -> None:
    with pytest.raises(ConfigurationError, match="open_sink"):
        ContextBuilder(snapshots="snapshots.jsonl")  # type: ignore[arg-type]


def test_a_sink_is_taken(tmp_path: object) -> None:
    sink = JsonlSink(f"{tmp_path}/snapshots.jsonl")
    builder = ContextBuilder(snapshots=sink)
    assert builder.snapshots is not None
    builder.snapshots.close()
