"""An item cut more than once is one truncated item: one decision, counted once."""

from __future__ import annotations

import json
from collections import Counter

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.observe import snapshot_of
from contextwright.observe.metrics import cut_counts

TOOLS = [
    {"type": "function", "function": {
        "name": "track_order", "description": "查询物流状态 / track an order",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}},
    {"type": "function", "function": {
        "name": "search_kb", "description": "Search the knowledge base",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
    {"type": "function", "function": {
        "name": "refund", "description": "Issue a refund",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string"}, "amount": {"type": "number"}}}}}]
DOCUMENTS = [
    {"id": "refund-policy", "score": 0.9,
     "text": "退款政策：取消的订单将在 3-5 个工作日内退回原支付方式。"
     "Refunds go back to the original card within 5 business days. " * 20},
    {"id": "shipping", "score": 0.7,
     "text": "Shipping: orders ship within 24h. 我们使用顺丰和京东物流。 " * 30}]


def _agent_history(rounds: int) -> list[dict[str, object]]:
    history: list[dict[str, object]] = []
    for i in range(rounds):
        chinese = i % 2 == 0
        history.append({"role": "user", "id": f"u{i}", "content": (
            f"请帮我查一下订单 KST{400 + i} 的物流，另外我的邮箱是 alice{i}@example.com" if chinese
            else f"Where is order KST{400 + i}? My API key is sk-live-{i:04d}ABCDEF and card "
            f"4111-1111-1111-{1000 + i}")})
        history.append({"role": "assistant", "content": None, "id": f"a{i}", "tool_calls": [{
            "id": f"call_{i}", "type": "function", "function": {
                "name": "track_order", "arguments": json.dumps({"order_id": f"KST{400 + i}"})}}]})
        result = {"code": 200, "status": "ok", "data": {
            "order": f"KST{400 + i}", "state": "已发货" if chinese else "in transit",
            "events": [f"event {k}: 包裹已到达上海分拨中心 parcel scanned at hub {k}"
                       for k in range(12)]}}
        history.append({"role": "tool", "tool_call_id": f"call_{i}", "id": f"t{i}",
                        "content": json.dumps(result, ensure_ascii=False)})
        history.append({"role": "assistant", "id": f"r{i}", "content": (
            f"订单 KST{400 + i} 已发货，预计 10-0{i % 9 + 1} 到达。" if chinese
            else f"Order KST{400 + i} is in transit, ETA Oct {i % 28 + 1}.")})
    return history


def _request() -> Request:
    turn = [{"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_now", "type": "function",
                "function": {"name": "search_kb", "arguments": json.dumps({"q": "refund"})}}]},
            {"role": "tool", "tool_call_id": "call_now", "content": "KB: refund in 5 days"}]
    return Request(user_input="我要退款，订单 KST429", system="You are 客服助手.",
                   history=_agent_history(30), turn=turn, tools=TOOLS, documents=DOCUMENTS)


PLAN = BuildPlan.named("tool_heavy").with_budget(available_override=2500)


def test_an_item_cut_twice_is_one_truncated_decision_from_offered_to_sent_size() -> None:
    ctx = ContextBuilder(tokenizer="o200k_base").build(PLAN, _request())
    cuts = [d for d in ctx.report.decisions if d.action == "truncated"]
    assert cuts, "the build cuts nothing: the case no longer tests a cut"
    per_item = Counter((d.source, d.key) for d in cuts)
    assert max(per_item.values()) == 1, per_item
    for row in ctx.report.sources:
        assert row.truncated == sum(1 for source, _ in per_item if source == row.source)
    history_cut = next(d for d in cuts if d.key == "history.m114")
    assert history_cut.tokens_before > history_cut.tokens_after


def test_metrics_count_an_item_cut_twice_once() -> None:
    snapshot = snapshot_of(PLAN, _request(), tokenizer="o200k_base")
    keys = {(str(d["source"]), str(d["key"])) for d in snapshot.decisions
            if d["action"] == "truncated"}
    truncated, _ = cut_counts(snapshot)
    assert sum(truncated.values()) == len(keys)
    doubled = snapshot.to_dict()  # as a record written before cuts were merged holds them
    doubled["decisions"] += [d for d in doubled["decisions"] if d["action"] == "truncated"]
    assert cut_counts(type(snapshot).from_dict(doubled))[0] == truncated
