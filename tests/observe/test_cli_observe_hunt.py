"""The snapshot commands print any recorded build as JSON they can read back: a message object
holding a lone surrogate (half an emoji) crashed ``snapshots show --json`` with a traceback.
The real CLI, a real SQLite sink."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from observe_helpers import pressured
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.cli import app
from contextwright.core.items import Message
from contextwright.errors import InvalidInputError
from contextwright.observe import SnapshotRecorder, SqliteSink, summarize
from contextwright.observe.replay import snapshot_of
from contextwright.observe.sinks import snapshot_from_file


def test_show_json_of_a_build_holding_a_lone_surrogate_reads_back(tmp_path: Path) -> None:
    db = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(db), redact=False)
    half = "a pasted log: \udc9f\udc98 (cut mid-emoji)"
    # Message objects are the caller's and are not checked; a request dict would be refused.
    history = [Message(role="user", content=half), Message(role="assistant", content="Looking.")]
    request = Request(user_input="what went wrong?", history=history)  # type: ignore[arg-type]
    ContextBuilder(snapshots=recorder).build(BuildPlan.named("chat"), request)
    recorder.close()
    assert recorder.stats.written == 1

    result = CliRunner().invoke(app, ["snapshots", "show", "latest", "--json", "--sink",
                                      f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output
    saved = tmp_path / "build.json"
    saved.write_text(result.stdout, encoding="utf-8")
    (stored,) = SqliteSink(db).read()
    assert snapshot_from_file(saved) == stored
    assert snapshot_from_file(saved).request["history"][0]["content"] == half


def test_a_negative_top_is_refused_not_taken_as_a_slice(tmp_path: Path) -> None:
    db = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(db), redact=False)
    plan, request = pressured()  # 40 rounds in a 4,096-token window: messages are dropped
    ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.close()
    snapshots = SqliteSink(db).read()
    assert len(summarize(snapshots, top=10).most_dropped) >= 2
    with pytest.raises(InvalidInputError, match="top"):
        summarize(snapshots, top=-1)  # it returned all rows but the last
    result = CliRunner().invoke(app, ["snapshots", "query", "--top", "-1", "--sink",
                                      f"sqlite:///{db}"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1


def test_a_snapshot_file_whose_session_lacks_its_ids_is_one_error_line(tmp_path: Path) -> None:
    plan, request = pressured()
    good = snapshot_of(plan, request).to_dict()
    for session in ({}, {"user_id": "u1"}, {"user_id": "u1", "session_id": 7}):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({**good, "session": session}))
        # The HTML report read session["user_id"] and died with a KeyError traceback.
        for args in (["inspect", str(path), "--html", str(tmp_path / "out.html")],
                     ["inspect", str(path)]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 2, (session, args, result.output)
            assert result.stderr.startswith("error: CorruptRecordError: ")
            assert "session" in result.stderr and result.stderr.count("\n") == 1
    path.write_text(json.dumps({**good, "session": {"user_id": "u1", "session_id": "s1"}}))
    assert CliRunner().invoke(app, ["inspect", str(path)]).exit_code == 0


def test_summarize_refuses_a_grouping_it_does_not_know() -> None:
    plan, request = pressured()
    snapshots = [snapshot_of(plan, request)]
    assert [row.group for row in summarize(snapshots, group_by="mode").lengths] == ["-"]
    with pytest.raises(InvalidInputError, match="group_by"):
        summarize(snapshots, group_by="tenant")  # type: ignore[arg-type]  # grouped by mode
