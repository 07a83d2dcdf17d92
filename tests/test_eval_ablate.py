"""``contextwright eval ablate``: what an ablation removes, and the delta table it prints.

The cases fixture is generated here (facts that only the documents hold, an order id that only
the history holds), so taking out the source that holds them must lower completeness; the
suites run on the hand-made folders of ``tests/fixtures/eval``, and once on the real τ-bench
dev set under the ``data`` marker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder
from contextwright.cli_eval import eval_app
from contextwright.core.plan import plan_from_mapping
from contextwright.evaluate.ablation import CasesTarget, ablations, run_ablation
from contextwright.evaluate.cases import load_cases
from generated_cases import generated_cases

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval"

def test_ablations_are_read_from_the_plan() -> None:
    labels = [a.label for a in ablations([BuildPlan.named("tool_heavy")])]
    assert labels == ["-system", "-env", "-tools", "-history", "-history.digest",
                      "-history.tiers", "-history.compaction", "-history.partial_rounds",
                      "-tool_results", "-tool_results.digest", "-tool_results.compaction"]
    chat = [a.label for a in ablations([BuildPlan.named("chat")])]
    assert "-history.recall" in chat and "-user" not in chat
    assert "-repeat_question" in [a.label for a in ablations([BuildPlan.named("rag_qa")])]


def test_an_ablation_removes_exactly_its_part_or_does_not_apply() -> None:
    plan = BuildPlan.named("tool_heavy")
    by_label = {a.label: a for a in ablations([plan])}
    no_digest = by_label["-history.digest"].apply(plan)
    assert no_digest is not None
    history = no_digest.spec("history")
    assert history is not None and "digest_share" not in history.options
    assert history.options["tool_full"] == 2  # the tiers stay
    assert no_digest.spec("tool_results") == plan.spec("tool_results")
    raw = by_label["-history.compaction"].apply(plan)
    assert raw is not None and raw.spec("history").options["compact_tool_results"] is False
    without_tools = by_label["-tools"].apply(plan)
    assert without_tools is not None and without_tools.spec("tools") is None
    assert by_label["-tools"].apply(BuildPlan.named("chat")) is None
    custom = plan_from_mapping({"name": "p", "sources": [
        {"source": "history", "options": {"max_rounds": 2}}, {"source": "user"}]})
    assert [a.label for a in ablations([custom])] == ["-history", "-history.compaction",
                                                     "-history.max_rounds"]


def test_removing_the_source_that_holds_the_facts_lowers_completeness(tmp_path: Path) -> None:
    target = CasesTarget(cases=load_cases(generated_cases(tmp_path)),
                         builder=ContextBuilder(tokenizer="o200k_base"))
    result = run_ablation(target)
    rows = {row.label: row for row in result.rows}
    assert rows["full plan"].metrics["completeness"] == 1.0
    # The documents hold all the three vault cases need; the history two of the three things
    # the order case needs (its tool is offered either way). Four cases, each weighs 1/4.
    assert result.delta(rows["-rag"], "completeness") == pytest.approx(-0.75)
    assert rows["-rag"].applied == 3
    assert result.delta(rows["-history"], "completeness") == pytest.approx(-(2 / 3) / 4)
    assert result.delta(rows["-rag"], "noise") is not None
    assert result.delta(rows["-env"], "completeness") == 0.0


def test_the_cli_prints_the_delta_table_for_a_cases_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(eval_app, ["ablate", "cases", str(generated_cases(tmp_path))])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ablation of cases (plan each case's plan")
    rows = {line.split(" | ")[1].strip(): line for line in lines if " | " in line}
    assert "full plan" in rows and "-rag" in rows
    assert "0.250 (-0.750)" in rows["-rag"]
    assert "-rag: the rag source removed" in lines
    assert any(line.startswith("-rag @ per case: applies to 3 of 4 cases") for line in lines)


def test_json_of_a_suite_ablation_has_every_variant_and_delta() -> None:
    result = CliRunner().invoke(eval_app, ["ablate", "tau", "--data", str(FIXTURES / "tau"),
                                           "--budget", "500", "--json"])
    assert result.exit_code == 0, result.stderr
    output: dict[str, Any] = json.loads(result.stdout)
    assert output["target"] == "tau" and output["cases"] == 2
    variants = [row["variant"] for row in output["rows"]]
    assert variants[0] == "full plan" and "-history" in variants
    history = next(row for row in output["rows"] if row["variant"] == "-history")
    assert history["budget"] == 500
    assert history["delta"]["fact_survival"] < 0
    full = output["rows"][0]
    assert all(value in (None, 0.0) for value in full["delta"].values())


def test_a_variant_the_suite_cannot_run_is_shown_as_such() -> None:
    result = CliRunner().invoke(eval_app, ["ablate", "hotpotqa", "--data",
                                           str(FIXTURES / "hotpotqa"), "--budget", "300"])
    assert result.exit_code == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if "| -rag " in line)
    assert "n/a" in row
    assert any(line.startswith("-rag @ 300: PlanError") for line in result.stdout.splitlines())


@pytest.mark.parametrize("args", [
    ["ablate", "nonsense", "--data", "."],
    ["ablate", "tau"],
    ["ablate", "cases"],
    ["ablate", "tau", "--data", str(FIXTURES / "tau"), "--judge-model", "m"],
])
def test_bad_targets_and_options_are_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(eval_app, args)
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: ")


@pytest.mark.data
def test_on_tau_dev_the_digest_and_history_carry_the_facts(shared_data: Path) -> None:
    result = CliRunner().invoke(eval_app, [
        "ablate", "tau", "--data", str(shared_data / "tau-bench-airline-dev"), "--budget",
        "1000", "--limit", "12", "--json"])
    assert result.exit_code == 0, result.stderr
    rows = {row["variant"]: row for row in json.loads(result.stdout)["rows"]}
    assert rows["full plan"]["metrics"]["pair_integrity"] == 1.0
    assert rows["-history.digest"]["delta"]["fact_survival"] < -0.05
    assert rows["-history"]["delta"]["fact_survival"] < rows["-history.digest"]["delta"][
        "fact_survival"]


def test_a_removed_source_stays_removed_and_the_parts_the_plan_covers_stay_covered(
        tmp_path: Path) -> None:
    call = {"role": "assistant", "content": None, "id": "t1", "tool_calls": [
        {"id": "k1", "type": "function", "function": {"name": "track_order",
                                                      "arguments": '{"order_id": "ORD-9"}'}}]}
    line = {"id": "turn", "plan": "chat",
            "request": {"user_input": "Where is ORD-9?", "history": [
                {"role": "user", "content": "Hello, I have a question.", "id": "h1"},
                {"role": "assistant", "content": "Sure, go ahead.", "id": "h2"}],
                "turn": [call, {"role": "tool", "tool_call_id": "k1", "id": "t2",
                                "content": '{"status": "shipped"}'}]},
            "must_contain": {"messages": ["h1", "t1", "t2"]}}
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(line) + "\n", "utf-8")
    target = CasesTarget(cases=load_cases(path), builder=ContextBuilder(tokenizer="o200k_base"))
    assert "-tool_results" in [a.label for a in ablations(target.plans())]  # chat+tool_results
    result = run_ablation(target)
    rows = {row.label: row for row in result.rows}
    assert rows["full plan"].metrics["completeness"] == 1.0
    # Without history the turn's call and result are still shown; without them, history is.
    assert rows["-history"].metrics["completeness"] == pytest.approx(2 / 3)
    assert rows["-tool_results"].metrics["completeness"] == pytest.approx(1 / 3)
