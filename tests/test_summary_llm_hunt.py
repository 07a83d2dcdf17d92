"""``LLMSummarizer`` on replies a model gets wrong in ways the strict parse lets through. The
model is a local chat-completions server reached through ``OpenAIChatClient``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from contextwright.compress.summarize import Summary, verified
from contextwright.compress.summary_llm import LLMSummarizer, parse_summary_reply
from contextwright.core.items import Message
from contextwright.errors import SummaryError
from contextwright.llm import OpenAIChatClient
from fakes.openai_server import FakeOpenAIServer, text

CHAT = [Message(role="user", content="Has the parcel for ORD-12345 left the warehouse yet?"),
        Message(role="assistant", content="ORD-12345 left the warehouse this morning.")]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def llm(server: FakeOpenAIServer) -> LLMSummarizer:
    return LLMSummarizer(OpenAIChatClient(server.base_url, max_retries=0, timeout=5), model="m")


def reply(**fields: Any) -> str:
    base: dict[str, Any] = {"need": "", "facts": ["ORD-12345"], "unresolved": [],
                            "corrected": [], "notes": ["The parcel left the warehouse."]}
    return json.dumps({**base, **fields})


def test_a_merge_that_leaves_the_need_empty_keeps_the_previous_need(
        server: FakeOpenAIServer) -> None:
    # The model is told to keep the previous need; a reply with "need": "" would otherwise
    # commit a summary that has forgotten what the user came for.
    server.script(text(reply()))
    previous = Summary(need="Refund for the damaged kettle of ORD-12345", facts=("ORD-12345",))
    merged = verified(llm(server), previous, CHAT, language="en")
    assert merged.need == previous.need
    assert merged.notes == ("The parcel left the warehouse.",)


def test_a_new_need_replaces_the_previous_one(server: FakeOpenAIServer) -> None:
    server.script(text(reply(need="Track the parcel of ORD-12345")))
    previous = Summary(need="Refund for ORD-12345", facts=("ORD-12345",))
    assert verified(llm(server), previous, CHAT, language="en").need == (
        "Track the parcel of ORD-12345")



@pytest.mark.parametrize("reply_text", [
    "```json\n{\"need\": \"x" + " " * 30_000 + "y\"}",  # no closing fence
    "```" + " " * 600 + "{}",  # was worse than cubic in the run's length
], ids=["unclosed", "spaces-after-fence"])
def test_a_fenced_reply_with_a_long_run_of_spaces_is_read_in_linear_time(
        reply_text: str) -> None:
    # Models in a degenerate state stream whitespace; reading the fence must not take minutes.
    started = time.perf_counter()
    with pytest.raises(SummaryError, match="not JSON"):
        parse_summary_reply(reply_text)
    assert time.perf_counter() - started < 1


def test_a_fenced_reply_padded_with_spaces_before_its_closing_fence_is_read() -> None:
    body = json.dumps({"need": "Track ORD-12345", "facts": ["ORD-12345"], "unresolved": [],
                       "corrected": [], "notes": []})
    for reply_text in (f"```json\n{body}\n{' ' * 30_000}```", f"```JSON {body} ```",
                       f"```\r\n{body}\r\n```"):
        assert parse_summary_reply(reply_text).need == "Track ORD-12345"
