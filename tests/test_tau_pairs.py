"""Tool-pair integrity on agent trajectories (the check of ``evaluate.tau``).

``tests/fixtures/tau_pairs/`` holds three invented trajectories of an airline service desk
(written by its ``make.py``; the people, codes, flights and texts are made up) with the shapes
and quirks of real tool-calling logs: reused tool-call ids, a turn of 30 tool messages, empty and
error results, tool results of ~3,000 characters and a long policy-like system prompt
(``policy.md``). Every prefix of each trajectory that ends with a user message or a finished
tool block is built the way the benchmark builds it, at history budgets of 500 / 1,000 / 2,000
tokens: the last user message is the input, earlier messages the history, later tool calls the
current turn. Every build must render through the library's validator, pass the benchmark's own
pair check, stay in its budget and keep verbatim the ids the user gave in that last message.

The tests marked ``data`` run the same checks on the first 40 messages of real GPT-4o airline
trajectories read from ``../shared/data/tau-bench-airline-dev`` (skipped when it is absent).
"""

from __future__ import annotations

import importlib.util
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
FIXTURE = ROOT / "tests" / "fixtures" / "tau_pairs"
BUDGETS = (500, 1000, 2000)
REAL_PREFIX = 40
"""Messages of each real trajectory the ``data`` tests use (after the system prompt)."""
ID_LIKE = re.compile(r"\b(?=[A-Za-z0-9_]*\d)[A-Za-z0-9_]{5,}\b")
"""Booking codes (``R8KD2W``), member handles (``ines_okafor_5127``), payment handles, flights."""

Trajectory = Sequence[Mapping[str, Any]]


def section_tokens(ctx: FinalContext, *names: str) -> int:
    """Tokens the report gives these sources."""
    return sum(row.tokens for row in ctx.report.sources if row.source in names)


@cache
def fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURE / "trajectories.json").read_text("utf-8"))
    return data


@cache
def policy() -> str:
    return (FIXTURE / "policy.md").read_text("utf-8")


def trajectories() -> dict[int, Trajectory]:
    return {t["traj_index"]: t["messages"] for t in fixture()["trajectories"]}


@cache
def builder() -> ContextBuilder:
    return ContextBuilder(tokenizer="o200k_base")


def cut_points(messages: Trajectory) -> list[int]:
    """Ends of the prefixes to build: after a user message or after a finished tool block."""
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    return [
        end for end in range(first_user + 1, len(messages) + 1)
        if messages[end - 1]["role"] == "user"
        or (messages[end - 1]["role"] == "tool"
            and (end == len(messages) or messages[end]["role"] != "tool"))
    ]


def cases() -> list[Any]:
    return [pytest.param(index, end, id=f"traj{index}-{end}")
            for index, messages in trajectories().items() for end in cut_points(messages)]


def new_ids_of_last_user_message(system: str, conversation: Trajectory) -> list[str]:
    """Id-like strings of the last user message that no earlier message (or the policy) has."""
    last = max(i for i, m in enumerate(conversation) if m["role"] == "user")
    earlier = context_text([{"role": "system", "content": system}, *conversation[:last]])
    return [value for value in ID_LIKE.findall(conversation[last]["content"] or "")
            if value not in earlier]


def reused_ids(messages: Trajectory) -> int:
    """How many tool calls reuse an id an earlier call of the trajectory had."""
    ids = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    return len(ids) - len(set(ids))


def check_build(system: str, traj_index: int, conversation: Trajectory, budget: int) -> None:
    """Build the prefix as the benchmark does; assert pairs, budget and the user's new ids."""
    conversation = tuple(conversation)
    history, user_input, turn = split_conversation(conversation)
    case = TauCase(traj_index=traj_index, has_cut=True, conversation=conversation,
                   history=history, user_input=user_input, turn=turn, facts=())

    ctx = build_tau(builder(), BuildPlan.named("tool_heavy"), system, case, budget)
    messages = ctx.to_messages("openai")  # raises ValidationError on a broken pair

    where = f"traj {traj_index}, {len(conversation)} messages, budget {budget}"
    assert pair_problems(messages) == [], where
    used = section_tokens(ctx, "user", "history", "tool_results")
    assert used <= budget, where
    text = context_text(messages)
    for value in new_ids_of_last_user_message(system, conversation):
        assert value in text, f"{value!r} from the last user message was lost ({where})"


def recency_breaks(trajs: Sequence[Trajectory]) -> int:
    """Prefix builds whose plain recency cut leaves a broken pair."""
    count = builder().tokenizer.count
    broken = 0
    for messages in trajs:
        for end in cut_points(messages):
            for budget in BUDGETS:
                kept = baseline.recency(messages[:end], budget,
                                        lambda m: message_tokens(m, count))
                broken += bool(pair_problems(kept))
    return broken


def test_fixture_is_invented_small_and_what_make_py_writes() -> None:
    data = fixture()
    assert data["_source"].startswith("invented for contextwright's tests")
    assert 2 <= len(data["trajectories"]) <= 3
    assert all(len(t["messages"]) <= REAL_PREFIX for t in data["trajectories"])
    spec = importlib.util.spec_from_file_location("tau_pairs_make", FIXTURE / "make.py")
    assert spec is not None and spec.loader is not None
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    assert (FIXTURE / "trajectories.json").read_text("utf-8") == make.render()


def test_the_fixture_exercises_reused_ids_and_long_turns() -> None:
    longest_turn = longest_result = 0
    empty_results = both_text_and_call = 0
    for messages in trajectories().values():
        _, _, turn = split_conversation(messages)
        longest_turn = max(longest_turn, len(turn))
        results = [m["content"] for m in messages if m["role"] == "tool"]
        longest_result = max(longest_result, *map(len, results))
        empty_results += results.count("")
        both_text_and_call += sum(bool(m.get("content") and m.get("tool_calls"))
                                  for m in messages)
        assert pair_problems(messages) == []  # the trajectories themselves are well paired
    assert sum(map(reused_ids, trajectories().values())) >= 2
    assert longest_turn >= 20
    assert longest_result >= 2500 and empty_results >= 2 and both_text_and_call >= 1
    assert len(policy()) >= 5000  # a long system prompt, outside the history budget


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


def test_last_user_messages_bring_new_ids() -> None:
    """The id check has something to check: some prefixes end on a user message with new ids."""
    found = {value for messages in trajectories().values() for end in cut_points(messages)
             for value in new_ids_of_last_user_message(policy(), messages[:end])}
    assert {"ines_okafor_5127", "tomas_reyes_2084", "VCH83120"} <= found


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize(("traj_index", "end"), cases())
def test_pairs_intact_and_user_ids_survive(traj_index: int, end: int, budget: int) -> None:
    check_build(policy(), traj_index, trajectories()[traj_index][:end], budget)


def test_recency_baseline_breaks_pairs_on_the_same_trajectories() -> None:
    """The check has teeth on this data: plain recency cutting leaves orphaned results."""
    assert recency_breaks(list(trajectories().values())) > 0


# ----- real data ------------------------------------------------------------------------------


def real_sample(folder: Path) -> tuple[str, dict[int, Trajectory]]:
    """The policy and the first ``REAL_PREFIX`` messages of three real trajectories: the first
    two whose prefix reuses a tool-call id and the one whose prefix ends in the longest turn."""
    rows = json.loads((folder / "gpt-4o-airline-dev.json").read_text("utf-8"))
    system = rows[0]["traj"][0]
    assert system["role"] == "system"
    prefixes = {}
    for i, row in enumerate(rows):
        messages = row["traj"][1:REAL_PREFIX + 1]
        while messages[-1].get("tool_calls"):  # a call whose result is past the prefix
            messages = messages[:-1]
        prefixes[i] = messages
    reusing = [i for i, messages in prefixes.items() if reused_ids(messages)][:2]
    longest = max((i for i in prefixes if i not in reusing),
                  key=lambda i: len(split_conversation(prefixes[i])[2]))
    return system["content"], {i: prefixes[i] for i in (*reusing, longest)}


@pytest.mark.data
def test_real_trajectories_keep_pairs_and_user_ids(shared_data: Path) -> None:
    system, sample = real_sample(shared_data / "tau-bench-airline-dev")
    assert sum(map(reused_ids, sample.values())) >= 2
    assert max(len(split_conversation(m)[2]) for m in sample.values()) >= 20
    for traj_index, messages in sample.items():
        assert pair_problems(messages) == []
        for end in cut_points(messages):
            for budget in BUDGETS:
                check_build(system, traj_index, messages[:end], budget)
    assert recency_breaks(list(sample.values())) > 0
