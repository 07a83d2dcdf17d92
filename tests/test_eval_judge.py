"""The judged ablation: a model answers from each built context, a judge grades, replies cached.

The model is a local fake OpenAI-compatible server (``fakes.openai_server``) speaking the real
chat-completions protocol through the real ``openai`` SDK. Its answerer reads the context it is
sent — it can only answer what the context shows — and its judge grades by the reference, so a
variant that loses the facts loses its judged score. Resumption is tested by killing a real
``contextwright`` process midway and counting the requests the rerun makes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright import ContextBuilder
from contextwright.cli_eval import eval_app
from contextwright.evaluate.judge import (
    JUDGE_SYSTEM,
    Judge,
    ReplyCache,
    UnparseableVerdict,
    compare_call,
    judge_messages,
    judged_metrics,
    parse_verdict,
    settle_all,
)
from contextwright.evaluate.records import CaseOutcome, ExpectedAnswer, ExpectedCall
from contextwright.llm import ChatReply, OpenAIChatClient, ReplyCall
from fakes.openai_server import FakeOpenAIServer, Reply, text
from generated_cases import generated_cases

CODE = re.compile(r"CODE-\d+")
ORDER = re.compile(r"ORD-\d+")
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval"


def completion(message: dict[str, Any]) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(raw_body=json.dumps(body).encode())


def tool_call(name: str, **arguments: Any) -> Reply:
    return completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_x", "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}]})


def answerer_and_judge(verdict: Callable[[str, str], str] | None = None
                       ) -> Callable[[dict[str, Any]], Reply]:
    """Answers only from what the context shows; judges by the reference answer."""
    def grade(reference: str, candidate: str) -> str:
        return "CORRECT" if reference in candidate else "WRONG"

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if body["model"] == "judge":
            prompt = messages[-1]["content"]
            reference = prompt.split("Reference answer: ", 1)[1].split("\n", 1)[0]
            candidate = prompt.split("Candidate answer: ", 1)[1].split("\n\nVerdict", 1)[0]
            return text((verdict or grade)(reference, candidate))
        seen = "\n".join(str(m.get("content") or "") for m in messages)
        if body.get("tool_choice") == "auto":
            ids = ORDER.findall(seen)
            return tool_call("track_order", order_id=ids[-1]) if ids else text("Which order?")
        codes = CODE.findall(seen)
        return text(f"The code is {codes[0]}." if codes else "I do not know.")
    return respond


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=answerer_and_judge()) as fake:
        yield fake


def judged(server: FakeOpenAIServer, cache: Path, *args: str, input: str | None = None
           ) -> Any:
    return CliRunner().invoke(eval_app, [
        "ablate", *args, "--judge-base-url", server.base_url, "--judge-model", "judge",
        "--answer-model", "answerer", "--cache-dir", str(cache), "--json",
        *([] if input is not None else ["--yes"])], input=input)


# --- prompt and parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(("reply", "verdict"), [
    ("CORRECT", True), ("WRONG", False), ("correct", True), (" Wrong.\n", False),
    ("\nCORRECT.", True),
])
def test_a_verdict_is_one_word(reply: str, verdict: bool) -> None:
    assert parse_verdict(reply) is verdict


@pytest.mark.parametrize("reply", [
    "", "CORRECT, because the dates match", "The answer is WRONG.", "CORRECT WRONG",
    "INCORRECT", "Verdict: CORRECT", "correct!", "yes", "CORRECT..",
])
def test_anything_but_one_word_is_unparseable(reply: str) -> None:
    with pytest.raises(UnparseableVerdict):
        parse_verdict(reply)


def test_the_judge_prompt_holds_question_reference_and_answer() -> None:
    system, user = judge_messages("When is the wedding?", "14 June", "On June 14th.")
    assert system == {"role": "system", "content": JUDGE_SYSTEM}
    assert "exactly one word: CORRECT or WRONG" in JUDGE_SYSTEM
    assert user["role"] == "user"
    assert user["content"] == ("Question: When is the wedding?\nReference answer: 14 June\n"
                               "Candidate answer: On June 14th.\n\nVerdict (CORRECT or WRONG):")


def test_a_call_is_exact_only_with_its_name_and_json_equal_arguments() -> None:
    expected = ExpectedCall(name="track_order", arguments={"order_id": "A1", "n": 2})
    def reply(*calls: tuple[str, str]) -> ChatReply:
        return ChatReply(content=None, tool_calls=tuple(ReplyCall(name=n, arguments=a)
                                                        for n, a in calls))
    assert compare_call(expected, reply(("track_order", '{"n": 2.0, "order_id": "A1"}'))) == (
        True, "exact")
    assert compare_call(expected, reply(("track_order", '{"order_id": "A1"}'))) == (
        False, "other arguments")
    assert compare_call(expected, reply(("cancel_order", '{"order_id": "A1", "n": 2}'))) == (
        False, "called cancel_order")
    assert compare_call(expected, reply(("track_order", "{oops"))) == (
        False, "arguments are not JSON")
    assert compare_call(expected, ChatReply(content="Sure!")) == (False, "no tool call")


def test_judge_talks_the_real_protocol_and_unparseable_verdicts_are_errors(
        tmp_path: Path) -> None:
    replies = iter([text("The code is CODE-1."), text("Probably correct")])
    with FakeOpenAIServer(responder=lambda _: next(replies)) as fake, \
            OpenAIChatClient(fake.base_url, "sk-x", max_retries=0) as client:
        cache = ReplyCache(tmp_path / "r.sqlite")
        judge = Judge(client=client, cache=cache, judge_model="judge", answer_model="answerer",
                      count=ContextBuilder(tokenizer="o200k_base").tokenizer.count)
        outcome = CaseOutcome(case_id="a", budget=100, contextwright={}, baseline={},
                              messages=[{"role": "user", "content": "Code?"}],
                              expected=ExpectedAnswer(question="Code?", answer="CODE-1"))
        task = judge.task("cases", "plan-1", outcome)
        assert task is not None
        judge.settle(task, outcome)
        scored = judge.score(task)
        cache.close()
        answer, verdict = fake.requests
    assert answer.path == verdict.path == "/v1/chat/completions"
    assert answer.headers["authorization"] == "Bearer sk-x"
    assert answer.body["model"] == "answerer" and answer.body["messages"] == outcome.messages
    assert verdict.body["model"] == "judge"
    assert verdict.body["messages"] == judge_messages("Code?", "CODE-1", "The code is CODE-1.")
    assert scored.correct is None and scored.note.startswith("unparseable verdict")
    assert judged_metrics([scored]) == {"judged_correct": None, "call_exact": None,
                                        "judge_errors": 1.0}


def test_the_cache_key_changes_with_the_plan_the_model_and_the_context(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "r.sqlite")
    count = ContextBuilder(tokenizer="o200k_base").tokenizer.count
    client = OpenAIChatClient("http://127.0.0.1:9/v1")
    outcome = CaseOutcome(case_id="a", budget=100, contextwright={}, baseline={},
                          messages=[{"role": "user", "content": "Code?"}],
                          expected=ExpectedAnswer(question="Code?", answer="CODE-1"))
    other_context = CaseOutcome(case_id="a", budget=100, contextwright={}, baseline={},
                                messages=[{"role": "user", "content": "Code??"}],
                                expected=outcome.expected)
    def key(model: str, plan: str, which: CaseOutcome) -> str:
        judge = Judge(client=client, cache=cache, judge_model="j", answer_model=model,
                      count=count)
        task = judge.task("cases", plan, which)
        assert task is not None
        return task.key
    base = key("m", "plan-1", outcome)
    assert base == key("m", "plan-1", outcome)
    assert len({base, key("m", "plan-2", outcome), key("m2", "plan-1", outcome),
                key("m", "plan-1", other_context)}) == 4
    client.close()
    cache.close()


# --- the judged ablation -----------------------------------------------------------------------


def test_judged_scores_fall_when_the_source_holding_the_facts_is_removed(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    result = judged(server, tmp_path / "cache", "cases", str(generated_cases(tmp_path)))
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    rows = {row["variant"]: row for row in output["rows"]}
    full = rows["full plan"]["metrics"]
    assert full["judged_correct"] == 1.0 and full["call_exact"] == 1.0
    assert full["judge_errors"] == 0.0
    assert rows["-rag"]["metrics"]["judged_correct"] == 0.0
    assert rows["-rag"]["delta"]["judged_correct"] == -1.0
    assert rows["-rag"]["metrics"]["call_exact"] == 1.0
    assert rows["-history"]["metrics"]["call_exact"] == 0.0
    assert "model calls:" in result.stderr and "cost: pass --price-input" in result.stderr
    assert output["notes"][0].startswith("judged by judge; answered by answerer; ")


def test_a_rerun_makes_no_call_and_identical_contexts_are_asked_once(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    cases = str(generated_cases(tmp_path))
    first = judged(server, tmp_path / "cache", "cases", cases)
    assert first.exit_code == 0, first.stderr
    made = len(server.requests)
    bodies = {json.dumps(r.body, sort_keys=True) for r in server.requests}
    assert len(bodies) == made, "no request was sent twice"
    again = judged(server, tmp_path / "cache", "cases", cases)
    assert again.exit_code == 0
    assert len(server.requests) == made
    assert json.loads(again.stdout)["rows"] == json.loads(first.stdout)["rows"]
    assert "model calls: 0 answers + up to 0 judgments" in again.stderr


def test_a_plan_change_that_changes_the_context_asks_again(server: FakeOpenAIServer,
                                                           tmp_path: Path) -> None:
    cases = str(generated_cases(tmp_path))
    assert judged(server, tmp_path / "cache", "cases", cases).exit_code == 0
    made = len(server.requests)
    other = judged(server, tmp_path / "cache", "cases", cases, "--plan", "chat")
    assert other.exit_code == 0, other.stderr
    assert len(server.requests) > made


def test_judge_errors_are_counted_and_reported_not_taken_as_wrong(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=answerer_and_judge(lambda *_: "It is correct.")) as fake:
        result = judged(fake, tmp_path / "cache", "cases", str(generated_cases(tmp_path)))
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    full = output["rows"][0]["metrics"]
    assert full["judged_correct"] is None  # three answers, none gradable
    assert full["judge_errors"] == 3.0
    assert full["call_exact"] == 1.0
    assert any('unparseable verdict "It is correct."' in note for note in output["notes"])


def test_the_estimate_comes_first_and_no_confirmation_sends_nothing(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    result = judged(server, tmp_path / "cache", "cases", str(generated_cases(tmp_path)),
                    "--price-input", "2.5", "--price-output", "10", input="n\n")
    assert result.exit_code == 1
    assert server.requests == []
    lines = result.stderr.splitlines()
    assert any(line.startswith("model calls: ") for line in lines)
    assert any(line.startswith("cost: at most $") and "$2.5 / $10 per million" in line
               for line in lines)
    assert any(line.startswith("time: about ") for line in lines)
    assert "error: not confirmed: nothing was sent" in lines


def test_input_that_ends_before_an_answer_is_no_confirmation(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    result = judged(server, tmp_path / "cache", "cases", str(generated_cases(tmp_path)),
                    input="")
    assert result.exit_code == 1 and server.requests == []
    assert result.stderr.splitlines()[-1] == "error: not confirmed: nothing was sent"


def test_a_failing_endpoint_stops_the_run_and_keeps_what_was_stored(tmp_path: Path) -> None:
    answered = 0
    lock = threading.Lock()

    def flaky(body: dict[str, Any]) -> Reply:
        nonlocal answered
        with lock:  # the calls come in on several threads
            answered += 1
            ok = answered <= 3
        return answerer_and_judge()(body) if ok else Reply(status=503)

    cases = str(generated_cases(tmp_path))
    with FakeOpenAIServer(responder=flaky) as fake:
        result = judged(fake, tmp_path / "cache", "cases", cases)
    assert result.exit_code == 1
    assert "run again to resume" in result.stderr
    assert stored(tmp_path / "cache") == 3


def test_tau_cases_are_scored_by_their_expected_call(server: FakeOpenAIServer,
                                                     tmp_path: Path) -> None:
    result = judged(server, tmp_path / "cache", "tau", "--data", str(FIXTURES / "tau"),
                    "--budget", "1000")
    assert result.exit_code == 0, result.stderr
    calls = [r.body for r in server.requests if r.body["model"] == "answerer"]
    assert calls and all(body["tool_choice"] == "auto" for body in calls)
    names = {t["function"]["name"] for t in calls[0]["tools"]}
    assert {"update_reservation_flights", "search_direct_flight"} <= names
    full = json.loads(result.stdout)["rows"][0]["metrics"]
    assert full["call_exact"] == 0.0  # the fake calls track_order: never the expected write
    assert full["judged_correct"] is None


# --- resumption after a kill -------------------------------------------------------------------


def stored(cache: Path) -> int:
    """Distinct requests answered: a reply reused for an identical request is one of them."""
    with sqlite3.connect(cache / "replies.sqlite") as db:
        return int(db.execute("SELECT COUNT(DISTINCT request) FROM replies").fetchone()[0])


def test_a_killed_run_resumes_and_makes_only_the_missing_calls(tmp_path: Path) -> None:
    cases = str(generated_cases(tmp_path))
    # One call at a time in every run: with more in flight, two identical judge requests (the
    # same question and the same answer from two variants) may both be sent before either is
    # stored, so the count of calls a run makes would depend on timing.
    one = ("--judge-concurrency", "1")
    with FakeOpenAIServer(responder=answerer_and_judge()) as clean:
        assert judged(clean, tmp_path / "clean", "cases", cases, *one).exit_code == 0
        total = len(clean.requests)
    assert total >= 8

    hold_at = total // 2
    release = threading.Event()
    respond = answerer_and_judge()

    def holding(body: dict[str, Any]) -> Reply:
        if len(killed.requests) >= hold_at:
            release.wait(30)  # the client waits here until it is killed
        return respond(body)

    cache = tmp_path / "cache"
    with FakeOpenAIServer(responder=holding) as killed:
        process = subprocess.Popen(
            [sys.executable, "-c", "from contextwright.cli import main; main()", "eval",
             "ablate", "cases", cases, "--judge-base-url", killed.base_url, "--judge-model",
             "judge", "--answer-model", "answerer", "--cache-dir", str(cache), "--yes",
             "--judge-concurrency", "1"],  # one call in flight: the kill leaves exactly one
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        deadline = time.monotonic() + 60
        while len(killed.requests) < hold_at and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        release.set()
    assert len(killed.requests) == hold_at
    kept = stored(cache)
    assert kept == hold_at - 1  # every answered call was stored; the one in flight was not

    with FakeOpenAIServer(responder=answerer_and_judge()) as rerun:
        resumed = judged(rerun, cache, "cases", cases, *one)
        assert resumed.exit_code == 0, resumed.stderr
        assert len(rerun.requests) == total - kept
    with FakeOpenAIServer(responder=answerer_and_judge()) as clean:
        expected_rows = json.loads(judged(clean, tmp_path / "clean", "cases", cases).stdout)
    assert json.loads(resumed.stdout)["rows"] == expected_rows["rows"]


@pytest.mark.parametrize(("suite", "reference"), [("locomo", "Pebble"),
                                                  ("hotpotqa", "the Lerr")])
def test_question_suites_are_judged_against_their_reference_answers(
        server: FakeOpenAIServer, tmp_path: Path, suite: str, reference: str) -> None:
    budget = "4000" if suite == "locomo" else "300"
    result = judged(server, tmp_path / "cache", suite, "--data", str(FIXTURES / suite),
                    "--budget", budget)
    assert result.exit_code == 0, result.stderr
    prompts = [r.body["messages"][-1]["content"] for r in server.requests
               if r.body["model"] == "judge"]
    assert any(f"Reference answer: {reference}\n" in prompt for prompt in prompts)
    full = json.loads(result.stdout)["rows"][0]["metrics"]
    assert full["judged_correct"] == 0.0  # the fake answers only codes: every grade is WRONG
    assert full["judge_errors"] == 0.0 and full["call_exact"] is None


# --- calls in flight at once -------------------------------------------------------------------


def test_calls_go_out_concurrently_and_score_as_a_serial_run(tmp_path: Path) -> None:
    cases = str(generated_cases(tmp_path))
    with FakeOpenAIServer(responder=answerer_and_judge()) as serial:
        one = judged(serial, tmp_path / "serial", "cases", cases, "--judge-concurrency", "1")
        assert one.exit_code == 0, one.stderr
        serial_bodies = sorted(json.dumps(r.body, sort_keys=True) for r in serial.requests)
    in_flight, most = 0, 0
    lock = threading.Lock()
    together = threading.Event()
    respond = answerer_and_judge()

    def overlapping(body: dict[str, Any]) -> Reply:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
            if in_flight >= 2:
                together.set()
        together.wait(5)  # the first call waits for a second one to arrive
        try:
            return respond(body)
        finally:
            with lock:
                in_flight -= 1

    with FakeOpenAIServer(responder=overlapping) as fake:
        four = judged(fake, tmp_path / "four", "cases", cases, "--judge-concurrency", "4")
        assert four.exit_code == 0, four.stderr
        bodies = sorted(json.dumps(r.body, sort_keys=True) for r in fake.requests)
    assert most >= 2, "calls were sent one at a time"
    assert bodies == serial_bodies, "the same calls, each once, in any order"
    assert json.loads(four.stdout)["rows"] == json.loads(one.stdout)["rows"]
    assert "4 at a time" in four.stderr


def test_the_same_judgment_from_two_groups_in_flight_is_sent_once(tmp_path: Path) -> None:
    # Two contexts that differ (two answer calls) get the same answer, so their judgment
    # requests are identical; the fake holds a judgment until a second one arrives (or 1 s).
    respond = answerer_and_judge()
    second_judgment = threading.Event()
    judgments = 0
    lock = threading.Lock()

    def holding_judgments(body: dict[str, Any]) -> Reply:
        nonlocal judgments
        if body["model"] == "judge":
            with lock:
                judgments += 1
                if judgments == 2:
                    second_judgment.set()
            second_judgment.wait(1.0)
        return respond(body)

    expected = ExpectedAnswer(question="Code?", answer="CODE-1")
    with FakeOpenAIServer(responder=holding_judgments) as fake, \
            OpenAIChatClient(fake.base_url, "sk-x", max_retries=0) as client:
        cache = ReplyCache(tmp_path / "r.sqlite")
        judge = Judge(client=client, cache=cache, judge_model="judge", answer_model="answerer",
                      count=ContextBuilder(tokenizer="o200k_base").tokenizer.count)
        groups = []
        for asked in ("Code?", "The code, please?"):
            outcome = CaseOutcome(case_id=asked, budget=100, contextwright={}, baseline={},
                                  messages=[{"role": "user", "content": asked}],
                                  expected=expected)
            task = judge.task("cases", "plan-1", outcome)
            assert task is not None
            groups.append([(task, outcome)])
        settle_all(judge, groups, concurrency=2)
        scores = [judge.score(task) for [(task, _)] in groups]
        cache.close()
    assert judgments == 1
    assert judge.calls_made == 3  # two answers, one judgment
    assert [s.correct for s in scores] == [False, False]  # "I do not know." is WRONG


def test_a_fatal_error_under_concurrency_stops_new_calls_and_keeps_the_replies(
        tmp_path: Path) -> None:
    lock = threading.Lock()
    answered = 0

    def failing_after_two(body: dict[str, Any]) -> Reply:
        nonlocal answered
        with lock:
            answered += 1
            ok = answered <= 2
        return answerer_and_judge()(body) if ok else Reply(status=503)

    cases = str(generated_cases(tmp_path))
    # One call at a time in every run: with more in flight, two identical judge requests (the
    # same question and the same answer from two variants) may both be sent before either is
    # stored, so the count of calls a run makes would depend on timing.
    one = ("--judge-concurrency", "1")
    with FakeOpenAIServer(responder=answerer_and_judge()) as clean:
        assert judged(clean, tmp_path / "clean", "cases", cases, *one).exit_code == 0
        total = len(clean.requests)
    with FakeOpenAIServer(responder=failing_after_two) as fake:
        result = judged(fake, tmp_path / "cache", "cases", cases, "--judge-concurrency", "3")
        calls = {json.dumps(r.body, sort_keys=True) for r in fake.requests}
    assert result.exit_code == 1
    assert "run again to resume" in result.stderr
    assert stored(tmp_path / "cache") == 2
    # Each of the 3 threads has at most the call it was making and one more it started while
    # the first failure was still being retried by the SDK; the rest are never sent.
    assert len(calls) <= 2 + 2 * 3 < total


# --- eval cases, judged ------------------------------------------------------------------------


def judged_cases(server: FakeOpenAIServer, cache: Path, *args: str) -> Any:
    return CliRunner().invoke(eval_app, [
        "cases", *args, "--judge-base-url", server.base_url, "--judge-model", "judge",
        "--answer-model", "answerer", "--cache-dir", str(cache), "--yes"])


def test_eval_cases_judges_each_case_that_expects_an_answer_or_a_call(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    result = judged_cases(server, tmp_path / "cache", str(generated_cases(tmp_path)), "--json")
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    scores = {case["id"]: case["scores"] for case in output["cases"]}
    assert {scores[f"vault-{i}"]["judged_correct"] for i in range(3)} == {1.0}
    assert scores["order"]["call_exact"] == 1.0 and "judged_correct" not in scores["order"]
    assert output["overall"]["judged_correct"] == 1.0 and output["overall"]["call_exact"] == 1.0
    assert output["metrics"][-2:] == ["judged_correct", "call_exact"]
    assert output["notes"][0].startswith("judged by judge; answered by answerer; ")
    assert "model calls: 4 answers + up to 3 judgments" in result.stderr


def test_a_judged_grade_that_falls_is_a_regression_against_the_baseline(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    cases = str(generated_cases(tmp_path))
    saved = tmp_path / "baseline.json"
    first = judged_cases(server, tmp_path / "cache", cases, "--save", str(saved))
    assert first.exit_code == 0, first.stderr
    with FakeOpenAIServer(responder=answerer_and_judge(lambda *_: "WRONG")) as harsh:
        again = judged_cases(harsh, tmp_path / "other", cases, "--baseline", str(saved))
    assert again.exit_code == 1
    assert "regression: overall: judged_correct 1.000 → 0.000 (tolerance 0)" in again.stderr
    assert "regression: case vault-0: judged_correct 1.000 → 0.000" in again.stderr
    table = again.stdout.splitlines()
    assert "judged_correct" in table[2] and "call_exact" in table[2]


def test_a_judged_run_whose_judge_grades_nothing_is_a_regression_an_unjudged_one_is_not(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    cases = str(generated_cases(tmp_path))
    saved = tmp_path / "baseline.json"
    assert judged_cases(server, tmp_path / "cache", cases, "--save", str(saved)).exit_code == 0
    with FakeOpenAIServer(responder=answerer_and_judge(lambda *_: "no idea")) as muddled:
        again = judged_cases(muddled, tmp_path / "other", cases, "--baseline", str(saved))
    assert again.exit_code == 1, again.stderr
    assert "regression: case vault-0: judged_correct 1.000 → no grade now" in again.stderr
    # A run without a judge is compared on what it measures, not on the grades.
    plain = CliRunner().invoke(eval_app, ["cases", cases, "--baseline", str(saved)])
    assert plain.exit_code == 0, plain.stderr


def test_cases_without_a_judge_have_no_judged_columns(tmp_path: Path) -> None:
    result = CliRunner().invoke(eval_app, ["cases", str(generated_cases(tmp_path)), "--json"])
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    assert "judged_correct" not in output["metrics"]
    assert "judged_correct" not in output["overall"]


def test_a_judge_without_a_model_is_refused_before_anything_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(eval_app, ["cases", str(generated_cases(tmp_path)),
                                           "--judge-base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2
    assert "--judge-base-url and --judge-model go together" in result.stderr


@pytest.mark.parametrize("option", [
    ["--answer-model", "m"], ["--cache-dir", "c"], ["--price-input", "1", "--price-output", "2"],
    ["--judge-concurrency", "2"], ["--yes"], ["--api-key", "k"], ["--timeout", "5"]])
def test_a_judge_only_option_without_a_judge_is_refused_not_ignored(
        tmp_path: Path, option: list[str]) -> None:
    cases = str(generated_cases(tmp_path))
    for command in (["cases", cases], ["ablate", "cases", cases]):
        result = CliRunner().invoke(eval_app, [*command, *option])
        assert result.exit_code == 2, result.output
        assert result.stderr == f"error: {option[0]} applies only to a judged run " \
            "(--judge-base-url and --judge-model)\n"


def test_an_api_key_in_the_environment_is_no_request_to_judge(tmp_path: Path) -> None:
    result = CliRunner().invoke(eval_app, ["cases", str(generated_cases(tmp_path))],
                                env={"OPENAI_API_KEY": "k"})
    assert result.exit_code == 0, result.stderr


def test_half_a_price_is_refused(server: FakeOpenAIServer, tmp_path: Path) -> None:
    result = judged_cases(server, tmp_path / "cache", str(generated_cases(tmp_path)),
                          "--price-input", "1")
    assert result.exit_code == 2
    assert result.stderr == "error: --price-input and --price-output go together\n"


@pytest.mark.parametrize("where", ["a-file", "a-file/below", "/proc/no-folder"])
def test_a_cache_dir_that_cannot_hold_the_cache_is_one_error_line(
        server: FakeOpenAIServer, tmp_path: Path, where: str) -> None:
    (tmp_path / "a-file").write_text("")
    cache = tmp_path / where if not where.startswith("/") else Path(where)
    result = judged_cases(server, cache, str(generated_cases(tmp_path)))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: StoreError: cannot use reply cache folder ")
    assert result.stderr.count("\n") == 1 and not server.requests
