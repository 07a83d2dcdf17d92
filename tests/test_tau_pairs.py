"""Tool-pair integrity on a small τ-bench excerpt (the check of ``evaluate.tau``).

``tests/fixtures/tau_excerpt.json`` holds the first 40 messages of three real GPT-4o airline
trajectories (sierra-research/tau-bench @59a200c, MIT licence), two of which reuse tool-call ids.
Every prefix of each excerpt that ends with a user message or a finished tool block is built the
way the benchmark builds it, at history budgets of 500 / 1,000 / 2,000 tokens: the last user
message is the input, earlier messages the history, later tool calls the current turn. Every
build must render through the library's validator, pass the benchmark's own pair check, stay in
its budget and keep verbatim the ids the user gave in that last message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, FinalContext
from contextwright.evaluate import baseline
from contextwright.evaluate.metrics import context_text, message_tokens, pair_problems
from contextwright.evaluate.tau import TauCase, build_tau, split_conversation

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "tau_excerpt.json"
BUDGETS = (500, 1000, 2000)
ID_LIKE = re.compile(r"\b(?=[A-Za-z0-9_]*\d)[A-Za-z0-9_]{5,}\b")
"""Reservation ids (``H9ZU1C``), user ids (``mia_li_3668``), payment ids, flight numbers."""


def section_tokens(ctx: FinalContext, *names: str) -> int:
    """Tokens the report gives these sources."""
    return sum(row.tokens for row in ctx.report.sources if row.source in names)


@cache
def excerpt() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text("utf-8"))
    return data


@cache
def builder() -> ContextBuilder:
    return ContextBuilder(tokenizer="o200k_base")


def cut_points(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Ends of the prefixes to build: after a user message or after a finished tool block."""
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    return [
        end for end in range(first_user + 1, len(messages) + 1)
        if messages[end - 1]["role"] == "user"
        or (messages[end - 1]["role"] == "tool"
            and (end == len(messages) or messages[end]["role"] != "tool"))
    ]


def cases() -> list[Any]:
    params = []
    for trajectory in excerpt()["trajectories"]:
        for end in cut_points(trajectory["messages"]):
            params.append(pytest.param(trajectory["traj_index"], end,
                                       id=f"traj{trajectory['traj_index']}-{end}"))
    return params


def new_ids_of_last_user_message(system: str, conversation: Sequence[Mapping[str, Any]]
                                 ) -> list[str]:
    """Id-like strings of the last user message that no earlier message (or the policy) has."""
    last = max(i for i, m in enumerate(conversation) if m["role"] == "user")
    earlier = context_text([{"role": "system", "content": system}, *conversation[:last]])
    return [value for value in ID_LIKE.findall(conversation[last]["content"] or "")
            if value not in earlier]


def test_fixture_is_attributed_and_small() -> None:
    data = excerpt()
    assert data["_source"] == (
        "sierra-research/tau-bench @59a200c, MIT licence, gpt-4o airline trajectories")
    assert 2 <= len(data["trajectories"]) <= 3
    assert all(len(t["messages"]) <= 40 for t in data["trajectories"])


def test_the_excerpt_exercises_reused_ids_and_long_turns() -> None:
    reused = 0
    longest_turn = 0
    for trajectory in excerpt()["trajectories"]:
        messages = trajectory["messages"]
        ids = [c["id"] for m in messages for c in m.get("tool_calls") or []]
        reused += len(ids) - len(set(ids))
        _, _, turn = split_conversation(messages)
        longest_turn = max(longest_turn, len(turn))
        assert pair_problems(messages) == []  # the source data itself is well paired
    assert reused >= 2
    assert longest_turn >= 20


def test_pair_check_catches_broken_lists() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    user = {"role": "user", "content": "hi"}
    assert pair_problems([user, call, result]) == []
    assert pair_problems([result, user])  # result without its call
    assert pair_problems([call, user])  # call without its result
    assert pair_problems([call, user, result])  # result not directly after its call
    assert pair_problems([call, {**result, "tool_call_id": "c2"}])  # answers another call
    assert pair_problems([call, result, result])  # one call answered twice


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize(("traj_index", "end"), cases())
def test_pairs_intact_and_user_ids_survive(traj_index: int, end: int, budget: int) -> None:
    data = excerpt()
    system: str = data["policy"]
    trajectory = next(t for t in data["trajectories"] if t["traj_index"] == traj_index)
    conversation = tuple(trajectory["messages"][:end])
    history, user_input, turn = split_conversation(conversation)
    case = TauCase(traj_index=traj_index, has_cut=True, conversation=conversation,
                   history=history, user_input=user_input, turn=turn, facts=())

    ctx = build_tau(builder(), BuildPlan.named("tool_heavy"), system, case, budget)
    messages = ctx.to_messages("openai")  # raises ValidationError on a broken pair

    assert pair_problems(messages) == []
    used = section_tokens(ctx, "user", "history", "tool_results")
    assert used <= budget
    text = context_text(messages)
    for value in new_ids_of_last_user_message(system, conversation):
        assert value in text, f"{value!r} from the last user message was lost"


def test_recency_baseline_breaks_pairs_on_the_same_excerpt() -> None:
    """The check has teeth on this data: plain recency cutting leaves orphaned results."""
    count = builder().tokenizer.count
    broken = 0
    for trajectory in excerpt()["trajectories"]:
        messages = trajectory["messages"]
        for end in cut_points(messages):
            for budget in BUDGETS:
                kept = baseline.recency(messages[:end], budget,
                                        lambda m: message_tokens(m, count))
                broken += bool(pair_problems(kept))
    assert broken > 0
