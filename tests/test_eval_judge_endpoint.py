"""A judged run against an endpoint that cannot serve it: interrupted, refusing, misconfigured.

The endpoint is the local fake chat-completions server (``fakes.openai_server``, 127.0.0.1); the
interrupted run is a real ``contextwright`` process sent SIGINT by the fake once it has seen a
set number of requests, so what is checked is what went over the wire after Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli_eval import eval_app
from contextwright.errors import LLMError, StoreError
from contextwright.evaluate import judge
from contextwright.evaluate.judge import JUDGE_SYSTEM, ReplyCache, compare_call, stops_the_run
from contextwright.evaluate.records import ExpectedCall
from contextwright.llm import ChatReply, OpenAIChatClient, ReplyCall
from fakes.openai_server import FakeOpenAIServer, Reply, error, text

CASES = 20


def cases_file(tmp_path: Path, count: int = CASES) -> Path:
    """``count`` cases, each with a fact in its history and a reference answer to judge."""
    path = tmp_path / "cases.jsonl"
    lines = []
    for i in range(count):
        lines.append(json.dumps({
            "id": f"c{i}",
            "request": {"system": "Answer briefly.", "user_input": f"What is code {i}?",
                        "history": [{"role": "user", "content": f"Code {i} is CODE-{1000 + i}.",
                                     "id": "h1"},
                                    {"role": "assistant", "content": "Noted.", "id": "h2"}]},
            "must_contain": {"facts": [f"CODE-{1000 + i}"]},
            "answer": f"CODE-{1000 + i}"}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def answer_or_grade(body: dict[str, Any]) -> Reply:
    if body["messages"][0].get("content") == JUDGE_SYSTEM:
        return text("CORRECT")
    return text("It is the code.")


def judged_cases(base_url: str, cases: Path, cache: Path, *args: str) -> Any:
    return CliRunner().invoke(eval_app, [
        "cases", str(cases), "--judge-base-url", base_url, "--judge-model", "judge",
        "--cache-dir", str(cache), "--yes", *args])


# --- Ctrl-C ------------------------------------------------------------------------------------


def test_ctrl_c_stops_the_queued_calls_of_a_concurrent_judged_run(tmp_path: Path) -> None:
    signal_at = 4
    child: list[subprocess.Popen[bytes]] = []
    lock = threading.Lock()
    seen = 0

    def interrupting(body: dict[str, Any]) -> Reply:
        nonlocal seen
        with lock:
            seen += 1
            now = seen
        if now == signal_at:
            child[0].send_signal(signal.SIGINT)
            # Answer a little later, so the interrupted process is already stopping when this
            # call returns (what is counted is requests, never time).
            time.sleep(0.3)
        return answer_or_grade(body)

    with FakeOpenAIServer(responder=interrupting) as fake:
        child.append(subprocess.Popen(
            [sys.executable, "-c", "from contextwright.cli import main; main()", "eval",
             "cases", str(cases_file(tmp_path)), "--judge-base-url", fake.base_url,
             "--judge-model", "judge", "--cache-dir", str(tmp_path / "cache"), "--yes",
             "--judge-concurrency", "2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}))
        try:
            code = child[0].wait(60)
        finally:
            if child[0].poll() is None:
                child[0].kill()
        sent = len(fake.requests)
    assert code != 0
    # The calls in flight (two threads, an answer and its judgment each) may finish; none of
    # the queued ones (2 per case, 40 in all) is sent.
    assert signal_at <= sent <= signal_at + 4 < 2 * CASES


# --- an endpoint that refuses the key or the model ---------------------------------------------


@pytest.mark.parametrize("status", [401, 403, 404])
def test_an_endpoint_refusing_the_key_or_model_stops_the_run_with_exit_1(
        tmp_path: Path, status: int) -> None:
    with FakeOpenAIServer(responder=lambda _: error(status)) as fake:
        result = judged_cases(fake.base_url, cases_file(tmp_path, 3), tmp_path / "cache",
                              "--judge-concurrency", "1")
        sent = len(fake.requests)
    assert result.exit_code == 1, result.stdout
    assert sent == 1
    assert f"HTTP {status}" in result.stderr
    assert "refuses the API key or the model" in result.stderr
    assert result.stdout == ""


def test_only_the_endpoint_statuses_stop_a_run_a_bad_request_fails_its_case() -> None:
    def status(code: int) -> LLMError:
        return LLMError(f"HTTP {code}", kind="status", status_code=code)
    assert all(stops_the_run(status(code)) for code in (401, 403, 404, 408, 429, 500, 503))
    assert not any(stops_the_run(status(code)) for code in (400, 413, 422))


@pytest.mark.parametrize("command", ["cases", "ablate"])
def test_a_run_whose_every_request_is_refused_prints_its_table_and_exits_1(
        tmp_path: Path, command: str) -> None:
    """A 400 fails only its task, but a run with tasks left unjudged must not pass a CI check."""
    cases = cases_file(tmp_path, 3)
    with FakeOpenAIServer(responder=lambda _: error(400)) as fake:
        result = CliRunner().invoke(eval_app, [
            command, *(["cases"] if command == "ablate" else []), str(cases),
            "--judge-base-url", fake.base_url, "--judge-model", "judge",
            "--cache-dir", str(tmp_path / "cache"), "--yes", "--json"])
        sent = len(fake.requests)
    assert result.exit_code == 1, result.stderr
    assert sent >= 3  # every task was asked: a 400 stops nothing
    assert json.loads(result.stdout)  # the table is still printed
    assert "judged task(s) failed at the endpoint" in result.stderr


def test_a_judged_run_with_every_call_answered_exits_0(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=answer_or_grade) as fake:
        result = judged_cases(fake.base_url, cases_file(tmp_path, 3), tmp_path / "cache")
    assert result.exit_code == 0, result.stderr


# --- the reply cache ---------------------------------------------------------------------------


def test_a_file_that_is_not_a_reply_cache_is_one_error_line(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "replies.sqlite").write_bytes(b"this is not a database at all" * 100)
    other = tmp_path / "other"
    other.mkdir()
    with sqlite3.connect(other / "replies.sqlite") as db:
        db.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, value TEXT)")
    for folder in (corrupt, other):
        with pytest.raises(StoreError, match="not a contextwright reply cache"):
            ReplyCache(folder / "replies.sqlite")
        with FakeOpenAIServer(responder=answer_or_grade) as fake:
            result = judged_cases(fake.base_url, cases_file(tmp_path, 1), folder)
            assert fake.requests == []
        assert result.exit_code == 2
        assert result.stderr.startswith("error: StoreError: reply cache ")
        assert "--cache-dir" in result.stderr and "Traceback" not in result.stderr


# --- a malformed base URL ----------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://[::1", "http://localhost:80x/v1", "127.0.0.1:8000/v1",
                                 "ftp://127.0.0.1/v1"])
def test_a_malformed_base_url_is_bad_input_exit_2(tmp_path: Path, url: str) -> None:
    with pytest.raises(LLMError, match="not a valid http") as raised:
        OpenAIChatClient(url)
    assert raised.value.kind == "config"
    result = judged_cases(url, cases_file(tmp_path, 1), tmp_path / "cache")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: LLMError: base URL ")
    assert "resume" not in result.stderr and result.stdout == ""


def test_good_base_urls_are_taken() -> None:
    for url in ("http://127.0.0.1:8000/v1", "https://api.openai.com/v1", "http://[::1]:8000/v1",
                "HTTP://localhost/v1"):
        OpenAIChatClient(url).close()


# --- call_exact is JSON equality ---------------------------------------------------------------


def test_call_exact_tells_true_from_1_and_false_from_0() -> None:
    expected = ExpectedCall(name="alarm", arguments={"repeat": 1, "snooze": False,
                                                     "days": [1, 2], "at": {"h": 7}})
    def called(arguments: dict[str, Any]) -> tuple[bool, str]:
        return compare_call(expected, ChatReply(content=None, tool_calls=(
            ReplyCall(name="alarm", arguments=json.dumps(arguments)),)))
    assert called({"repeat": 1.0, "snooze": False, "days": [1, 2.0], "at": {"h": 7}}) == (
        True, "exact")
    assert called({"repeat": True, "snooze": 0, "days": [1, 2], "at": {"h": 7}}) == (
        False, "other arguments")
    assert called({"repeat": 1, "snooze": False, "days": [True, 2], "at": {"h": 7}}) == (
        False, "other arguments")
    assert called({"repeat": 1, "snooze": False, "days": [1, 2], "at": {"h": True}}) == (
        False, "other arguments")
    assert not judge.json_equal([1], {"0": 1}) and not judge.json_equal(None, False)
    assert judge.json_equal({"a": [None, "x"]}, {"a": [None, "x"]})


def test_a_reply_call_with_object_arguments_is_read_as_its_json_text() -> None:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "function": {"name": "alarm", "arguments": {"repeat": 1}}}]}}]}
    with FakeOpenAIServer([Reply(raw_body=json.dumps(body).encode())]) as fake, \
            OpenAIChatClient(fake.base_url, max_retries=0) as client:
        reply = client.respond([{"role": "user", "content": "Wake me."}], model="m",
                               tools=[{"type": "function", "function": {"name": "alarm"}}])
    [call] = reply.tool_calls
    assert call.name == "alarm" and json.loads(call.arguments) == {"repeat": 1}
    assert compare_call(ExpectedCall(name="alarm", arguments={"repeat": 1}), reply) == (
        True, "exact")
