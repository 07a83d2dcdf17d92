"""Plans that cannot silently produce a wrong context.

A plan that would never show the user's input is refused at load; a build that would show none
of it (a plan that lets it be cut, a budget too small) is a ``BudgetError`` with the report, not
an empty or question-less context; every documented strategy is accepted; ``Request.validate``
checks tool pairing in the whole request, as the build does in the part it reads; a history that
repeats the system prompt does not show it twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextwright.builder import ContextBuilder
from contextwright.core.plan import BuildPlan, plan_from_mapping
from contextwright.core.request import Request
from contextwright.errors import BudgetError, InvalidInputError, PlanError

BUILDER = ContextBuilder(tokenizer="estimate")


# --- the user source -------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "name: p\nsources:\n  - {source: system}\n  - {source: history}\n",
    "name: p\nsources:\n  - {source: rag}\n",
], ids=["system-and-history", "rag-only"])
def test_a_plan_without_a_user_source_is_refused_at_load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(PlanError, match="no user source"):
        BuildPlan.load(path)


def test_a_plan_without_a_user_source_is_refused_in_code() -> None:
    with pytest.raises(PlanError, match="no user source"):
        BuildPlan.builder("nouser").add("system").add("history").build()


def test_every_shipped_plan_has_a_user_source() -> None:
    for name in ("chat", "tool_heavy", "rag_qa", "doc_analysis", "simple_qa"):
        assert BuildPlan.named(name).spec("user") is not None


# --- strategies ------------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["truncate", "keyword_window", "head", "drop"])
def test_every_documented_strategy_is_accepted(strategy: str) -> None:
    plan = plan_from_mapping({"name": "p", "sources": [
        {"source": "user"}, {"source": "rag", "strategy": strategy}]})
    spec = plan.spec("rag")
    assert spec is not None and spec.strategy == strategy


def test_strategy_head_keeps_the_start_of_a_document() -> None:
    from contextwright.core.request import Document

    plan = (BuildPlan.builder("head").add("user").add("rag", strategy="head")
            .budget(available_override=120).build())
    text = "Opening line of the policy. " + " ".join(f"word{i}" for i in range(400))
    ctx = BUILDER.build(plan, Request(user_input="word399?",
                                      documents=[Document(id="d", text=text)]))
    shown = " ".join(str(m["content"]) for m in ctx.to_messages())
    assert "Opening line of the policy." in shown
    assert "word399 " not in shown.replace("word399?", "")


# --- a build that would show none of the user's input ---------------------------------------

def cuttable_plan(budget: int) -> BuildPlan:
    return (BuildPlan.builder("cuttable").add("system", cuttable=True).add("user", cuttable=True)
            .budget(available_override=budget).build())


@pytest.mark.parametrize("budget", [8, 12, 20, 40])
def test_a_cuttable_user_input_that_cannot_fit_at_all_is_a_budget_error(budget: int) -> None:
    request = Request(user_input="hello there " * 50, system="sys " * 50)
    with pytest.raises(BudgetError, match="user's input") as error:
        BUILDER.build(cuttable_plan(budget), request)
    assert error.value.report.available == budget
    assert any(d.source == "user" and d.action == "dropped" for d in error.value.report.decisions)


def test_a_cuttable_user_input_that_fits_is_shown() -> None:
    request = Request(user_input="hello there", system="sys " * 200)
    ctx = BUILDER.build(cuttable_plan(40), request)
    assert ctx.to_messages() == [{"role": "user", "content": "hello there"}]


def test_an_empty_user_input_is_no_error() -> None:
    ctx = BUILDER.build(BuildPlan.named("chat"), Request(user_input="", system="sys"))
    assert ctx.to_messages()[0]["content"] == "sys"


# --- Request.validate checks tool pairing everywhere -----------------------------------------

def call(call_id: str, *more: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in (call_id, *more)]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


USER = {"role": "user", "content": "u"}
ASSISTANT = {"role": "assistant", "content": "a"}

ORPHANS = {
    "result first": [result("a"), USER, ASSISTANT],
    "result after a user message": [USER, call("a"), result("a"), USER, result("a")],
    "result after plain assistant": [USER, ASSISTANT, result("a")],
    "result names another call": [USER, call("a"), result("b")],
    "result answers a call twice": [USER, call("a"), result("a"), result("a")],
}


@pytest.mark.parametrize("part", ["history", "turn"])
@pytest.mark.parametrize("messages", list(ORPHANS.values()), ids=list(ORPHANS))
def test_validate_refuses_a_tool_result_that_answers_no_call(part: str,
                                                             messages: list[Any]) -> None:
    filler = [USER, ASSISTANT] * 500  # the orphan sits far outside any budget
    request = Request(user_input="hi", **{part: [*messages, *filler] if part == "history"
                                          else messages})
    with pytest.raises(InvalidInputError, match=rf"{part}\[\d+\]"):
        request.validate()


def test_from_dict_refuses_an_orphan_result_outside_the_budget() -> None:
    with pytest.raises(InvalidInputError, match=r"history\[0\]"):
        Request.from_dict({"user_input": "hi",
                           "history": [result("a"), *([USER, ASSISTANT] * 500)]})


PAIRED = {
    "answered": [USER, call("a"), result("a"), ASSISTANT],
    "answered out of order": [USER, call("a", "b"), result("b"), result("a")],
    "reused ids across calls": [USER, call("a"), result("a"), call("a"), result("a")],
    "unanswered call": [USER, call("a", "b"), result("a"), USER],
    "call without results": [USER, call("a")],
}


@pytest.mark.parametrize("messages", list(PAIRED.values()), ids=list(PAIRED))
def test_validate_accepts_what_the_build_accepts(messages: list[Any]) -> None:
    request = Request(user_input="hi", history=messages)
    request.validate()
    BUILDER.build(BuildPlan.named("chat"), request).to_messages()
    Request(user_input="hi", turn=messages[1:]).validate()


# --- a history that repeats the system prompt -------------------------------------------------

def test_a_history_system_message_repeating_the_system_prompt_is_shown_once() -> None:
    history = [{"role": "system", "content": "Be nice."}, USER, ASSISTANT]
    ctx = BUILDER.build(BuildPlan.named("chat"),
                        Request(user_input="hi", system="Be nice.", history=history))
    shown = " ".join(str(m["content"]) for m in ctx.to_messages())
    assert shown.count("Be nice.") == 1
    decision = next(d for d in ctx.report.decisions if d.key == "history.m0")
    assert decision.action == "dropped" and "system prompt" in decision.reason
    assert not [d for d in ctx.report.decisions if "not read" in d.reason]


def test_a_different_history_system_message_is_still_shown() -> None:
    history = [{"role": "system", "content": "Earlier note."}, USER, ASSISTANT]
    ctx = BUILDER.build(BuildPlan.named("chat"),
                        Request(user_input="hi", system="Be nice.", history=history))
    shown = " ".join(str(m["content"]) for m in ctx.to_messages())
    assert "Earlier note." in shown and shown.count("Be nice.") == 1
