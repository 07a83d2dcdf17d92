"""How much of its grant a large tool result may take once cut: ``max_item_share`` is the cap.

This turn's tool results declare no item share: when nothing else competes, a result too large
for the grant is cut to the grant, not to half of it, and parallel results share the grant.
History keeps its documented cap (half its grant by default), which ``max_item_share`` sets.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.report import SourceReport

TOOLS = [{"type": "function", "function": {
    "name": "list_invoices", "description": "List invoices.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def _call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": "list_invoices", "arguments": json.dumps(arguments)}}


def _invoices(count: int, prefix: str = "INV") -> str:
    rows = [{"invoice_id": f"{prefix}-{5000 + i}", "amount": f"{100 + i * 7}.{i % 100:02d}",
             "due": f"2024-07-{(i % 28) + 1:02d}"} for i in range(count)]
    return json.dumps({"invoices": rows})


def _row(ctx: Any, source: str) -> SourceReport:
    return next(row for row in ctx.report.sources if row.source == source)


def test_a_lone_large_result_of_this_turn_takes_its_whole_grant() -> None:
    turn = [{"role": "assistant", "content": None, "tool_calls": [_call("c1", {})]},
            {"role": "tool", "tool_call_id": "c1", "content": _invoices(400)}]
    request = Request(user_input="Which invoices are due after July 20? List all ids.",
                      system="sys", tools=TOOLS, turn=turn)
    plan = BuildPlan.named("tool_heavy").with_budget(window=8192)
    ctx = ContextBuilder(tokenizer="o200k_base").build(plan, request)
    row = _row(ctx, "tool_results")
    assert row.truncated == 1
    assert row.tokens >= 0.9 * row.budget, (row.tokens, row.budget)


def test_parallel_results_of_this_turn_share_the_grant() -> None:
    rng = random.Random(3)
    results = []
    for k in range(4):
        rows = [{"order_id": f"ORD-{k}{i:03d}", "total": f"{rng.randint(1, 99)} 000 ₽",
                 "email": f"user{k}{i}@example.ru",
                 "note": "Доставка курьером, оплата картой при получении."} for i in range(30)]
        results.append(json.dumps({"results": rows}, ensure_ascii=False))
    turn: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [
        _call(f"c{k}", {"q": f"region {k}"}) for k in range(4)]}]
    turn += [{"role": "tool", "tool_call_id": f"c{k}", "content": results[k]} for k in range(4)]
    request = Request(user_input="Which order has the highest total?", system="sys",
                      tools=TOOLS, turn=turn)
    plan = BuildPlan.named("tool_heavy").with_budget(window=6000, reserved_output=512)
    ctx = ContextBuilder(tokenizer="o200k_base").build(plan, request)
    row = _row(ctx, "tool_results")
    assert row.items == 5, "the call and its four results"
    assert row.tokens >= 0.9 * row.budget, (row.tokens, row.budget)
    shown = [m["content"] for m in ctx.to_request("openai", model="m")["messages"]
             if m["role"] == "tool"]
    assert len(shown) == 4
    assert all(f"ORD-{k}000" in text for k, text in enumerate(shown))


def _history_with_a_large_result(rounds: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for n in range(rounds):
        history += [{"role": "user", "content": f"Question {n} about invoice INV-{n}?"},
                    {"role": "assistant", "content": f"Answer {n}: it is paid."}]
    history += [{"role": "user", "content": "List every invoice."},
                {"role": "assistant", "content": None, "tool_calls": [_call("h1", {})]},
                {"role": "tool", "tool_call_id": "h1", "content": _invoices(600, "OLD")},
                {"role": "assistant", "content": "Here they are."}]
    return history


def _history_build(share: float | None) -> tuple[int, int, int]:
    """(tokens of the large result as shown, history's grant, older rounds kept)."""
    plan = BuildPlan.builder("p").add("history").add("user").budget(
        available_override=4000).build()
    if share is not None:
        plan = replace(plan, sources=tuple(
            replace(s, options={**s.options, "max_item_share": share})
            if s.source == "history" else s for s in plan.sources))
    request = Request(user_input="Which invoice is the largest?",
                      history=_history_with_a_large_result(6))
    ctx = ContextBuilder(tokenizer="o200k_base").build(plan, request)
    cuts = [d.tokens_after for d in ctx.report.decisions
            if d.source == "history" and d.action == "truncated" and d.tokens_after is not None]
    older = sum(1 for d in ctx.report.decisions if d.source == "history"
                and d.action == "dropped" and d.key.startswith("history.m"))
    assert cuts
    return min(cuts), _row(ctx, "history").budget, 12 - older


def test_history_keeps_its_documented_half_grant_cap_and_max_item_share_sets_it() -> None:
    shown, grant, older_kept = _history_build(None)
    assert shown <= grant // 2
    assert older_kept == 12, "the older rounds fill the rest of the grant"
    wider, grant, _ = _history_build(1.0)
    assert grant // 2 < wider <= grant, "1.0: the item may take the whole grant"

