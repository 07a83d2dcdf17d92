"""The observe commands fail in one line: an HTML report that cannot be written is an error
line and exit 2 for ``replay`` as for ``inspect``, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from observe_helpers import pressured
from typer.testing import CliRunner

from contextwright import ContextBuilder
from contextwright.cli import app
from contextwright.observe import SnapshotRecorder, SqliteSink


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path), redact=False)
    plan, request = pressured()
    ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.close()
    return f"sqlite:///{path}"


@pytest.mark.parametrize("command", [["inspect", "latest"],
                                     ["replay", "latest", "--plan", "chat"]])
def test_an_html_report_that_cannot_be_written_is_one_error_line(
        db: str, tmp_path: Path, command: list[str]) -> None:
    target = tmp_path / "no such folder" / "report.html"
    result = CliRunner().invoke(app, [*command, "--sink", db, "--html", str(target)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: cannot write ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
