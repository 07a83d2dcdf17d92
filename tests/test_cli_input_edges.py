"""``contextwright build`` on the edges of its input: numbers JSON cannot hold, endless or huge
request files, ``--budget`` beside a small ``--window``, a misspelt ``--model``, a bad fingerprint.

Each failure is one ``error: …`` line on stderr, exit code 2 and nothing on stdout; what the
command prints on success is valid JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright import cli
from contextwright.cli import app
from contextwright.errors import PlanError
from contextwright.models import model_profile

TOOL = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
    "type": "object", "properties": {"x": {"type": "number", "maximum": "NUMBER"}}}}}


def _invoke(*args: str, stdin: bytes | None = None) -> Any:
    return CliRunner().invoke(app, ["build", *args], input=stdin)


def _assert_one_error_line(result: Any, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def _request_with_number(number: str) -> str:
    """A request whose tool schema holds ``number`` as written (NaN, Infinity, 1e400...)."""
    return json.dumps({"user_input": "hi", "tools": [TOOL]}).replace('"NUMBER"', number)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_request_with_a_number_json_cannot_hold_is_refused(tmp_path: Path,
                                                             number: str) -> None:
    """It was built and printed as ``NaN`` / ``Infinity``: no JSON parser or provider takes it."""
    path = tmp_path / "request.json"
    path.write_text(_request_with_number(number), encoding="utf-8")
    _assert_one_error_line(_invoke("--request", str(path), "--plan", "tool_heavy"),
                           "request file request.json is not valid JSON", "finite numbers")


def test_a_request_on_standard_input_with_nan_is_refused_too() -> None:
    result = _invoke("--request", "-", stdin=_request_with_number("NaN").encode())
    _assert_one_error_line(result, "request on standard input is not valid JSON")


def test_finite_numbers_in_a_request_are_printed_as_given(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(_request_with_number("1e300"), encoding="utf-8")
    result = _invoke("--request", str(path), "--plan", "tool_heavy")
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)["tools"][0]["function"]["parameters"]
    assert schema["properties"]["x"]["maximum"] == 1e300


def test_a_request_file_larger_than_the_limit_is_refused_without_reading_it_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An endless file (``/dev/zero``, a pipe that never closes) was read until memory ran out."""
    monkeypatch.setattr(cli, "MAX_REQUEST_BYTES", 64)
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"user_input": "x" * 100}), encoding="utf-8")
    _assert_one_error_line(_invoke("--request", str(path)),
                           "request file big.json is larger than 64 bytes")
    piped = _invoke("--request", "-", stdin=path.read_bytes())
    _assert_one_error_line(piped, "request on standard input is larger than 64 bytes")
    small = tmp_path / "small.json"
    small.write_text('{"user_input": "hi"}', encoding="utf-8")
    assert _invoke("--request", str(small)).exit_code == 0


def test_budget_beside_a_window_whose_safety_share_the_reserve_exceeds(tmp_path: Path) -> None:
    """``--budget`` sets the available tokens: a 1200-token window holds 100 beside a 1024
    reserve, but the window's default share (75%) was checked first and refused the build."""
    path = tmp_path / "request.json"
    path.write_text('{"user_input": "hi"}', encoding="utf-8")
    result = _invoke("--request", str(path), "--window", "1200", "--budget", "100")
    assert result.exit_code == 0, result.output
    budget = json.loads(result.stdout)["budget"]
    assert budget["window"] == 1200 and budget["available"] == 100


def test_a_budget_the_window_cannot_hold_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text('{"user_input": "hi"}', encoding="utf-8")
    result = _invoke("--request", str(path), "--window", "1200", "--budget", "177")
    _assert_one_error_line(result, "PlanError", "at most 176")


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_budget_below_one_token_names_the_option(value: str) -> None:
    """It was refused as ``budget.available_override``, a name the command line never shows."""
    result = _invoke("--request", "r.json", "--budget", value)
    _assert_one_error_line(result, "Invalid value for '--budget'")
    assert "available_override" not in result.stderr


@pytest.mark.parametrize(("given", "meant"), [
    ("gpt4o", "gpt-4o"), ("GPT-4o", "gpt-4o"), ("claude-sonet-4-5", "claude-sonnet-4-5"),
    ("gpt-4.1mini", "gpt-4.1-mini"), ("claude-opus-4.5-20251101", "claude-opus-4-5")])
def test_a_misspelt_model_is_named_with_the_closest_known_one(given: str, meant: str) -> None:
    with pytest.raises(PlanError, match=rf"unknown model '{given}' \(did you mean '{meant}'\?\)"):
        model_profile(given)


@pytest.mark.parametrize("given", ["o3-mini", "claude-3-5-sonnet", "gpt-5.1-mini", "llama3"])
def test_another_version_of_a_model_is_not_offered_as_a_typo(given: str) -> None:
    """``o3-mini`` is another model than ``o4-mini``, with other limits: no guess is offered."""
    with pytest.raises(PlanError) as raised:
        model_profile(given)
    assert "did you mean" not in str(raised.value)


def test_a_misspelt_model_on_the_command_line_is_one_line_naming_the_closest(
        tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text('{"user_input": "hi"}', encoding="utf-8")
    result = _invoke("--request", str(request), "--model", "gpt4o")
    _assert_one_error_line(result, "did you mean 'gpt-4o'?")


def test_a_bad_fingerprint_file_is_named_in_the_error(tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text('{"user_input": "hi"}', encoding="utf-8")
    previous = tmp_path / "earlier.json"
    previous.write_text('{"fingerprint": 5}', encoding="utf-8")
    result = _invoke("--request", str(request), "--previous", str(previous))
    _assert_one_error_line(result, "fingerprint file earlier.json: ")
