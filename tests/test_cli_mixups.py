"""Files given to the wrong CLI option are named as what they are, in one line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from contextwright.cli import app

runner = CliRunner()
REQUEST = {"system": "Be brief.", "user_input": "hello",
           "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}]}


def _write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_previous_without_a_fingerprint_says_how_to_make_one(tmp_path: Path) -> None:
    request = _write(tmp_path, "request.json", REQUEST)
    plain = runner.invoke(app, ["build", "--request", str(request)])
    assert plain.exit_code == 0, plain.output
    built = tmp_path / "plain.json"
    built.write_text(plain.stdout, encoding="utf-8")
    for previous in (built, request):
        result = runner.invoke(app, ["build", "--request", str(request), "--previous",
                                     str(previous)])
        assert result.exit_code == 2
        assert f"{previous.name} holds no fingerprint" in result.stderr
        assert "build --cache" in result.stderr
    cached = runner.invoke(app, ["build", "--request", str(request), "--cache"])
    (tmp_path / "cached.json").write_text(cached.stdout, encoding="utf-8")
    again = runner.invoke(app, ["build", "--request", str(request), "--previous",
                                str(tmp_path / "cached.json")])
    assert again.exit_code == 0, again.output


def test_inspect_given_a_request_file_points_to_request(tmp_path: Path) -> None:
    request = _write(tmp_path, "request.json", REQUEST)
    result = runner.invoke(app, ["inspect", str(request)])
    assert result.exit_code == 2
    assert "is a request, not a snapshot" in result.stderr and "--request" in result.stderr


def test_a_snapshot_file_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"user_input": "caf\xe9"}')
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 2
    assert "is not valid UTF-8" in result.stderr
