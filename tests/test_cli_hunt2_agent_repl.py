"""The ``contextwright agent`` REPL after a failed model call: it keeps running, and ``/retry``
continues the stored turn (``run_turn(text=None)``) rather than storing the question twice. At
start-up it says when the session has a question with no answer. Replies come from a local
chat-completions server through the official ``openai`` SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.agent import Agent, repl
from contextwright.cli import app
from contextwright.errors import ContextwrightError, LLMError
from contextwright.session.store import SessionKey
from fakes.openai_server import FakeOpenAIServer, Reply, error


def completion(message: dict[str, Any]) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(raw_body=json.dumps(body).encode())


def save_memo(call_id: str, text: str) -> Reply:
    return completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "save_memo", "arguments": json.dumps({"text": text})}}]})


def answer(text: str) -> Reply:
    return completion({"role": "assistant", "content": text})


@pytest.fixture
def open_agent(tmp_path: Path) -> Iterator[Any]:
    """Makes agents (one file) on a server's URL whose client does not retry; closes them."""
    from openai import OpenAI

    made: list[Agent] = []

    def make(server: FakeOpenAIServer) -> Agent:
        client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        made.append(Agent(client=client, model="m", path=tmp_path / "a.db", owns_client=True))
        return made[-1]

    yield make
    for agent in made:
        agent.close()


class Terminal:
    """The REPL's input (lines, then end of input) and what it wrote, out and err apart."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.out: list[str] = []
        self.err: list[str] = []

    def read(self, prompt: str) -> str:
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)


def run(agent: Agent, terminal: Terminal) -> ContextwrightError | None:
    return repl(agent, "u", "s", read=terminal.read, write=terminal.out.append,
                warn=terminal.err.append)


def questions(agent: Agent) -> list[str]:
    return [m.message["content"] for m in agent.store.read(SessionKey(user_id="u", session_id="s"))
            if m.message["role"] == "user"]


def test_a_failed_model_call_keeps_the_repl_and_retry_continues_the_turn(
        open_agent: Any) -> None:
    script = [save_memo("c1", "milk"), error(503), answer("Saved.")]
    with FakeOpenAIServer(script) as server:
        agent = open_agent(server)
        terminal = Terminal("remember milk", "/retry")
        left = run(agent, terminal)
    assert left is None  # the last turn was answered
    assert terminal.out == ['  [tool] save_memo({"text": "milk"})', "agent> Saved."]
    assert len(terminal.err) == 1
    assert "LLMError" in terminal.err[0] and "/retry" in terminal.err[0]
    assert questions(agent) == ["remember milk"]
    assert agent.memos.list("u") == ["milk"]  # its recorded call did not run again


def test_a_turn_left_unanswered_is_announced_at_start_up(open_agent: Any) -> None:
    with FakeOpenAIServer([error(503), answer("Hello again.")]) as server:
        first = open_agent(server)
        failed = Terminal("hello")
        assert isinstance(run(first, failed), LLMError)  # end of input after a failed turn
        first.close()

        restarted = open_agent(server)
        terminal = Terminal("/retry")
        assert run(restarted, terminal) is None
    assert "/retry" in terminal.out[0] and "no answer" in terminal.out[0]
    assert terminal.out[1:] == ["agent> Hello again."]
    assert questions(restarted) == ["hello"]


def test_a_session_whose_last_turn_is_answered_is_not_announced(open_agent: Any) -> None:
    with FakeOpenAIServer([answer("Hi."), answer("Fine.")]) as server:
        run(open_agent(server), Terminal("hi"))
        terminal = Terminal("how are you")
        run(open_agent(server), terminal)
    assert terminal.out == ["agent> Fine."]


def test_retry_without_a_pending_turn_says_so_and_keeps_running(open_agent: Any) -> None:
    with FakeOpenAIServer([answer("Hi.")]) as server:
        agent = open_agent(server)
        terminal = Terminal("/retry", "hi")
        assert run(agent, terminal) is None
    assert len(terminal.err) == 1 and "no turn to continue" in terminal.err[0]
    assert terminal.out == ["agent> Hi."]


def test_the_cli_agent_continues_after_a_failed_call(tmp_path: Path) -> None:
    # The CLI's client retries twice itself: three failures make one failed model call.
    failed = [error(503)] * 3
    with FakeOpenAIServer([*failed, answer("Here I am.")]) as server:
        result = CliRunner().invoke(app, ["agent", "--base-url", server.base_url,
                                          "--model", "m", "--db", str(tmp_path / "a.db")],
                                    input="anyone there?\n/retry\n")
    assert result.exit_code == 0, result.output
    assert "agent> Here I am." in result.stdout
    assert "LLMError" in result.stderr and "/retry" in result.stderr


def test_the_cli_agent_exits_2_when_input_ends_on_a_failed_turn(tmp_path: Path) -> None:
    with FakeOpenAIServer([error(503)] * 3) as server:
        result = CliRunner().invoke(app, ["agent", "--base-url", server.base_url,
                                          "--model", "m", "--db", str(tmp_path / "a.db")],
                                    input="anyone there?\n")
    assert result.exit_code == 2, result.output
    assert result.stderr.count("LLMError") == 1 and "Traceback" not in result.stderr
