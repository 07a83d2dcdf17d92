"""The cache report tells the truth about what a provider reads: Anthropic's 20-block lookback
counted in content blocks, breakpoints only where the next call can read them, a new cache line
for another model or tokenizer, and the right reason when only the volatile part changed."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.cache import LOOKBACK_BLOCKS, Fingerprint, cache_line_change, compare
from contextwright.core.final import FinalContext
from contextwright.core.items import Message, ToolCall
from contextwright.core.stepping import anthropic_blocks
from contextwright.errors import InvalidInputError

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up a record.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}]
SYSTEM = "You are a support agent. Follow the policy carefully. " * 150

Block = tuple[str, bool]


def rendered_blocks(ctx: FinalContext) -> list[Block]:
    """The Anthropic request as (content, has a breakpoint) blocks: tools, system, messages."""
    body = ctx.to_request("anthropic", model="claude-sonnet-4-5")

    def plain(block: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in block.items() if k != "cache_control"},
                          sort_keys=True)

    blocks = [(plain(t), "cache_control" in t) for t in body.get("tools", [])]
    blocks += [(plain(s), "cache_control" in s) for s in body.get("system", [])]
    for message in body["messages"]:
        blocks += [(message["role"] + plain(b), "cache_control" in b)
                   for b in message["content"]]
    return blocks


def anthropic_read(before: list[Block], now: list[Block]) -> int | None:
    """The last block of ``now`` Anthropic reads from the cache ``before`` wrote (None: none).

    A prefix written at one of ``before``'s breakpoints, identical here, and at most
    ``LOOKBACK_BLOCKS`` blocks before one of this request's breakpoints.
    """
    same = next((i for i, (a, b) in enumerate(zip(before, now, strict=False)) if a[0] != b[0]),
                min(len(before), len(now)))
    written = [i for i, (_, marked) in enumerate(before) if marked and i < same]
    points = [i for i, (_, marked) in enumerate(now) if marked]
    read = [w for w in written if any(w <= p <= w + LOOKBACK_BLOCKS for p in points)]
    return max(read) if read else None


def tokens_through_block(ctx: FinalContext, block: int | None) -> int:
    """Tokens of ``ctx``'s request through its ``block``-th Anthropic block."""
    fingerprint = ctx.fingerprint
    assert fingerprint is not None and fingerprint.blocks is not None
    if block is None:
        return 0
    tools = len(ctx.tool_schemas)
    if block < tools:
        return fingerprint.tool_tokens
    seen = tools
    for index, count in enumerate(fingerprint.blocks):
        seen += count
        if block < seen:
            return fingerprint.tool_tokens + sum(fingerprint.tokens[:index + 1])
    raise AssertionError("block past the request")


def agent_turn(turn: int, steps: int, question: str) -> list[dict[str, Any]]:
    """A user turn an agent runner served: its question, steps of text + a call, the answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for step in range(steps):
        call = f"toolu_{turn}_{step}"
        messages += [
            {"role": "assistant", "content": f"Let me look up record {turn}-{step}.",
             "tool_calls": [{"id": call, "type": "function", "function": {
                 "name": "lookup", "arguments": json.dumps({"id": f"R{turn}{step}"})}}]},
            {"role": "tool", "tool_call_id": call,
             "content": json.dumps({"id": f"R{turn}{step}", "status": "ok"})}]
    messages.append({"role": "assistant", "content": f"All records of batch {turn} are fine."})
    return messages


def per_user_turn_builds(steps: int = 7, turns: int = 5) -> list[FinalContext]:
    """One build per user turn, the agent's tool loop run in between (24 blocks a turn)."""
    builder = ContextBuilder()
    plan = BuildPlan.named("tool_heavy").with_budget(available_override=60000)
    history: list[dict[str, Any]] = []
    previous = None
    built = []
    for turn in range(1, turns + 1):
        question = f"Please check batch {turn} of my records."
        ctx = builder.build(plan, Request(user_input=question, system=SYSTEM,
                                          history=list(history), tools=TOOLS),
                            previous=previous, cache=True)
        built.append(ctx)
        history += agent_turn(turn, steps, question)
        previous = ctx.fingerprint
    return built


def test_the_fingerprint_counts_each_message_s_anthropic_blocks() -> None:
    for ctx in per_user_turn_builds(turns=3):
        fingerprint = ctx.fingerprint
        assert fingerprint is not None and fingerprint.blocks is not None
        body = ctx.to_request("anthropic", model="claude-sonnet-4-5")
        sent = len(body["system"]) + sum(len(m["content"]) for m in body["messages"])
        assert sum(fingerprint.blocks) == sent


def test_anthropic_blocks_count_steps_parallel_results_and_the_lead_turn() -> None:
    calls = (ToolCall(id="c1", name="lookup", arguments="{}"),
             ToolCall(id="c2", name="lookup", arguments="{}"))
    messages = [
        Message(role="system", content="policy"),
        Message(role="assistant", content="hello"),  # the request opens with a lead user turn
        Message(role="assistant", content="two calls", tool_calls=calls),
        Message(role="tool", content="r1", tool_call_id="c1"),
        Message(role="tool", content="r2", tool_call_id="c2"),
        Message(role="assistant", content=""),  # left out of the request
        Message(role="user", content=" "),  # shown as a stand-in text
    ]
    assert anthropic_blocks(messages, [False] * len(messages)) == (1, 2, 3, 1, 1, 0, 1)


def test_anthropic_readable_tokens_are_what_its_lookback_reads_when_a_turn_adds_many_blocks(
) -> None:
    built = per_user_turn_builds()
    blocks = [rendered_blocks(ctx) for ctx in built]
    for before, now, ctx in zip(blocks, blocks[1:], built[1:], strict=False):
        cache = ctx.report.cache
        assert cache is not None
        assert cache.readable_tokens["anthropic"] == tokens_through_block(
            ctx, anthropic_read(before, now))


def test_a_call_that_appends_past_the_lookback_marks_the_previous_write() -> None:
    built = per_user_turn_builds()
    for before, ctx in itertools.pairwise(built):
        previous, current = before.fingerprint, ctx.fingerprint
        assert previous is not None and current is not None
        assert previous.breakpoints is not None and current.breakpoints is not None
        last_write = max(end for end in previous.breakpoints if end > 0)
        # The call appends a whole agent turn (24 blocks): without a breakpoint on the previous
        # request's last write, Anthropic would read nothing past the system prompt.
        assert last_write in current.breakpoints
        cache = ctx.report.cache
        assert cache is not None
        assert cache.readable_tokens["anthropic"] == cache.prefix_tokens


def test_the_lookback_is_counted_in_blocks_not_messages() -> None:
    # Messages 0-1 (the system prompt and a question) were written at 1; this request's next
    # breakpoint is 5 messages later but 25 blocks later (assistant steps of several blocks).
    previous = Fingerprint(plan="p", target="chat", tools="t", tool_tokens=0,
                           messages=("s", "q"), tokens=(1500, 10), breakpoints=(0, 1))
    current = Fingerprint(plan="p", target="chat", tools="t", tool_tokens=0,
                          messages=("s", "q", "a", "r", "a2", "r2", "u"),
                          tokens=(1500, 10, 30, 30, 30, 30, 10), breakpoints=(0, 6),
                          blocks=(1, 1, 10, 1, 10, 1, 3))
    report = compare(previous, current, ("system", *["history"] * 6), (), {})
    assert report.readable_tokens["anthropic"] == 1500
    # With one-block steps the same breakpoint is 13 blocks after the write: it is read.
    near = compare(previous, _with_blocks(current, (1, 1, 5, 1, 5, 1, 3)),
                   ("system", *["history"] * 6), (), {})
    assert near.readable_tokens["anthropic"] == 1510


def _with_blocks(fingerprint: Fingerprint, blocks: tuple[int, ...]) -> Fingerprint:
    return Fingerprint.from_dict({**fingerprint.to_dict(), "blocks": list(blocks)})


def readme_loop(env: bool, calls: int = 4) -> list[FinalContext]:
    """The README's loop: one build per user message, with the time as env when asked."""
    builder = ContextBuilder()
    plan = BuildPlan.named("chat")
    history: list[dict[str, str]] = []
    previous = None
    built = []
    for call in range(calls):
        question = f"question {call} about my booking " + "and its details " * 30
        ctx = builder.build(plan, Request(user_input=question, system="You are terse. " * 200,
                                          history=list(history),
                                          env={"time": f"12:0{call}"} if env else {}),
                            previous=previous, cache=True)
        built.append(ctx)
        history += [{"role": "user", "content": question},
                    {"role": "assistant", "content": f"answer {call}"}]
        previous = ctx.fingerprint
    return built


@pytest.mark.parametrize("env", [True, False])
def test_every_anthropic_breakpoint_is_read_by_the_next_call(env: bool) -> None:
    built = readme_loop(env)
    for ctx, after in itertools.pairwise(built):
        before, now = rendered_blocks(ctx), rendered_blocks(after)
        same = next((i for i, (a, b) in enumerate(zip(before, now, strict=False))
                     if a[0] != b[0]), len(before))
        marked = [i for i, (_, has) in enumerate(before) if has]
        assert marked and all(i < same for i in marked), (marked, same)


def test_the_input_keeps_its_breakpoint_when_nothing_volatile_precedes_it() -> None:
    ctx = readme_loop(env=False, calls=2)[1]
    assert ctx.cache_points[-1] == len(ctx.messages) - 1


def stable_builds(tokenizer: str | None) -> tuple[Fingerprint, ContextBuilder, BuildPlan,
                                                  list[dict[str, str]]]:
    plan = BuildPlan.named("tool_heavy").with_budget(available_override=6000)
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i} about booking {i // 2}"} for i in range(20)]
    first = ContextBuilder().build(plan, Request(user_input="q10", system=SYSTEM,
                                                 history=history[:18]), cache=True)
    assert first.fingerprint is not None
    other = ContextBuilder() if tokenizer is None else ContextBuilder(tokenizer=tokenizer)
    return first.fingerprint, other, plan, history


def test_a_fingerprint_counted_with_another_tokenizer_starts_a_new_cache_line() -> None:
    fingerprint, other, plan, history = stable_builds("cl100k_base")
    ctx = other.build(plan, Request(user_input="q11", system=SYSTEM, history=history),
                      previous=fingerprint, cache=True)
    cache = ctx.report.cache
    assert cache is not None and cache.previous
    assert cache.prefix_tokens == 0 and cache.broke_at == 0
    assert cache.readable_tokens == {"anthropic": 0, "openai": 0}
    assert cache.cost["openai"] == 1.0
    assert cache.reason is not None and "cl100k_base" in cache.reason
    assert "new cache line" in cache.reason
    # The new line goes on from here as any other.
    again = other.build(plan, Request(user_input="q12", system=SYSTEM, history=history),
                        previous=ctx.fingerprint, cache=True)
    assert again.report.cache is not None and again.report.cache.prefix_tokens > 0


def test_a_fingerprint_for_another_model_starts_a_new_cache_line() -> None:
    fingerprint, *_ = stable_builds(None)
    for_gpt = Fingerprint.from_dict({**fingerprint.to_dict(), "model": "gpt-4o"})
    assert for_gpt.model == "gpt-4o"
    why = cache_line_change(for_gpt, "claude-sonnet-4-5", fingerprint.tokenizer)
    assert why is not None and "claude-sonnet-4-5" in why
    assert cache_line_change(for_gpt, "gpt-4o", fingerprint.tokenizer) is None
    assert cache_line_change(for_gpt, "", fingerprint.tokenizer) is None  # not known: goes on


def test_an_older_fingerprint_without_tokenizer_model_or_blocks_still_continues() -> None:
    fingerprint, builder, plan, history = stable_builds(None)
    data = fingerprint.to_dict()
    assert data["tokenizer"] and "blocks" in data
    for name in ("tokenizer", "model", "blocks"):
        del data[name]
    older = Fingerprint.from_json(json.dumps(data))
    assert (older.tokenizer, older.model, older.blocks) == ("", "", None)
    ctx = builder.build(plan, Request(user_input="q11", system=SYSTEM, history=history),
                        previous=older, cache=True)
    now = builder.build(plan, Request(user_input="q11", system=SYSTEM, history=history),
                        previous=fingerprint, cache=True)
    assert ctx.report.cache == now.report.cache
    assert ctx.report.cache is not None and ctx.report.cache.prefix_tokens > 0


@pytest.mark.parametrize("blocks", [[1], "3", [1, -1] * 100, [True] * 200])
def test_a_fingerprint_with_malformed_blocks_is_refused(blocks: object) -> None:
    fingerprint, *_ = stable_builds(None)
    with pytest.raises(InvalidInputError, match="blocks"):
        Fingerprint.from_dict({**fingerprint.to_dict(), "blocks": blocks})


def test_notes_that_come_and_go_are_reported_as_the_volatile_part_not_a_plan_change() -> None:
    builder = ContextBuilder()
    plan = BuildPlan.named("tool_heavy")
    system = "You are a careful airline agent. " * 20
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 30}
               for i in range(10)]
    first = builder.build(plan, Request(user_input="next question?", system=system,
                                        history=history, notes=["the user is a gold member"]),
                          cache=True)
    history += [{"role": "user", "content": "next question?"},
                {"role": "assistant", "content": "ok."}]
    second = builder.build(plan, Request(user_input="and then?", system=system,
                                         history=history),
                           previous=first, cache=True)
    cache = second.report.cache
    assert cache is not None and cache.advanced == ()
    assert cache.reason is not None and "stable part is repeated whole" in cache.reason


def test_a_build_for_another_model_with_the_same_tokenizer_starts_a_new_cache_line() -> None:
    """gpt-4o and gpt-4o-mini count alike, but each has its own provider cache."""
    history = [{"role": "user", "content": f"question {i}"} if i % 2 == 0
               else {"role": "assistant", "content": f"answer {i}"} for i in range(10)]
    plan = BuildPlan.named("chat")
    first = ContextBuilder(model="gpt-4o").build(
        plan, Request(user_input="q", system=SYSTEM, history=history), cache=True)
    assert first.fingerprint.model == "gpt-4o"
    mini = ContextBuilder(model="gpt-4o-mini")
    assert mini.tokenizer.name == ContextBuilder(model="gpt-4o").tokenizer.name
    ctx = mini.build(plan, Request(user_input="q2", system=SYSTEM, history=history),
                     previous=first, cache=True)
    cache = ctx.report.cache
    assert cache is not None and cache.prefix_tokens == 0
    assert cache.reason is not None and "gpt-4o-mini" in cache.reason
    same = ContextBuilder(model="gpt-4o").build(
        plan, Request(user_input="q2", system=SYSTEM, history=history), previous=first,
        cache=True)
    assert same.report.cache is not None and same.report.cache.prefix_tokens > 0
