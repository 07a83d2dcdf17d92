"""A ``ContextManager`` build replays under the plan it recorded: the session source it drew on
is not in the request, so the replay names it in ``missing_sources`` rather than failing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextManager
from contextwright.cli import app
from contextwright.observe import SnapshotRecorder, SqliteSink, replay
from contextwright.observe.snapshot import Snapshot


@pytest.fixture
def manager_build(tmp_path: Path) -> tuple[Path, Snapshot]:
    modes = tmp_path / "modes.json"
    modes.write_text(json.dumps({"modes": {"sliding_window": {
        "plan": "chat", "instruction": "Answer about parcels only."}}}), "utf-8")
    path = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path), redact=False)
    manager = ContextManager(snapshots=recorder, background=False, modes=modes)
    manager.prepare("u1", "s1", "Where is my parcel KST418?")
    manager.record("u1", "s1", assistant="It shipped on Monday.")
    manager.prepare("u1", "s1", "When will it arrive?")
    manager.close()
    assert recorder.flush()
    snapshot = recorder.sink.read()[-1]
    recorder.close()
    return path, snapshot


def test_a_manager_build_replays_under_its_recorded_plan(
        manager_build: tuple[Path, Snapshot], tmp_path: Path) -> None:
    _, snapshot = manager_build
    session = next(row for row in snapshot.sources if row["source"] == "session")
    assert session["items"] > 0  # the build drew on the session's memory
    plan_file = tmp_path / "recorded.json"
    plan_file.write_text(json.dumps(dict(snapshot.plan_spec)), "utf-8")
    plan = BuildPlan.load(plan_file)
    assert "session" in [spec.source for spec in plan.sources]
    result = replay(snapshot, plan)
    assert "session" in result.missing_sources
    replayed = next(row for row in result.replayed.sources if row["source"] == "session")
    assert replayed["items"] == 0  # nothing made up for what the snapshot does not hold
    assert result.diff.total_tokens[1] < result.diff.total_tokens[0]


def test_the_cli_replays_a_manager_build_under_its_recorded_plan(
        manager_build: tuple[Path, Snapshot], tmp_path: Path) -> None:
    path, snapshot = manager_build
    plan_file = tmp_path / "recorded.json"
    plan_file.write_text(json.dumps(dict(snapshot.plan_spec)), "utf-8")
    result = CliRunner().invoke(app, ["replay", "latest", "--plan", str(plan_file),
                                      "--sink", f"sqlite:///{path}", "--json"])
    assert result.exit_code == 0, result.output
    assert "session" in json.loads(result.stdout)["missing_sources"]
