"""``eval cases`` and ``eval ablate cases`` on inputs of other shapes than plain text.

Messages with images (rendered as a list of parts), facts inside tool-call arguments written
with escapes, baselines taken over a different set of cases, and ``--limit`` on a cases file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder
from contextwright.cli_eval import _target, eval_app
from contextwright.evaluate.ablation import CasesTarget
from contextwright.evaluate.cases import build_case, parse_cases
from contextwright.evaluate.metrics import context_text, locate, message_parts

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/receipt.png",
                                            "detail": "low"}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}


def build(case: dict[str, Any], budget: int = 4000) -> Any:
    [parsed] = parse_cases((json.dumps(case) + "\n").encode(), "cases.jsonl")
    plan = BuildPlan.named("chat").with_budget(available_override=budget)
    return build_case(ContextBuilder(tokenizer="o200k_base"), parsed, plan)


# --- images ------------------------------------------------------------------------------------


def test_a_message_with_an_image_is_read_by_its_text_parts() -> None:
    history = [{"role": "user", "id": "h1", "content": [
                   {"type": "text", "text": "Here is my receipt for order KST418."}, IMAGE]},
               {"role": "assistant", "content": "Thanks, I see order KST418.", "id": "h2"}]
    case = {"id": "img", "request": {
                "system": "Be brief.", "user_input": "When will order KST418 arrive?",
                "history": history, "images": [IMAGE]},
            "must_contain": {"messages": ["h1"], "facts": ["Here is my receipt"]},
            "position": {"question_at_tail": True}}
    built = build(case)
    assert any(isinstance(m["content"], list) for m in built.messages)  # images were sent
    scores = built.result.scores
    assert (scores["completeness"], scores["position"]) == (1.0, 1.0)
    assert built.result.missing == () and built.result.misplaced == ()
    # ``tokens`` is what the model is sent, images included: the build's own count.
    assert scores["tokens"] == pytest.approx(scores["budget_use"] * 4000)


def test_the_text_helpers_read_lists_of_parts() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "first"}, IMAGE,
                                           {"type": "text", "text": "second"}]}
    assert message_parts(message) == ["first\nsecond"]
    assert context_text([message]) == "first\nsecond"
    assert locate("second", [{"role": "system", "content": "x"}, message]) == (1, 6)


# --- facts in call arguments -------------------------------------------------------------------


@pytest.mark.parametrize("fact", ["上海", 'say "hi"', "C:\\temp"])
def test_a_fact_in_escaped_call_arguments_is_shown(fact: str) -> None:
    history = [{"role": "user", "content": "Look it up, please.", "id": "u1"},
               {"role": "assistant", "content": None, "id": "a1", "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {
                       "name": "get_weather", "arguments": json.dumps({"city": fact})}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "25C cloudy", "id": "t1"},
               {"role": "assistant", "content": "It is 25C and cloudy.", "id": "a2"}]
    case = {"id": "x", "request": {"system": "sys", "user_input": "And tomorrow?",
                                   "history": history, "tools": [WEATHER]},
            "must_contain": {"facts": [fact], "messages": ["a1", "t1"]}}
    result = build(case).result
    assert result.missing == ()
    assert result.scores["completeness"] == 1.0


def test_a_fact_not_in_the_arguments_is_still_missing() -> None:
    history = [{"role": "assistant", "content": None, "id": "a1", "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {
                       "name": "get_weather", "arguments": json.dumps({"city": "上海"})}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "25C", "id": "t1"}]
    case = {"id": "x", "request": {"user_input": "And tomorrow?", "history": history,
                                   "tools": [WEATHER]},
            "must_contain": {"facts": ["北京"]}}
    assert build(case).result.missing == ('fact[0] "北京"',)


# --- baselines over other sets of cases --------------------------------------------------------


def example_lines() -> list[str]:
    return (EXAMPLES / "cases.jsonl").read_text(encoding="utf-8").splitlines()


def run(path: Path, *args: str) -> Any:
    return CliRunner().invoke(eval_app, ["cases", str(path), *args])


def test_retiring_or_adding_a_case_is_a_note_not_a_regression(tmp_path: Path) -> None:
    lines = example_lines()
    path, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run(path, "--save", str(saved)).exit_code == 0
    for index in range(len(lines)):
        retired = json.loads(lines[index])["id"]
        path.write_text("\n".join(lines[:index] + lines[index + 1:]) + "\n", encoding="utf-8")
        result = run(path, "--baseline", str(saved))
        assert result.exit_code == 0, (retired, result.stderr)
        assert "regression" not in result.stderr
        assert f"note: baseline case {retired} is not in this run" in result.stderr
    new = json.loads(lines[0])
    new["id"] = "brand-new"
    new["must_contain"] = {"facts": ["nowhere to be found"]}
    path.write_text("\n".join([*lines, json.dumps(new)]) + "\n", encoding="utf-8")
    added = run(path, "--baseline", str(saved))
    assert added.exit_code == 0, added.stderr
    assert "note: case brand-new is not in the baseline" in added.stderr
    assert "regression" not in added.stderr


def test_a_shared_case_that_gets_worse_still_regresses_overall_when_the_sets_differ(
        tmp_path: Path) -> None:
    lines = example_lines()
    path, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run(path, "--save", str(saved)).exit_code == 0
    path.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    worse = run(path, "--baseline", str(saved), "--budget", "300")
    assert worse.exit_code == 1
    assert any(line.startswith("regression: overall: completeness 1.000 → ")
               for line in worse.stderr.splitlines())


# --- ablate cases --limit ----------------------------------------------------------------------


def test_ablate_cases_limit_spreads_evenly_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps({"id": f"case{i}", "request": {
        "user_input": f"question {i}"}}) + "\n" for i in range(10)), encoding="utf-8")
    target = _target("cases", path, None, None, None, 3, "o200k_base")
    assert isinstance(target, CasesTarget)
    assert [case.id for case in target.cases] == ["case0", "case3", "case6"]
    everything = _target("cases", path, None, None, None, None, "o200k_base")
    assert isinstance(everything, CasesTarget) and len(everything.cases) == 10
