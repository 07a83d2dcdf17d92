"""Request and plan files that start with a byte order mark, as Windows tools write them.

A UTF-8 one (Notepad, ``Set-Content -Encoding utf8``) only says the file is UTF-8: it is read
as the file without it (it was refused: "Unexpected UTF-8 BOM (decode using utf-8-sig)", and a
TOML plan as an "Invalid statement"). UTF-16 (PowerShell 5's ``>``) is refused saying so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.core.plan import BuildPlan
from contextwright.errors import PlanError

BOM = b"\xef\xbb\xbf"
PLANS = {
    "plan.yaml": "name: p\nsources:\n  - {source: user}\n",
    "plan.json": '{"name": "p", "sources": [{"source": "user"}]}',
    "plan.toml": 'name = "p"\n[[sources]]\nsource = "user"\n',
}


@pytest.mark.parametrize("name", list(PLANS))
def test_a_plan_file_with_a_utf8_byte_order_mark_loads(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(BOM + PLANS[name].encode())
    assert BuildPlan.load(path).name == "p"


def test_a_utf16_plan_file_is_refused_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_bytes(PLANS["plan.yaml"].encode("utf-16"))
    with pytest.raises(PlanError, match=r"plan\.yaml is not valid yaml: UTF-16 text"):
        BuildPlan.load(path)


def test_a_request_with_a_utf8_byte_order_mark_builds_as_without(tmp_path: Path) -> None:
    plain, marked = tmp_path / "plain.json", tmp_path / "marked.json"
    plain.write_bytes('{"user_input": "今天天气"}'.encode())
    marked.write_bytes(BOM + plain.read_bytes())
    runner = CliRunner()
    results = [runner.invoke(app, ["build", "--request", str(path)]) for path in (plain, marked)]
    assert [result.exit_code for result in results] == [0, 0], results[1].output
    assert json.loads(results[1].stdout) == json.loads(results[0].stdout)
    piped = runner.invoke(app, ["build", "--request", "-"], input=marked.read_bytes())
    assert piped.exit_code == 0 and json.loads(piped.stdout) == json.loads(results[0].stdout)


def test_a_utf16_request_is_one_error_line_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_bytes('{"user_input": "hi"}'.encode("utf-16"))
    result = CliRunner().invoke(app, ["build", "--request", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "request.json is not valid JSON: UTF-16 text" in result.stderr
