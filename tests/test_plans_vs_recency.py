"""Every shipped plan does at least as well as keeping the most recent messages.

A user who picks a plan (or gets one from ``select_plan``) for a request it was not tuned for —
``chat`` for an agent loop with tool calls in its history, ``simple_qa`` with a history — must
still see the context a plain recency window would give them, or better. On the invented
trajectories of ``tests/fixtures/tau_pairs`` (ids first seen in user and tool messages, pooled
over every cut point), and, marked ``data``, on the development sets of ``../shared/data``
(``bench/plans_vs_recency.py``: τ-bench fact survival and pair integrity, LoCoMo evidence
recall and density, HotpotQA supporting-sentence recall).
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder
from contextwright.core.plan import SHIPPED_PLANS
from contextwright.evaluate.metrics import context_text, pair_problems
from contextwright.evaluate.tau import TauCase, build_tau, recency_messages, split_conversation

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "tau_pairs"
BUDGETS = (500, 1000, 2000)
ID_LIKE = re.compile(r"\b(?=[A-Za-z0-9_]*\d)[A-Za-z0-9_]{5,}\b")
BUILDER = ContextBuilder()
COUNT = BUILDER.tokenizer.count


@cache
def cases() -> tuple[TauCase, ...]:
    """A case at each model call of each fixture trajectory (each assistant message)."""
    data = json.loads((FIXTURE / "trajectories.json").read_text("utf-8"))
    found = []
    for t, trajectory in enumerate(data["trajectories"]):
        messages = trajectory["messages"]
        for cut, message in enumerate(messages):
            conversation = tuple(messages[1:cut])
            if message["role"] != "assistant" or not any(
                    m["role"] == "user" for m in conversation):
                continue
            history, user_input, turn = split_conversation(conversation)
            facts = tuple(dict.fromkeys(
                value for m in conversation if m["role"] in ("user", "tool")
                for value in ID_LIKE.findall(str(m.get("content") or ""))))
            if facts:
                found.append(TauCase(traj_index=t, has_cut=True, conversation=conversation,
                                     history=history, user_input=user_input, turn=turn,
                                     facts=facts))
    return tuple(found)


def survival(facts: Sequence[str], messages: Sequence[Mapping[str, Any]]) -> int:
    text = context_text(messages)
    return sum(value in text for value in facts)


@pytest.mark.parametrize("plan_name", SHIPPED_PLANS)
@pytest.mark.parametrize("budget", BUDGETS)
def test_every_shipped_plan_keeps_at_least_the_ids_recency_keeps(plan_name: str,
                                                                  budget: int) -> None:
    policy = (FIXTURE / "policy.md").read_text("utf-8")
    plan = BuildPlan.named(plan_name)
    ours = recent = 0
    for case in cases():
        messages = build_tau(BUILDER, plan, policy, case, budget).to_messages("openai")
        assert not pair_problems(messages)
        ours += survival(case.facts, messages)
        recent += survival(case.facts, recency_messages(policy, case, budget, COUNT))
    assert ours >= recent, f"{plan_name} at {budget}: {ours} ids kept, recency {recent}"


def test_the_fixture_has_cases_where_recency_loses_ids() -> None:
    # Otherwise the comparison above could not fail.
    policy = (FIXTURE / "policy.md").read_text("utf-8")
    lost = [case for case in cases()
            if survival(case.facts, recency_messages(policy, case, 500, COUNT))
            < len(case.facts)]
    assert len(lost) >= 3


@cache
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plans_vs_recency",
                                                  ROOT / "bench" / "plans_vs_recency.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.data
@pytest.mark.parametrize("suite", ["tau", "locomo", "hotpotqa"])
def test_every_shipped_plan_is_at_least_recency_on_the_dev_sets(shared_data: Path,
                                                                suite: str) -> None:
    below = [f"{plan} at {budget}: {cells}"
             for _, plan, budget, cells, low in bench().rows(shared_data, [suite], SHIPPED_PLANS)
             if low]
    assert not below, below
