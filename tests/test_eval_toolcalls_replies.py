"""``eval toolcalls`` against replies and files that are valid but not the usual shape.

Big whole-number arguments, a task corrected after its calls were cached, history arguments
given as objects, completions of another shape, calls without ``type``, a malformed base URL,
a cache in a folder that does not exist, and tasks holding raw line separators. The model is
the local fake chat-completions server (``fakes.openai_server``, 127.0.0.1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli_eval import eval_app
from contextwright.errors import InvalidInputError, LLMError
from contextwright.evaluate.toolcall_score import (
    ExpectedCall,
    ModelCall,
    parse_tasks,
    score_calls,
    values_equal,
)
from contextwright.evaluate.toolcalls import ResultCache, ask_model, make_client
from fakes.openai_server import FakeOpenAIServer, Reply

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}


def task(expected_city: str, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": "t1", "request": {"user_input": "Weather in Paris?", "tools": [WEATHER],
                                    "history": history or []},
            "expected": [{"name": "get_weather", "arguments": {"city": expected_city}}]}


def write(path: Path, *tasks: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks),
                    encoding="utf-8")
    return path


def completion(message: Any) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(raw_body=json.dumps(body).encode())


def calls(*made: dict[str, Any]) -> Reply:
    return completion({"role": "assistant", "content": None, "tool_calls": list(made)})


def paris(**changes: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}
    call.update(changes)
    return call


def invoke(base_url: str, *args: str) -> Any:
    return CliRunner().invoke(eval_app, ["toolcalls", "--base-url", base_url, "--model", "m",
                                         *args])


# --- numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("expected", "given"), [
    (40211873312, 40211873319), (1735689600, 1735689601), (4155550123, 4155550124),
    (1280, 1280.5), (1280.5, 1280), (2**60, 2**60 + 1),
])
def test_whole_numbers_one_off_are_different_values(expected: float, given: float) -> None:
    assert not values_equal(expected, given)


@pytest.mark.parametrize(("expected", "given"), [
    (1280, 1280.0), (40211873312, 4.0211873312e10), (0, -0.0), (19.99, 19.990000000000002),
])
def test_the_same_number_written_another_way_is_equal(expected: float, given: float) -> None:
    assert values_equal(expected, given)


def test_an_order_id_off_by_a_few_is_wrong_args() -> None:
    expected = (ExpectedCall(name="cancel_order", arguments={"order_id": 40211873312},
                             contains={}),)
    score = score_calls(expected, [ModelCall(name="cancel_order",
                                             arguments='{"order_id": 40211873319}')], [])
    assert (score.verdict, score.detail) == ("wrong_args", "cancel_order: order_id differs")


# --- the cache ---------------------------------------------------------------------------------


def test_a_corrected_expectation_is_scored_again_from_the_cache_without_a_call(
        tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    with FakeOpenAIServer(responder=lambda _: calls(paris())) as fake:
        wrong = invoke(fake.base_url, "--tasks", str(write(tmp_path / "t.jsonl", task("Lyon"))),
                       "--config", "a", "--cache", str(cache), "--json")
        fixed = invoke(fake.base_url, "--tasks", str(write(tmp_path / "t.jsonl", task("Paris"))),
                       "--config", "a", "--cache", str(cache), "--json")
        sent = len(fake.requests)
    first = json.loads(wrong.stdout)["outcomes"][0]
    second = json.loads(fixed.stdout)["outcomes"][0]
    assert (first["verdict"], first["cached"]) == ("wrong_args", False)
    assert (second["verdict"], second["detail"], second["cached"]) == ("correct", "", True)
    assert sent == 1
    assert json.loads(fixed.stdout)["configs"][0]["correct"] == 1


def test_a_cache_in_a_missing_folder_fails_before_any_call(tmp_path: Path) -> None:
    cache = tmp_path / "no-such-folder" / "runs.jsonl"
    with pytest.raises(InvalidInputError, match="cannot write cache"):
        ResultCache(cache)
    with FakeOpenAIServer(responder=lambda _: calls(paris())) as fake:
        result = invoke(fake.base_url, "--tasks", str(write(tmp_path / "t.jsonl",
                                                            task("Paris"))),
                        "--cache", str(cache))
        assert fake.requests == []
    assert result.exit_code == 2
    assert result.stderr.startswith("error: InvalidInputError: cannot write cache ")
    assert result.stdout == ""


# --- what is sent ------------------------------------------------------------------------------


def test_history_arguments_given_as_an_object_are_sent_as_json_text_by_every_configuration(
        tmp_path: Path) -> None:
    history = [{"role": "user", "content": "Weather in Rome?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "21C sunny"},
               {"role": "assistant", "content": "21C and sunny in Rome."}]

    def strict(body: dict[str, Any]) -> Reply:  # as api.openai.com: arguments are a string
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                if not isinstance(call["function"]["arguments"], str):
                    return Reply(status=400)
        return calls(paris())

    with FakeOpenAIServer(responder=strict) as fake:
        result = invoke(fake.base_url, "--tasks",
                        str(write(tmp_path / "t.jsonl", task("Paris", history))), "--json")
        sent = [call["function"]["arguments"] for r in fake.requests
                for m in r.body["messages"] for call in m.get("tool_calls") or []]
    assert result.exit_code == 0, result.stderr
    assert [o["verdict"] for o in json.loads(result.stdout)["outcomes"]] == ["correct"] * 3
    assert len(sent) == 3
    assert all(json.loads(arguments) == {"city": "Rome"} for arguments in sent)


# --- replies of another shape ------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    Reply(raw_body=b"upstream says hi", headers={"content-type": "text/plain"}),
    Reply(raw_body=b"<html>login</html>", headers={"content-type": "text/html"}),
    Reply(raw_body=json.dumps({"error": {"message": "overloaded"}}).encode()),
    Reply(raw_body=json.dumps({"id": "x", "choices": None}).encode()),
    Reply(raw_body=json.dumps({"choices": [{"message": "hi"}]}).encode()),
    calls({"id": "c", "type": "function", "function": {"arguments": "{}"}}),
])
def test_a_reply_that_is_not_a_chat_completion_is_an_api_error(reply: Reply) -> None:
    with FakeOpenAIServer([reply]) as fake:
        made, failure = ask_model(make_client(fake.base_url, "k", max_retries=0),
                                  {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert made == [] and failure is not None and failure.verdict == "api_error"


def test_an_api_error_reply_prints_the_table_and_exits_1(tmp_path: Path) -> None:
    html = Reply(raw_body=b"<html>login</html>", headers={"content-type": "text/html"})
    with FakeOpenAIServer(responder=lambda _: html) as fake:
        result = invoke(fake.base_url, "--tasks", str(write(tmp_path / "t.jsonl",
                                                            task("Paris"))), "--json")
    assert result.exit_code == 1
    outcome = json.loads(result.stdout)["outcomes"][0]
    assert (outcome["verdict"], outcome["detail"]) == ("api_error",
                                                       "the reply is not a chat completion")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("call", [
    paris(type=None), {k: v for k, v in paris().items() if k != "type"},
    paris(function={"name": "get_weather", "arguments": {"city": "Paris"}}),
])
def test_a_call_is_scored_by_its_name_and_arguments_whatever_its_type_says(
        tmp_path: Path, call: dict[str, Any]) -> None:
    with FakeOpenAIServer(responder=lambda _: calls(call)) as fake:
        result = invoke(fake.base_url, "--tasks", str(write(tmp_path / "t.jsonl",
                                                            task("Paris"))), "--json")
    assert result.exit_code == 0, result.stderr
    assert [o["verdict"] for o in json.loads(result.stdout)["outcomes"]] == ["correct"] * 3


def test_arguments_as_an_object_are_scored_not_a_crash() -> None:
    expected = (ExpectedCall(name="get_weather", arguments={"city": "Paris"}, contains={}),)
    made = ModelCall(name="get_weather", arguments={"city": "Paris"})  # type: ignore[arg-type]
    assert score_calls(expected, [made], [WEATHER]).verdict == "correct"


# --- the base URL ------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://[::1", "http://localhost:80x/v1", "localhost:8000/v1"])
def test_a_malformed_base_url_is_one_line_and_exit_2(url: str) -> None:
    with pytest.raises(LLMError, match="not a valid http"):
        make_client(url, "k")
    result = invoke(url, "--limit", "1")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: LLMError: base URL ")
    assert "Traceback" not in result.stderr and result.stdout == ""


# --- the tasks file ----------------------------------------------------------------------------


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_raw_line_separators_inside_a_task_string_load(separator: str) -> None:
    raw = dict(task("Paris"), note=f"pasted{separator}from a page")
    text = json.dumps(raw, ensure_ascii=False) + "\r\n\n" + json.dumps(
        dict(task("Paris"), id="t2"), ensure_ascii=False)
    loaded = parse_tasks(text, "tasks.jsonl")
    assert [t.id for t in loaded] == ["t1", "t2"]
    assert loaded[0].note == f"pasted{separator}from a page"


def test_a_bad_line_is_still_named_by_its_number() -> None:
    text = json.dumps(task("Paris"), ensure_ascii=False) + "\n\u2028\n{oops\n"
    with pytest.raises(InvalidInputError, match=r"tasks.jsonl line 3: not JSON"):
        parse_tasks(text, "tasks.jsonl")
