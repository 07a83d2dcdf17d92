"""Builds that continue a previous layout (``previous=``) account for every message, as fresh
builds do: each history message is shown, or reported left out (dropped by name, or in a run
never read), never both; and a chat round (a question and its reply) is shown whole or not at
all, so no reply is shown after another question than its own."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, ContextManager, MemoryStore, Request
from contextwright import builder as builder_module
from contextwright.core.final import FinalContext
from test_properties import Account, _check_every_message_accounted

BUILDER = ContextBuilder()
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()
PLANS = ("chat", "rag_qa", "tool_heavy", "simple_qa")


def _text(tag: str, words: int) -> str:
    return f"{tag} " + " ".join(WORDS[i % len(WORDS)] for i in range(words))


def _round(number: int, question: int, answer: int, calls: bool) -> list[dict[str, Any]]:
    """A question and its reply; with ``calls``, a tool call and its result between them."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": _text(f"U{number}", question)}]
    if calls:
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{number}", "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"n": number})}}]},
            {"role": "tool", "tool_call_id": f"call_{number}",
             "content": json.dumps({"n": number, "note": _text(f"R{number}", answer)})}]
    messages.append({"role": "assistant", "content": _text(f"A{number}", answer)})
    return messages


def _chat_rounds_whole(ctx: FinalContext, raw: Sequence[Mapping[str, Any]]) -> None:
    """A reply in a round without calls is shown only right after the question it answers.

    (A round with calls may part: its newest blocks are kept first, as in a fresh build.)
    """
    account = Account(ctx, raw, "history")
    shown = sorted(account.kept)
    for before, after in itertools.pairwise(shown):
        reply = raw[after]
        if reply["role"] != "assistant" or reply.get("tool_calls") or raw[after - 1][
                "role"] != "user":
            continue  # only a plain question-and-reply round is checked
        assert before == after - 1, (
            f"history.m{after} (a reply) is shown after history.m{before}, not after the "
            f"question it answers (history.m{after - 1})")


@settings(max_examples=40, deadline=None)
@given(plan_name=st.sampled_from(PLANS), budget=st.sampled_from((400, 600, 900)),
       rounds=st.lists(st.tuples(st.integers(5, 40), st.integers(5, 60), st.booleans(),
                                 st.integers(0, 20)),
                       min_size=4, max_size=14))
def test_a_continued_build_accounts_for_every_message_and_keeps_chat_rounds_whole(
        plan_name: str, budget: int, rounds: list[tuple[int, int, bool, int]]) -> None:
    plan = BuildPlan.named(plan_name).with_budget(available_override=budget)
    history: list[dict[str, Any]] = []
    previous: FinalContext | None = None
    for number, (question, answer, calls, recalls) in enumerate(rounds):
        # Some inputs name an earlier round (its tag): recall brings that turn back.
        asked = _text(f"Q{number}", question) + (
            f" about U{recalls} and A{recalls}" if recalls < number else "")
        request = Request(user_input=asked, system="Be brief.", history=list(history))
        ctx = BUILDER.build(plan, request, previous=previous, cache=True)
        _check_every_message_accounted(ctx, plan, request.history, "history", "history")
        account = Account(ctx, request.history, "history")
        both = sorted(set(account.kept) & account.unread)
        assert not both, f"history.m{both} shown and reported as never read"
        _chat_rounds_whole(ctx, request.history)
        previous = ctx
        history += _round(number, question, answer, calls)


def test_a_plain_chat_cut_in_steps_shows_whole_rounds_and_reports_the_rest() -> None:
    # Found by a user: from the seventh call on, replies were shown after later questions and
    # messages went missing without a decision.
    plan = BuildPlan.named("rag_qa").with_budget(available_override=600)
    history: list[dict[str, Any]] = []
    previous: FinalContext | None = None
    for turn in range(12):
        request = Request(user_input=_text(f"U{turn}", 20), system="sys", history=list(history))
        ctx = BUILDER.build(plan, request, previous=previous, cache=True)
        _check_every_message_accounted(ctx, plan, request.history, "history", "history")
        _chat_rounds_whole(ctx, request.history)
        previous = ctx
        history += [{"role": "user", "content": request.user_input},
                    {"role": "assistant", "content": _text(f"A{turn}", 25 + 10 * (turn % 3))}]


def test_a_managed_session_accounts_for_every_message_of_every_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The manager keeps a stable prefix by default: each call continues the last one's layout.
    built: list[tuple[BuildPlan, Request, FinalContext]] = []
    build = builder_module.build_context

    def spied(plan: BuildPlan, request: Request, *args: Any, **kwargs: Any) -> FinalContext:
        context = build(plan, request, *args, **kwargs)
        built.append((plan, request, context))
        return context

    monkeypatch.setattr(builder_module, "build_context", spied)
    manager = ContextManager(store=MemoryStore(), system="sys", background=False,
                             budget={"available_override": 800})
    for turn in range(40):
        built.clear()
        manager.prepare("u", "s", _text(f"U{turn}", 20 + 7 * (turn % 4)))
        plan, request, context = built[-1]
        _check_every_message_accounted(context, plan, request.history, "history", "history")
        account = Account(context, request.history, "history")
        assert not set(account.kept) & account.unread
        manager.record("u", "s", assistant=_text(f"A{turn}", 25 + 11 * (turn % 3)))


def _diary(rounds: int) -> list[dict[str, Any]]:
    """Rounds about a dozen topics, dated an hour to two days apart."""
    topics = ["puppy named Rex", "pottery workshop", "trip to Lisbon", "marathon training",
              "guitar lessons", "new job at the bank", "sister's wedding", "garden tomatoes",
              "broken laptop", "chess tournament", "book club novel", "salsa dancing"]
    history: list[dict[str, Any]] = []
    for number in range(rounds):
        topic = topics[(number * 7) % len(topics)]
        day = f"2024-{1 + number // 28:02d}-{1 + number % 28:02d}T09:00:00"
        history += [{"role": "user", "content": f"Round {number}: about my {topic}. "
                     f"Code R{number:04d}.", "timestamp": day},
                    {"role": "assistant", "content": f"Nice to hear about the {topic} "
                     f"(round {number}).", "timestamp": day}]
    return history


def test_an_edited_reply_in_the_pinned_head_is_shown_or_reported_with_its_question() -> None:
    # The layout found again after the edit lacks the reply: its question was kept in the head
    # alone, and the reply was neither shown nor reported.
    history = _diary(300)
    plan = BuildPlan.named("chat")
    first = BUILDER.build(plan, Request(user_input="Did I mention the chess tournament?",
                                        history=history[:240]), cache=True)
    edited = [dict(message) for message in history[:250]]
    edited[5]["content"] += " (edited)"
    request = Request(user_input="What did I say about the pottery workshop?", history=edited)
    ctx = BUILDER.build(plan, request, previous=first, cache=True)
    _check_every_message_accounted(ctx, plan, request.history, "history", "history")
    account = Account(ctx, request.history, "history")
    assert not set(account.kept) & account.unread
    _chat_rounds_whole(ctx, request.history)
    if 4 in account.kept:  # the question is shown only with its reply, as it now reads
        assert 5 in account.kept


def _turn_with_calls(invoice: int) -> list[dict[str, Any]]:
    """A question, three tool calls with their results, and the answer."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"Please check the zebra invoice {invoice} and the walrus "
                                    f"refund {_text('pad', 12)}"}]
    for n in range(3):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{n}", "type": "function",
                "function": {"name": "lookup",
                             "arguments": json.dumps({"invoice": invoice + n})}}]},
            {"role": "tool", "tool_call_id": f"call_{n}",
             "content": json.dumps({"invoice": invoice + n, "note": _text("note", 36)})}]
    messages.append({"role": "assistant", "content": f"Invoice {invoice} is paid; the walrus "
                                                     f"refund is pending. {_text('pad', 12)}"})
    return messages


def test_a_recalled_turn_whose_question_is_the_pinned_head_reports_its_other_messages() -> None:
    # Found by fuzzing: the turn was offered as one recalled unit, and as its question was
    # shown (the pinned head), its calls, results and answer got no decision at all.
    plan = BuildPlan.named("chat").with_budget(available_override=2000)
    history = _turn_with_calls(4471)
    for number in range(1, 11):
        history += [{"role": "user", "content": _text(f"Q{number}", 24)},
                    {"role": "assistant", "content": _text(f"A{number}", 36)}]
    previous: FinalContext | None = None
    inputs = ("What is next?", "Thanks. What else?", "And Q12?",
              "Noted: the zebra invoice 4471 and the walrus refund, thanks.")
    for call, asked in enumerate(inputs):
        if call == 1:  # an older message edited: the next build cuts afresh
            history[15] = {**history[15], "content": history[15]["content"] + " (edited)"}
        request = Request(user_input=asked, system="Be brief.", history=list(history))
        ctx = BUILDER.build(plan, request, previous=previous, cache=True)
        _check_every_message_accounted(ctx, plan, request.history, "history", "history")
        previous = ctx
        history += [{"role": "user", "content": asked},
                    {"role": "assistant", "content": _text(f"answer {call}", 12)}]


def test_a_digest_shown_again_by_a_continued_build_is_reported() -> None:
    plan = BuildPlan.named("tool_heavy").with_budget(available_override=700)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}}}}}]
    history: list[dict[str, Any]] = []
    for number in range(6):
        history += [
            {"role": "user", "content": f"question {number} about order {1000 + number} "
                                        + "detail " * 20},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"c{number}", "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"n": number})}}]},
            {"role": "tool", "tool_call_id": f"c{number}",
             "content": json.dumps({"n": number, "status": "shipped " * 10})},
            {"role": "assistant", "content": f"answer {number} " + "reply " * 20}]
    previous: FinalContext | None = None
    for call in range(3):
        ctx = BUILDER.build(plan, Request(user_input=f"q{call}", system="S", history=history,
                                          tools=tools), previous=previous, cache=True)
        shown = [m for m, section in zip(ctx.messages, ctx.sections, strict=True)
                 if section == "history" and "Digest of" in str(m.content)]
        decided = [d for d in ctx.report.decisions if d.key == "history.digest"]
        assert shown and [d.action for d in decided] == ["compacted"], call
        assert decided[0].tokens_after > 0
        previous = ctx
        history = [*history, {"role": "user", "content": f"q{call}"},
                   {"role": "assistant", "content": f"a{call}"}]
