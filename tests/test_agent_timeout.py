"""The example agent's model-call timeout: ``make_agent(timeout=...)`` reaches the HTTP client,
so a server that does not answer in time is a quick ``LLMError`` of kind ``timeout`` rather
than ten minutes of the SDK's default; a timeout that is not a positive number of seconds is
refused when the agent (or an ``OpenAIChatClient``) is made."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from contextwright.agent import make_agent
from contextwright.errors import LLMError
from contextwright.llm import OpenAIChatClient
from contextwright.session.store import SessionKey
from fakes.openai_server import FakeOpenAIServer, Reply

BAD_TIMEOUTS = [0, -1, math.nan, math.inf, "5", None, True]
BAD_IDS = ["zero", "negative", "nan", "inf", "text", "none", "bool"]


def test_a_server_slower_than_the_timeout_is_a_timeout_error_soon(tmp_path: Path) -> None:
    slow = Reply(content="too late", delay=30)
    with FakeOpenAIServer([slow, slow, slow]) as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(LLMError) as caught:
            agent.run_turn("u", "s", "hi")
        elapsed = time.monotonic() - started
        asked = [m.message["role"] for m in agent.store.read(SessionKey(user_id="u",
                                                                           session_id="s"))]
        agent.close()
    assert caught.value.kind == "timeout"
    assert "timed out" in str(caught.value)
    # Three attempts of half a second with the SDK's backoff between them, not 30 s.
    assert elapsed < 8
    assert asked == ["user"]  # the question stays, to continue with text=None


def test_the_timeout_is_the_clients(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        agent = make_agent(server.base_url, "m", tmp_path / "a.db", timeout=2.5)
        assert agent.client.timeout == 2.5
        agent.close()


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=BAD_IDS)
def test_a_timeout_that_is_not_a_positive_number_is_refused_before_anything_is_made(
        tmp_path: Path, timeout: object) -> None:
    with pytest.raises(LLMError, match="timeout must be") as caught:
        make_agent("http://127.0.0.1:9/v1", "m", tmp_path / "a.db", timeout=timeout)  # type: ignore[arg-type]
    assert caught.value.kind == "config"
    assert not (tmp_path / "a.db").exists()


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=BAD_IDS)
def test_the_chat_client_refuses_the_same_timeouts(timeout: object) -> None:
    with pytest.raises(LLMError, match="timeout must be") as caught:
        OpenAIChatClient("http://127.0.0.1:9/v1", timeout=timeout)  # type: ignore[arg-type]
    assert caught.value.kind == "config"
