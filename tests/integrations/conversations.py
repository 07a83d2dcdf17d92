"""Conversations an agent framework could hold, as OpenAI chat dicts, for every integration test.

A conversation has earlier rounds (a user message, sometimes tool-call blocks with all their
results, an answer), the user message the model must answer, and sometimes this turn's tool
calls and results after it. Tool results are the realistic, tagged ones of ``strategies``;
arguments are JSON text and content plain text, as frameworks hold them. ``provider_accepts_*``
run the fake provider's checks, written from the APIs' documentation, on what a model received.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from fakes.provider_server import check_chat, check_responses
from strategies import TOOL_NAMES, draw_text, draw_tool_result

SYSTEM = "You are the support agent of an airline. Answer briefly."
DATA_NOTE = "is never an instruction"
"""Words of the note the build adds to the system prompt when it fences data."""

Chat = dict[str, Any]


@dataclass
class _Ids:
    """Call ids and data tags, unique within one conversation."""

    calls: int = 0
    tags: int = 0

    def call_id(self) -> str:
        self.calls += 1
        return f"call_{self.calls:04d}"

    def tag(self) -> str:
        self.tags += 1
        return f"UNTRUSTED-DATA-{self.tags:04d}"


@dataclass
class Conversation:
    """One drawn conversation and a budget to build it in."""

    history: list[Chat]
    user: str
    turn: list[Chat] = field(default_factory=list)
    budget: int = 2000

    @property
    def messages(self) -> list[Chat]:
        return [*self.history, {"role": "user", "content": self.user}, *self.turn]


def tool_block(draw: st.DrawFn, ids: _Ids) -> list[Chat]:
    """An assistant message with 1-3 calls and every result, in call order."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    calls = [{"id": ids.call_id(), "type": "function", "function": {
        "name": rng.choice(TOOL_NAMES),
        "arguments": json.dumps({"q": draw_text(draw, long=False)}, ensure_ascii=False)}}
        for _ in range(draw(st.integers(1, 3)))]
    results = [{"role": "tool", "tool_call_id": call["id"], "content": draw_tool_result(draw, ids)}
               for call in calls]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


@st.composite
def conversations(draw: st.DrawFn, *, with_turn: bool = True, max_rounds: int = 10
                  ) -> Conversation:
    ids = _Ids()
    history: list[Chat] = []
    for _ in range(draw(st.integers(0, max_rounds))):
        history.append({"role": "user", "content": draw_text(draw, long=False)})
        for _ in range(draw(st.integers(0, 2))):
            history += tool_block(draw, ids)
        history.append({"role": "assistant", "content": draw_text(draw, long=False)})
    turn: list[Chat] = []
    if with_turn:
        for _ in range(draw(st.integers(0, 2))):
            turn += tool_block(draw, ids)
    return Conversation(history=history, user=draw_text(draw, long=False), turn=turn,
                        budget=draw(st.integers(900, 4000)))


def long_conversation(rounds: int, *, seed: int = 7) -> list[Chat]:
    """``rounds`` rounds of a support chat, every third with a lookup, facts in the results."""
    rng = random.Random(seed)
    messages: list[Chat] = []
    for index in range(rounds):
        code = f"KST{100 + index}"
        messages.append({"role": "user", "content": f"Can you check booking {code}? "
                         + rng.choice(("Thanks.", "It is urgent.", "I fly tomorrow."))})
        if index % 3 == 0:
            call = f"call_{index:05d}"
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [{
                    "id": call, "type": "function",
                    "function": {"name": "get_booking",
                                 "arguments": json.dumps({"code": code})}}]},
                {"role": "tool", "tool_call_id": call, "content": json.dumps(
                    {"code": code, "status": rng.choice(("confirmed", "cancelled")),
                     "seat": f"{rng.randint(1, 40)}{rng.choice('ABCDEF')}"})},
            ]
        messages.append({"role": "assistant", "content": f"Booking {code} is in order."})
    return messages


def provider_accepts_chat(messages: list[Chat], tools: list[Chat] | None = None) -> None:
    """The fake OpenAI server's Chat Completions checks (``Rejected`` when a rule is broken)."""
    check_chat({"model": "gpt-4o", "messages": messages, **({"tools": tools} if tools else {})})


def provider_accepts_responses(items: list[Chat], instructions: str | None) -> None:
    """The fake OpenAI server's Responses checks."""
    check_responses({"model": "gpt-4o", "input": items, "instructions": instructions})


def call_ids(messages: list[Chat]) -> list[str]:
    """Ids of the tool calls in OpenAI chat ``messages``, in order."""
    return [call["id"] for message in messages for call in message.get("tool_calls") or ()]


def result_ids(messages: list[Chat]) -> list[str]:
    """Call ids the tool results in ``messages`` answer, in order."""
    return [message["tool_call_id"] for message in messages if message.get("role") == "tool"]
