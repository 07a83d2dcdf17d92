"""``contextwright eval toolcalls`` end to end against a local fake model over HTTP.

The fake (``fakes.toolcall_model``) reads each request it receives and answers by plain rules
(a window, rules from the system prompt, the newest mention of what is referred to), so the
three configurations get different answers for reasons these tests check on the wire: the
whole history overflows its window, a naive window loses the system prompt, a budget keeps it.
"""

from __future__ import annotations

import json
import socket
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.cli_eval import eval_app
from contextwright.core.request import Request
from contextwright.errors import InvalidInputError
from contextwright.evaluate.toolcall_score import ModelCall, score_calls
from contextwright.evaluate.toolcall_tasks import write_tasks
from contextwright.evaluate.toolcalls import (
    Outcome,
    ResultCache,
    ask_model,
    builtin_tasks,
    everything_messages,
    make_client,
    make_configs,
    prepare,
)
from contextwright.tokens import get_tokenizer
from fakes.openai_server import FakeOpenAIServer, Reply, error
from fakes.toolcall_model import WINDOW, ReadingModel, decide, read

MODEL = "fake-reader"
COUNT = get_tokenizer("o200k_base")


def invoke(base_url: str, *args: str) -> Any:
    return CliRunner().invoke(eval_app, ["toolcalls", "--base-url", base_url, "--model", MODEL,
                                         *args])


@pytest.fixture(scope="module")
def full_run() -> tuple[dict[str, Any], list[dict[str, Any]], ReadingModel]:
    model = ReadingModel()
    with FakeOpenAIServer(responder=model) as server:
        result = invoke(server.base_url, "--json")
        assert result.exit_code == 0, result.stderr
        bodies = [r.body for r in server.requests]
        assert all(r.headers["authorization"] == "Bearer not-needed" for r in server.requests)
    return json.loads(result.stdout), bodies, model


def test_every_task_runs_under_each_configuration_once(full_run: Any) -> None:
    output, bodies, _ = full_run
    assert [c["config"] for c in output["configs"]] == ["a", "b", "c"]
    assert all(c["tasks"] == 30 for c in output["configs"])
    assert len(output["outcomes"]) == len(bodies) == 90
    assert all(b["model"] == MODEL and b["temperature"] == 0 and len(b["tools"]) == 9
               and b["max_completion_tokens"] == 1024 for b in bodies)


def test_no_budget_fails_exactly_when_the_whole_history_exceeds_the_window(
        full_run: Any) -> None:
    output, bodies, model = full_run
    pairs = [(o, b) for o, b in zip(output["outcomes"], bodies, strict=True) if o["config"] == "a"]
    too_long = [model.prompt_tokens(b) > WINDOW for _, b in pairs]
    assert [o["verdict"] == "context_too_long" for o, _ in pairs] == too_long
    assert 0 < sum(too_long) < 30


def test_budgeted_configurations_fit_and_only_the_naive_window_loses_the_system_prompt(
        full_run: Any) -> None:
    output, bodies, model = full_run
    for outcome, body in zip(output["outcomes"], bodies, strict=True):
        if outcome["config"] == "a":
            continue
        assert outcome["prompt_tokens"] <= 5120
        assert model.prompt_tokens(body) <= WINDOW and outcome["verdict"] != "context_too_long"
        has_system = body["messages"][0]["role"] == "system"
        if outcome["config"] == "c":
            assert has_system and "Today is" in body["messages"][0]["content"]
        elif outcome["verdict"] == "wrong_tool":  # a reminder filed as a memo: no rule 2 seen
            assert not has_system and outcome["calls"][0]["name"] == "save_memo"
    lost = [b for o, b in zip(output["outcomes"], bodies, strict=True)
            if o["config"] == "b" and b["messages"][0]["role"] != "system"]
    assert len(lost) >= 10


def test_the_scorer_sees_every_kind_of_answer_and_the_budget_helps_the_fake(
        full_run: Any) -> None:
    output, _, _ = full_run
    verdicts = Counter(o["verdict"] for o in output["outcomes"])
    assert {"correct", "wrong_tool", "wrong_args", "no_call", "context_too_long"} <= set(verdicts)
    accuracy = {c["config"]: c["accuracy"] for c in output["configs"]}
    assert accuracy["c"] > accuracy["b"] > accuracy["a"]  # on this fake, for the reasons above
    for config in output["configs"]:
        assert sum(config["verdicts"].values()) == 30
        assert config["correct"] == config["verdicts"]["correct"]


def test_the_fake_answers_from_what_it_reads_not_from_the_task() -> None:
    task = next(t for t in builtin_tasks() if t.id.endswith("weather_reference"))
    request = Request.from_dict(task.request)
    messages = everything_messages(request)
    body = {"messages": messages, "tools": list(request.tools)}
    assert decide(read(body)) == [("get_weather", dict(task.expected[0].arguments))]
    # Without the message that names the city, the fake guesses the newest city mentioned.
    fact = next(i for i, m in enumerate(messages) if m["role"] == "user"
                and "now —" in m["content"])
    guessed = decide(read({**body, "messages": messages[:fact] + messages[fact + 1:]}))
    assert guessed and guessed != [("get_weather", dict(task.expected[0].arguments))]
    calls = [_model_call(name, arguments) for name, arguments in guessed]
    assert score_calls(task.expected, calls, request.tools).verdict == "wrong_args"
    # Without tools to call it answers in text.
    assert decide(read({**body, "tools": []})) == []


def _model_call(name: str, arguments: dict[str, Any]) -> ModelCall:
    return ModelCall(name=name, arguments=json.dumps(arguments))


def test_a_table_by_default_markdown_on_request_and_more_plans(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=ReadingModel()) as server:
        table = invoke(server.base_url, "--limit", "3", "--config", "a,c", "--plan", "chat")
        markdown = invoke(server.base_url, "--limit", "1", "--config", "b", "--markdown")
        sent = len(server.requests)
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith(f"tool-call accuracy — model {MODEL}, 3 tasks, budget 5,120")
    assert "wrong tool" in lines[1] and "API error" in lines[1]
    assert [line.split("  ")[0] for line in lines[2:]] == [
        "a: no budget", "c: contextwright tool_heavy", "contextwright chat"]
    assert markdown.stdout.startswith("| config | accuracy | wrong tool |")
    assert "| b: fixed truncation |" in markdown.stdout
    assert sent == 3 * 3 + 1


def test_a_cache_resumes_and_asks_again_only_what_changed(tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    with FakeOpenAIServer(responder=ReadingModel()) as server:
        first = invoke(server.base_url, "--limit", "2", "--cache", str(cache), "--json")
        after_first = len(server.requests)
        again = invoke(server.base_url, "--limit", "2", "--cache", str(cache), "--json")
        after_again = len(server.requests)
        budget = invoke(server.base_url, "--limit", "2", "--cache", str(cache), "--json",
                        "--budget", "1500")
        after_budget = len(server.requests)
    # A body that the budget changes is asked again; a's never changes, nor a build that
    # already held the whole (compacted) history.
    changed = [prepare(t, c, budget=5120, model=MODEL, tokenizer=COUNT).body
               != prepare(t, c, budget=1500, model=MODEL, tokenizer=COUNT).body
               for t in builtin_tasks()[:2] for c in make_configs(["a", "b", "c"])]
    assert changed[0] is False and changed[3] is False and sum(changed) >= 2
    assert (after_first, after_again, after_budget) == (6, 6, 6 + sum(changed))
    one, two = json.loads(first.stdout), json.loads(again.stdout)
    assert one["configs"] == two["configs"]
    assert all(o["cached"] for o in two["outcomes"]) and not any(
        o["cached"] for o in one["outcomes"])
    three = json.loads(budget.stdout)
    assert [not o["cached"] for o in three["outcomes"]] == changed
    assert len(cache.read_text(encoding="utf-8").splitlines()) == 6 + sum(changed)


def test_a_torn_last_cache_line_is_dropped_with_a_warning_and_asked_again(
        tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    with FakeOpenAIServer(responder=ReadingModel()) as server:
        first = invoke(server.base_url, "--limit", "1", "--cache", str(cache), "--json")
        assert first.exit_code == 0, first.stderr
        whole = cache.read_bytes().splitlines(keepends=True)
        # A run killed while writing its third record leaves half a line and no newline.
        cache.write_bytes(b"".join(whole[:2]) + whole[2][:len(whole[2]) // 2])
        asked = len(server.requests)
        again = invoke(server.base_url, "--limit", "1", "--cache", str(cache), "--json")
        assert again.exit_code == 0, again.stderr
        assert len(server.requests) == asked + 1
    assert "warning: cache" in again.stderr and "cut off" in again.stderr
    assert [o["cached"] for o in json.loads(again.stdout)["outcomes"]] == [True, True, False]
    assert json.loads(again.stdout)["configs"] == json.loads(first.stdout)["configs"]
    lines = cache.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and all(json.loads(line)["key"] for line in lines)


def test_a_torn_line_cut_inside_a_utf8_character_is_dropped(tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    record = {"key": "k1", "outcome": {"task": "t", "config": "a", "verdict": "correct"}}
    cache.write_bytes(json.dumps(record).encode() + b'\n{"key": "caf\xc3')
    warned: list[str] = []
    kept = ResultCache(cache, on_warning=warned.append)
    assert kept.get("k1") == record["outcome"] and len(warned) == 1
    assert cache.read_bytes() == json.dumps(record).encode() + b"\n"


def test_a_complete_last_line_without_newline_is_kept_and_appended_after(
        tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    record = {"key": "k1", "outcome": {"task": "t", "config": "a", "verdict": "correct"}}
    cache.write_text(json.dumps(record), encoding="utf-8")
    warned: list[str] = []
    kept = ResultCache(cache, on_warning=warned.append)
    assert kept.get("k1") == record["outcome"] and warned == []
    outcome = Outcome(task="u", family="f", config="b", verdict="correct", detail="", calls=(),
                      prompt_tokens=3)
    kept.put("k2", outcome)
    lines = cache.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["k1", "k2"]
    assert ResultCache(cache).get("k2") == {**asdict(outcome), "calls": []}


@pytest.mark.parametrize("middle", [b'{"key": "k2", "outc', b"[1, 2]", b'{"key": "k2"}',
                                    b"\xff\xfe"])
def test_a_corrupt_cache_line_before_the_last_is_an_error_naming_it(tmp_path: Path,
                                                                    middle: bytes) -> None:
    cache = tmp_path / "runs.jsonl"
    record = json.dumps({"key": "k1", "outcome": {"task": "t", "config": "a",
                                                  "verdict": "correct"}}).encode()
    cache.write_bytes(record + b"\n" + middle + b"\n" + record + b"\n")
    with pytest.raises(InvalidInputError, match=r"line 2 is not a cache record"):
        ResultCache(cache)
    assert cache.read_bytes() == record + b"\n" + middle + b"\n" + record + b"\n"
    result = CliRunner().invoke(eval_app, ["toolcalls", "--base-url", "http://127.0.0.1:9/v1",
                                           "--model", MODEL, "--cache", str(cache)])
    assert result.exit_code == 2 and "line 2 is not a cache record" in result.stderr


def test_a_last_line_that_is_whole_json_but_no_record_is_an_error(tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    cache.write_bytes(b'{"key": "k1"}')
    with pytest.raises(InvalidInputError, match=r"line 1 is not a cache record"):
        ResultCache(cache)


def test_endpoint_failures_are_api_errors_not_kept_and_exit_1(tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    with FakeOpenAIServer(responder=lambda body: error(500)) as server:
        result = invoke(server.base_url, "--limit", "1", "--config", "a", "--cache", str(cache),
                        "--json")
    assert result.exit_code == 1
    assert "error: 1 calls failed at the endpoint" in result.stderr
    outcome = json.loads(result.stdout)["outcomes"][0]
    assert (outcome["verdict"], outcome["detail"]) == ("api_error", "HTTP 500")
    assert not cache.exists() or cache.read_text(encoding="utf-8") == ""


def test_an_unreachable_endpoint_is_an_api_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = invoke(f"http://127.0.0.1:{port}/v1", "--limit", "1", "--config", "a", "--json",
                    "--timeout", "5")
    assert result.exit_code == 1
    outcome = json.loads(result.stdout)["outcomes"][0]
    assert (outcome["verdict"], outcome["detail"]) == ("api_error", "cannot reach the endpoint")


@pytest.mark.parametrize(("message", "code", "verdict"), [
    ("This model's maximum context length is 4096 tokens.", None, "context_too_long"),  # vLLM
    ("the request exceeds the available context size", None, "context_too_long"),  # llama.cpp
    ("too long", "context_length_exceeded", "context_too_long"),  # OpenAI
    ("'messages' must contain the word 'json'", None, "api_error"),
])
def test_a_too_long_context_is_told_apart_from_other_refusals(message: str, code: str | None,
                                                               verdict: str) -> None:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    reply = Reply(status=400, raw_body=json.dumps(body).encode())
    with FakeOpenAIServer([reply]) as server:
        client = make_client(server.base_url, "k", max_retries=0)
        calls, failure = ask_model(client, {"model": "m", "messages": [
            {"role": "user", "content": "hi"}]})
    assert calls == [] and failure is not None and failure.verdict == verdict


def test_the_api_key_comes_from_the_named_environment_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLCALLS_TEST_KEY", "sk-local-test")
    with FakeOpenAIServer(responder=ReadingModel()) as server:
        result = invoke(server.base_url, "--limit", "1", "--config", "c", "--api-key-env",
                        "TOOLCALLS_TEST_KEY")
        headers = server.requests[0].headers
    assert result.exit_code == 0, result.stderr
    assert headers["authorization"] == "Bearer sk-local-test"
    monkeypatch.delenv("TOOLCALLS_TEST_KEY")
    missing = invoke("http://127.0.0.1:9/v1", "--api-key-env", "TOOLCALLS_TEST_KEY")
    assert missing.exit_code == 2
    assert missing.stderr.strip() == ("error: InvalidInputError: environment variable "
                                      "TOOLCALLS_TEST_KEY is not set")


def test_a_tasks_file_is_run_as_given(tmp_path: Path) -> None:
    everything = tmp_path / "all.jsonl"
    write_tasks(everything)
    lines = everything.read_text(encoding="utf-8").splitlines()
    chosen = tmp_path / "two.jsonl"
    chosen.write_text("\n".join([lines[10], lines[20]]) + "\n", encoding="utf-8")
    with FakeOpenAIServer(responder=ReadingModel()) as server:
        result = invoke(server.base_url, "--tasks", str(chosen), "--config", "c", "--json")
    assert result.exit_code == 0, result.stderr
    ids = [o["task"] for o in json.loads(result.stdout)["outcomes"]]
    assert ids == [json.loads(lines[10])["id"], json.loads(lines[20])["id"]]


def test_tasks_on_standard_input_run_as_the_file_does(tmp_path: Path) -> None:
    everything = tmp_path / "all.jsonl"
    write_tasks(everything)
    lines = everything.read_text(encoding="utf-8").splitlines()
    piped = "\n".join([lines[3], lines[7]]) + "\n"
    command = ["eval", "toolcalls", "--model", MODEL, "--tasks", "-", "--config", "c", "--json"]
    with FakeOpenAIServer(responder=ReadingModel()) as server:
        result = CliRunner().invoke(app, [*command, "--base-url", server.base_url],
                                    input=piped.encode("utf-8"))
    assert result.exit_code == 0, result.stderr
    ids = [o["task"] for o in json.loads(result.stdout)["outcomes"]]
    assert ids == [json.loads(lines[3])["id"], json.loads(lines[7])["id"]]
    offline = [*command, "--base-url", "http://127.0.0.1:9/v1"]
    for data, message in [(b"not json\n", "stdin line 1: not JSON"), (b"\n", "stdin: no tasks"),
                          (b"\xff\n", "cannot read tasks from standard input: "
                                      "UnicodeDecodeError")]:
        bad = CliRunner().invoke(app, offline, input=data)
        assert bad.exit_code == 2
        assert len(bad.stderr.strip().splitlines()) == 1
        assert bad.stderr.startswith(f"error: InvalidInputError: {message}")


@pytest.mark.parametrize(("args", "message"), [
    (["--config", "a,x"], "error: PlanError: unknown configuration 'x'; choose from a, b, c"),
    (["--config", "a,a"], "error: PlanError: a configuration is named twice"),
    (["--tasks", "/nonexistent/tasks.jsonl"], "error: InvalidInputError: cannot read tasks "
     "file /nonexistent/tasks.jsonl: FileNotFoundError"),
    (["--plan", "no_such_plan.yaml"], "error: PlanError:"),
])
def test_bad_options_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = invoke("http://127.0.0.1:9/v1", *args)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(message)
