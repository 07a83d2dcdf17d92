"""The example agent end to end: a local fake chat-completions server that answers with tool
calls, tools that really run, and the session kept in SQLite across a restart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from contextwright.agent import make_agent, run_tool
from fakes.openai_server import FakeOpenAIServer, Reply

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent.py"


def completion(message: dict[str, Any]) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(raw_body=json.dumps(body).encode())


def tool_call(call_id: str, name: str, **arguments: Any) -> Reply:
    return completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]})


def answer(text: str) -> Reply:
    return completion({"role": "assistant", "content": text})


def test_the_agent_runs_tools_and_keeps_its_session_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with FakeOpenAIServer([tool_call("c1", "get_weather", city="上海"),
                           tool_call("c2", "save_memo", text="上海 cloudy 25°C"),
                           answer("上海多云，25°C，已记下。"),
                           tool_call("c3", "list_memos"), answer("你有一条备忘。")]) as server:
        agent = make_agent(server.base_url, "local-model", db)
        tools_run: list[str] = []
        reply = agent.run_turn("u", "s", "今天上海天气怎么样，顺便帮我记下来",
                               on_tool=lambda name, _a, output: tools_run.append(output))
        assert reply == "上海多云，25°C，已记下。"
        assert json.loads(tools_run[0])["weather"] == "cloudy"
        assert json.loads(tools_run[1])["memos"] == 1
        agent.close()

        restarted = make_agent(server.base_url, "local-model", db)
        assert restarted.run_turn("u", "s", "我有哪些备忘？") == "你有一条备忘。"
        restarted.close()
        requests = [r.body for r in server.requests]
    assert all(r["model"] == "local-model" and r["tools"] for r in requests)
    # The third call carries both results, each right after its call and fenced.
    third = requests[2]["messages"]
    results = [m for m in third if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["c1", "c2"]
    assert all(m["content"].startswith("<<data ") for m in results)
    # After the restart the earlier turn is still in the context, and the memo in the table.
    last = json.dumps(requests[-1]["messages"], ensure_ascii=False)
    assert "今天上海天气怎么样" in last and "上海 cloudy 25°C" in last


def test_tools_report_bad_input_as_an_error_result(tmp_path: Path) -> None:
    from contextwright.agent import MemoBook

    memos = MemoBook(tmp_path / "m.db")
    assert "error" in json.loads(run_tool("get_weather", '{"city": "Atlantis"}', "u", memos))
    assert "error" in json.loads(run_tool("save_memo", "not json", "u", memos))
    assert "error" in json.loads(run_tool("send_email", "{}", "u", memos))


def test_the_example_script_talks_to_the_endpoint(tmp_path: Path) -> None:
    with FakeOpenAIServer([tool_call("c1", "get_weather", city="Paris"),
                           answer("Clear, 18°C.")]) as server:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--base-url", server.base_url, "--model", "m",
             "--db", str(tmp_path / "a.db")],
            input="Weather in Paris?\n", capture_output=True, text=True, timeout=120,
            check=False)
    assert done.returncode == 0, done.stderr
    assert "[tool] get_weather" in done.stdout and "agent> Clear, 18°C." in done.stdout


def test_the_cli_agent_command_runs_the_same_loop(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from contextwright.cli import app

    with FakeOpenAIServer([tool_call("c1", "save_memo", text="buy milk"),
                           answer("Saved.")]) as server:
        result = CliRunner().invoke(app, ["agent", "--base-url", server.base_url,
                                          "--model", "m", "--db", str(tmp_path / "a.db")],
                                    input="remember to buy milk\n")
    assert result.exit_code == 0, result.output
    assert "[tool] save_memo" in result.output and "agent> Saved." in result.output


def test_an_unreachable_endpoint_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from contextwright.cli import app

    result = CliRunner().invoke(app, ["agent", "--base-url", "http://127.0.0.1:9/v1",
                                      "--model", "m", "--db", str(tmp_path / "a.db")],
                                input="hi\n")
    assert result.exit_code == 2
    assert "LLMError" in result.stderr and "Traceback" not in result.stderr


def test_a_malformed_call_is_not_run_and_the_turn_is_recorded_whole(tmp_path: Path) -> None:
    bad = completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {
            "name": "save_memo", "arguments": '{"text": "milk", "text": "milk"}'}}]})
    with FakeOpenAIServer([bad, answer("Sorry, saving again."), answer("Done.")]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db")
        outputs: list[str] = []
        assert agent.run_turn("u", "s", "remember milk",
                              on_tool=lambda _n, _a, out: outputs.append(out)) == (
            "Sorry, saving again.")
        assert "duplicate key" in json.loads(outputs[0])["error"]
        assert agent.memos.list("u") == []  # not run, so not saved twice on a retry
        assert agent.run_turn("u", "s", "ok?") == "Done."  # the session still builds
        agent.close()
