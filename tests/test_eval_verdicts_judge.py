"""A judge reply that is not a verdict: an error of its case, never stored, asked again.

Judged runs go through the real CLI and the real ``openai`` SDK against the local fake
OpenAI-compatible server; the reply cache is the real SQLite file.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli_eval import eval_app
from contextwright.evaluate.judge import UnparseableVerdict, parse_verdict
from fakes.openai_server import FakeOpenAIServer, Reply, text

CASE = {"id": "docs", "request": {
    "system": "Answer from the documents.", "user_input": "What is the refund window?",
    "documents": [{"id": "d1", "text": "Refunds are accepted within 30 days of purchase."}]},
    "must_contain": {"documents": ["d1"]}, "answer": "30 days"}


class Endpoint:
    """Answers every question with the documents it is sent; the judge says ``verdict``."""

    def __init__(self, verdict: str) -> None:
        self.verdict = verdict

    def __call__(self, body: dict[str, Any]) -> Reply:
        if body["model"] == "judge":
            return text(self.verdict)
        return text("Within 30 days of purchase.")


def judged_cases(server: FakeOpenAIServer, cases: Path, cache: Path, *args: str) -> Any:
    return CliRunner().invoke(eval_app, [
        "cases", str(cases), "--judge-base-url", server.base_url, "--judge-model", "judge",
        "--answer-model", "answerer", "--cache-dir", str(cache), "--yes", "--json", *args])


def write_cases(tmp_path: Path, *cases: dict[str, Any]) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in cases), "utf-8")
    return path


def judge_calls(server: FakeOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.body["model"] == "judge")


def stored_judgments(cache: Path) -> list[str]:
    with sqlite3.connect(cache / "replies.sqlite") as db:
        return [row[0] for row in db.execute(
            "SELECT reply FROM replies WHERE kind = 'judgment'")]


@pytest.mark.parametrize(("reply", "verdict"), [
    ("**CORRECT**", True), ("*wrong*", False), ("`CORRECT`", True), ('"Correct."', True),
    ("**WRONG**.", False), ("__correct__", True), ("“CORRECT”", True), (" **CORRECT.** ", True),
])
def test_a_verdict_in_markdown_emphasis_or_quotes_is_read(reply: str, verdict: bool) -> None:
    assert parse_verdict(reply) is verdict


@pytest.mark.parametrize("reply", [
    "**CORRECT*", "*CORRECT**", '"CORRECT', "**CORRECT.**.", "**CORRECT, because it matches**",
    "**Verdict:** CORRECT", "”CORRECT“",
])
def test_a_wrapping_that_does_not_close_alike_is_not_a_verdict(reply: str) -> None:
    with pytest.raises(UnparseableVerdict):
        parse_verdict(reply)


def test_an_unreadable_verdict_fails_the_run_is_not_stored_and_is_asked_again(
        tmp_path: Path) -> None:
    cases = write_cases(tmp_path, CASE)
    cache = tmp_path / "cache"
    endpoint = Endpoint("I think the answer is fine.")
    with FakeOpenAIServer(responder=endpoint) as server:
        first = judged_cases(server, cases, cache, "--save", str(tmp_path / "saved.json"))
        assert first.exit_code == 1, first.stderr
        assert "is not a verdict" in first.stderr and "run again" in first.stderr
        row = json.loads(first.stdout)["cases"][0]
        assert row["scores"]["judged_correct"] is None
        assert any('docs: not judged: unparseable verdict "I think' in note
                   for note in json.loads(first.stdout)["notes"])
        assert stored_judgments(cache) == []

        endpoint.verdict = "CORRECT"  # the judge is fixed
        calls = len(server.requests)
        fixed = judged_cases(server, cases, cache)
        assert fixed.exit_code == 0, fixed.stderr
        assert len(server.requests) == calls + 1 and judge_calls(server) == 2  # the answer is kept
        assert json.loads(fixed.stdout)["cases"][0]["scores"]["judged_correct"] == 1.0
        assert stored_judgments(cache) == ["CORRECT"]


def test_an_unreadable_judgment_stored_by_an_earlier_run_is_asked_again(tmp_path: Path) -> None:
    cases = write_cases(tmp_path, CASE)
    cache = tmp_path / "cache"
    saved = tmp_path / "saved.json"
    with FakeOpenAIServer(responder=Endpoint("CORRECT")) as server:
        assert judged_cases(server, cases, cache, "--save", str(saved)).exit_code == 0
        with sqlite3.connect(cache / "replies.sqlite") as db:
            db.execute("UPDATE replies SET reply = 'Probably correct' WHERE kind = 'judgment'")
        calls = judge_calls(server)
        rerun = judged_cases(server, cases, cache, "--baseline", str(saved))
        assert rerun.exit_code == 0, rerun.stderr
        assert judge_calls(server) == calls + 1
        assert stored_judgments(cache) == ["CORRECT"]


def test_one_unreadable_judgment_request_is_sent_once_for_every_case_that_makes_it(
        tmp_path: Path) -> None:
    cases = write_cases(tmp_path, CASE, {**CASE, "id": "docs-again"})
    with FakeOpenAIServer(responder=Endpoint("Looks right to me")) as server:
        result = judged_cases(server, cases, tmp_path / "cache", "--judge-concurrency", "1")
        assert result.exit_code == 1
        assert judge_calls(server) == 1
    notes = json.loads(result.stdout)["notes"]
    assert sum("not judged: unparseable verdict" in note for note in notes) == 2


def test_an_ablation_warns_of_unreadable_verdicts_and_counts_them(tmp_path: Path) -> None:
    cases = write_cases(tmp_path, CASE)
    with FakeOpenAIServer(responder=Endpoint("Seems fine")) as server:
        result = CliRunner().invoke(eval_app, [
            "ablate", "cases", str(cases), "--judge-base-url", server.base_url,
            "--judge-model", "judge", "--answer-model", "answerer",
            "--cache-dir", str(tmp_path / "cache"), "--yes", "--json"])
    assert result.exit_code == 0, result.stderr
    assert "warning: the judge's reply to" in result.stderr
    assert json.loads(result.stdout)["rows"][0]["metrics"]["judge_errors"] == 1.0


def test_a_run_without_the_judge_says_the_baselines_grades_were_not_compared(
        tmp_path: Path) -> None:
    cases = write_cases(tmp_path, CASE)
    saved = tmp_path / "saved.json"
    with FakeOpenAIServer(responder=Endpoint("WRONG")) as server:
        assert judged_cases(server, cases, tmp_path / "cache", "--save", str(saved)
                            ).exit_code == 0
    plain = CliRunner().invoke(eval_app, ["cases", str(cases), "--baseline", str(saved)])
    assert plain.exit_code == 0, plain.stderr
    assert ("note: the baseline has judged scores (judged_correct) and this run is not judged"
            in plain.stderr)
