"""``contextwright build`` prints messages, tokens, budget and report as JSON.

``demo`` runs offline. Bad input is exit code 2 with a one-line error, a budget that cannot hold
the never-cut parts is exit code 3, and a failure never prints a partial context.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli import app

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "request.json"
SECRET = "sk-SECRET-77e1"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def build(runner: CliRunner, *args: str, request: Path = EXAMPLE) -> Any:
    return runner.invoke(app, ["build", "--request", str(request), *args])


def build_json(runner: CliRunner, *args: str) -> dict[str, Any]:
    result = build(runner, *args)
    assert result.exit_code == 0, result.stderr
    output: dict[str, Any] = json.loads(result.stdout)
    return output


def test_build_prints_messages_tokens_budget_and_report(runner: CliRunner) -> None:
    output = build_json(runner)
    assert {"messages", "total_tokens", "budget", "report"} <= output.keys()
    assert output["messages"][0]["role"] == "system"
    assert output["messages"][-1]["role"] == "tool"  # this turn's result follows the input
    assert output["total_tokens"] == output["report"]["total_tokens"]
    assert output["budget"] == {"window": 8192, "safety_ratio": 0.75, "reserved_output": 1024,
                                "reserved_reasoning": 0, "available": 5120}
    assert output["total_tokens"] <= output["budget"]["available"]
    assert {row["source"] for row in output["report"]["sources"]} >= {"system", "user"}


def test_build_without_a_plan_keeps_every_part_the_example_request_gave(
        runner: CliRunner) -> None:
    output = build_json(runner)
    given = json.loads(EXAMPLE.read_text("utf-8"))
    assert [t["function"]["name"] for t in output["tools"]] == [
        t["function"]["name"] for t in given["tools"]]
    calls = [c["id"] for m in output["messages"] for c in m.get("tool_calls") or ()]
    assert "call_weather" in calls
    assert any(m.get("tool_call_id") == "call_weather" for m in output["messages"])
    text = json.dumps(output["messages"], ensure_ascii=False)
    for doc in given["documents"]:
        assert doc["text"][:20] in text
    assert not [w for w in output["report"]["warnings"] if "left out" in w]


def test_budget_sets_the_available_tokens(runner: CliRunner) -> None:
    output = build_json(runner, "--budget", "400")
    assert output["budget"]["available"] == 400
    assert output["report"]["available"] == 400
    assert output["total_tokens"] <= 400


def test_window_and_reserved_output_set_the_budget(runner: CliRunner) -> None:
    output = build_json(runner, "--window", "16000", "--reserve-output", "2000")
    budget = output["budget"]
    assert budget["window"] == 16000
    assert budget["reserved_output"] == 2000
    assert budget["available"] == math.floor(16000 * 0.75) - 2000


def test_format_anthropic_puts_the_system_prompt_apart(runner: CliRunner) -> None:
    output = build_json(runner, "--format", "anthropic")
    assert {"system", "messages", "total_tokens", "budget", "report"} <= output.keys()
    assert "Hello-Agents" in output["system"]
    assert output["messages"][0]["role"] == "user"
    assert all(m["role"] in ("user", "assistant") for m in output["messages"])


def test_format_text_prints_a_labelled_prompt(runner: CliRunner) -> None:
    output = build_json(runner, "--format", "text")
    assert {"text", "total_tokens", "budget", "report"} <= output.keys()
    assert output["text"].startswith("=== ")
    assert "今天上海天气怎么样" in output["text"]


@pytest.mark.parametrize(("tokenizer", "exact"), [("cl100k_base", True), ("o200k_base", True),
                                                  ("estimate", False)])
def test_tokenizer_option_picks_the_counter(runner: CliRunner, tokenizer: str,
                                            exact: bool) -> None:
    output = build_json(runner, "--tokenizer", tokenizer)
    assert output["report"]["tokenizer"] == tokenizer
    assert output["report"]["exact_tokens"] is exact


def test_tokenizers_count_differently(runner: CliRunner) -> None:
    totals = {name: build_json(runner, "--tokenizer", name)["total_tokens"]
              for name in ("cl100k_base", "o200k_base")}
    assert totals["cl100k_base"] != totals["o200k_base"]


@pytest.mark.parametrize("name", ["chat", "tool_heavy", "rag_qa", "doc_analysis", "simple_qa"])
def test_plan_option_takes_a_shipped_plan(runner: CliRunner, name: str) -> None:
    # The example request has tools, this turn's call and result, and a document: a shipped
    # plan without a source for one of them gets one, and its name says which.
    report = build_json(runner, "--plan", name)["report"]
    assert report["plan"].split("+")[0] == name
    assert not [w for w in report["warnings"] if "left out" in w]


def test_plan_option_takes_a_plan_file(runner: CliRunner, tmp_path: Path) -> None:
    plan = tmp_path / "mine.yaml"
    plan.write_text("name: mine\nbudget: {window: 4096, reserved_output: 512}\nsources:\n"
                    "  - {source: system}\n  - {source: tools}\n  - {source: user}\n"
                    "  - {source: tool_results}\n", "utf-8")
    output = build_json(runner, "--plan", str(plan))
    assert output["report"]["plan"] == "mine"
    assert output["budget"]["available"] == math.floor(4096 * 0.75) - 512
    roles = [m["role"] for m in output["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]


def test_debug_prints_the_seed_style_report_on_stderr(runner: CliRunner) -> None:
    result = build(runner, "--debug")
    assert result.exit_code == 0
    assert "[ContextBuilder] source=system" in result.stderr
    assert "total tokens before output" in result.stderr
    json.loads(result.stdout)


# --- failures --------------------------------------------------------------------------------

def write_request(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "request.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), "utf-8")
    return path


BAD_REQUESTS = {
    "not JSON": '{"user_input": "' + SECRET,
    "missing user_input": {"system": SECRET},
    "unknown field": {"user_input": "hi", "sytem": SECRET},
    "unknown role": {"user_input": "hi", "history": [{"role": "admin", "content": SECRET}]},
    "orphan tool result": {"user_input": "hi",
                           "turn": [{"role": "tool", "tool_call_id": "x", "content": SECRET}]},
    "malformed tool arguments": {"user_input": "hi", "turn": [
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "f", "arguments": "{" + SECRET}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"}]},
    "lone surrogate": '{"user_input": "hi \\ud800 ' + SECRET + '"}',
}


@pytest.mark.parametrize("data", list(BAD_REQUESTS.values()), ids=list(BAD_REQUESTS))
def test_bad_request_exits_2_with_one_line_error(runner: CliRunner, tmp_path: Path,
                                                 data: Any) -> None:
    result = build(runner, request=write_request(tmp_path, data))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:")
    assert SECRET not in result.stderr


def test_request_file_that_is_not_utf8_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_bytes(b'{"user_input": "caf\xe9"}')
    result = build(runner, request=path)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["--plan", "no_such_plan"], ["--tokenizer", "no_such"],
                                  ["--format", "xml"], ["--reserve-output", "999999"]],
                         ids=["plan", "tokenizer", "format", "reserve"])
def test_bad_option_exits_2_with_one_line_error(runner: CliRunner, args: list[str]) -> None:
    result = build(runner, *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(("name", "text"), [
    ("big.json", '{"name": "big", "sources": [{"source": "system", "weight": 1e308}, '
                 '{"source": "history", "weight": 1e308}, {"source": "user"}]}'),
    ("inf.yaml", "name: inf\nsources:\n  - {source: system, weight: .inf}\n"
                 "  - {source: history}\n  - {source: user}\n"),
])
def test_a_plan_whose_weights_overflow_exits_2_with_one_line(runner: CliRunner, tmp_path: Path,
                                                             name: str, text: str) -> None:
    plan = tmp_path / name
    plan.write_text(text)
    result = build(runner, "--plan", str(plan))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: PlanError: plan file " + name)


def test_a_misspelt_plan_name_is_named_with_the_shipped_plan_it_is_closest_to(
        runner: CliRunner) -> None:
    result = build(runner, "--plan", "tool_hevy")
    assert result.exit_code == 2
    assert "did you mean 'tool_heavy'?" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_request_file_that_cannot_be_read_is_named_by_its_path(runner: CliRunner,
                                                                tmp_path: Path) -> None:
    absent = tmp_path / "requests" / "absent.json"
    result = build(runner, request=absent)
    assert result.exit_code == 2
    assert f"cannot read request file {absent}: " in result.stderr


def test_a_budget_beyond_the_models_window_is_refused(runner: CliRunner) -> None:
    """``--budget`` with ``--model`` built a context the model's window could not hold."""
    result = build(runner, "--model", "gpt-4o", "--budget", "200000")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "PlanError" in result.stderr and "window of 128000" in result.stderr


def test_budget_too_small_exits_3(runner: CliRunner) -> None:
    result = build(runner, "--budget", "20")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.startswith("error:")
    report = json.loads(result.stderr.splitlines()[1])["report"]
    assert report["available"] == 20


# --- demo ------------------------------------------------------------------------------------

def test_demo_prints_the_seed_style_report(runner: CliRunner) -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.stderr
    assert "[ContextBuilder] source=" in result.stdout
    assert "total tokens before output" in result.stdout


def test_demo_runs_from_the_installed_command() -> None:
    command = Path(sys.executable).with_name("contextwright")
    if not command.exists():
        pytest.skip("the contextwright console script is not installed next to this Python")
    completed = subprocess.run([str(command), "demo"], capture_output=True, text=True,
                               timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.count("[ContextBuilder] source=") >= 6
    assert "total tokens before output" in completed.stdout


def test_build_for_a_model_and_the_responses_format(runner: CliRunner) -> None:
    output = build_json(runner, "--model", "gpt-4o", "--format", "openai-responses")
    assert output["model"] == "gpt-4o" and output["max_output_tokens"] == 4096
    assert output["budget"]["window"] == 128_000
    assert {item.get("type") for item in output["input"]} >= {"function_call",
                                                            "function_call_output"}


def test_debug_prints_the_warnings_too(runner: CliRunner, tmp_path: Path) -> None:
    request = tmp_path / "r.json"
    request.write_text(json.dumps({"user_input": "hi", "notes": ["remember"]}), "utf-8")
    result = runner.invoke(app, ["build", "--request", str(request), "--plan", "simple_qa",
                                 "--debug"])
    assert result.exit_code == 0, result.stderr
    assert "warning: request.notes was given" in result.stderr


def test_build_continues_a_previous_fingerprint(runner: CliRunner, tmp_path: Path) -> None:
    first = build_json(runner, "--cache")
    assert first["fingerprint"]["version"] == 1 and first["report"]["cache"]["previous"] is False
    saved = tmp_path / "first.json"
    saved.write_text(json.dumps(first), encoding="utf-8")  # a whole earlier output will do
    again = build_json(runner, "--previous", str(saved))
    cache = again["report"]["cache"]
    assert cache["previous"] is True and cache["prefix_tokens"] == cache["input_tokens"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 7}', encoding="utf-8")
    result = build(runner, "--previous", str(bad))
    assert result.exit_code == 2 and "fingerprint version" in result.stderr


def test_a_request_on_standard_input_builds_as_the_file_does(runner: CliRunner) -> None:
    from_file = build(runner, "--format", "openai")
    piped = runner.invoke(app, ["build", "--request", "-", "--format", "openai"],
                          input=EXAMPLE.read_bytes())
    assert piped.exit_code == 0, piped.output
    assert json.loads(piped.stdout) == json.loads(from_file.stdout)
    broken = runner.invoke(app, ["build", "--request", "-"], input=b"{not json")
    assert broken.exit_code == 2
    assert "request on standard input is not valid JSON" in broken.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--bogus"], "No such option: --bogus"),
    (["bogus"], "No such command 'bogus'"),
    (["build", "--bogus"], "No such option: --bogus"),
    (["build"], "Missing option '--request'"),
    (["build", "--request", "r.json", "--window", "abc"], "Invalid value for '--window'"),
    (["eval", "cases"], "Missing argument"),
    (["eval", "cases", "c.jsonl", "--budget", "0"], "Invalid value for '--budget'"),
    (["snapshots", "list", "--bogus"], "No such option: --bogus"),
    (["session", "list", "--bogus"], "No such option: --bogus"),
])
def test_a_usage_error_is_one_error_line_and_exit_code_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_a_group_called_with_nothing_still_shows_its_help() -> None:
    for args in ([], ["eval"], ["snapshots"]):
        result = CliRunner().invoke(app, args)
        assert "Usage:" in result.output and "error:" not in result.output, args


def test_build_says_on_stderr_what_of_the_request_it_left_out(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: mine\nbudget: {window: 8000}\nsources:\n"
                    "  - {source: system, weight: 0.1}\n  - {source: history, weight: 0.8}\n"
                    "  - {source: user, weight: 0.1}\n", encoding="utf-8")
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"user_input": "hi", "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "x",
        "parameters": {"type": "object", "properties": {}}}}]}), encoding="utf-8")
    result = CliRunner().invoke(app, ["build", "--request", str(request), "--plan", str(plan)])
    assert result.exit_code == 0
    assert "warning: request.tools was given but plan 'mine' has no tools source" in (
        result.stderr)
    assert json.loads(result.stdout)["report"]["warnings"]
