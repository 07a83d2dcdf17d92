"""A command whose output cannot be written (a full disk under ``> out.json``) fails with one
``error: …`` line on stderr and exit code 1, not a traceback.

``/dev/full`` stands for the full disk: every write to it fails with ENOSPC.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "request.json"
FULL = Path("/dev/full")

pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")


def _run_into_a_full_disk(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with FULL.open("w") as full:
        return subprocess.run(
            [sys.executable, "-c", "from contextwright.cli import main; main()", *args],
            stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("args", [["build", "--request", str(EXAMPLE)], ["plans"]],
                         ids=["build", "plans"])
def test_output_that_cannot_be_written_is_one_error_line(args: list[str]) -> None:
    completed = _run_into_a_full_disk(*args)
    assert completed.returncode == 1, completed.stderr
    assert completed.stderr == "error: OSError: No space left on device\n"


def test_a_reader_that_stops_early_is_no_error() -> None:
    """``| head`` closing the pipe stays the quiet exit it was (no message at all)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-c", "from contextwright.cli import main; main()", "plans"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        stderr = process.stderr.read().decode()
        process.wait(timeout=120)
    assert "Traceback" not in stderr and "error:" not in stderr
