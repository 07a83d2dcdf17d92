"""The sessions demo: a customer-service bot through ``ContextManager``, offline.

One user's conversation moves from small talk to an order lookup to a multi-step task; each
message is routed to a mode, every switch hands the old window over to the facts zone, and the
structured mode's zones appear labelled in the prompt. A second user with the same session id
sees none of it. The clock is fixed, so the output is the same on every run (it is snapshotted).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from contextwright.manager import ContextManager, PreparedContext
from contextwright.session.memory import MemoryStore

FIXED_TIME = 1_732_838_400.0  # 2024-11-29T00:00:00Z
SYSTEM = "你是某电商平台的客服助手。只根据上下文回答，不确定时先查询。"
TOOLS = [
    {"type": "function", "function": {
        "name": "query_order", "description": "查询订单状态和物流信息",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}},
    {"type": "function", "function": {
        "name": "check_stock", "description": "查询商品库存",
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}}}},
    {"type": "function", "function": {
        "name": "update_order", "description": "调用供应商接口更新订单状态",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"},
                                                        "status": {"type": "string"}}}}},
]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}


def _result(call_id: str, name: str, content: dict[str, Any]) -> dict[str, Any]:
    return {"tool_call_id": call_id, "name": name,
            "content": json.dumps(content, ensure_ascii=False)}


def _show(step: str, ctx: PreparedContext, echo: Callable[[str], None]) -> None:
    echo(f"\n── {step} " + "─" * max(4, 56 - len(step)))
    route = ctx.route
    if route is not None:
        echo(f"route: mode={route.mode} basis={route.basis} trigger={route.trigger!r}")
    if ctx.switch is not None:
        echo(f"MODE_SWITCH: {ctx.switch.old_mode} -> {ctx.switch.new_mode} "
             f"(trigger {ctx.switch.trigger!r})")
    echo(ctx.report.format_debug())


def run_sessions_demo(echo: Callable[[str], None] = print) -> list[PreparedContext]:
    """Run the conversation, printing each routing decision and the final prompt."""
    cm = ContextManager(system=SYSTEM, background=False, store=MemoryStore(),
                        clock=lambda: FIXED_TIME)
    echo("contextwright sessions demo — seed 003: one customer, three context modes")
    contexts = []
    ctx = cm.prepare("U001", "S001", "你好，我叫王小明，收货地址是北京市朝阳区建国路88号。")
    _show("1 small talk", ctx, echo)
    cm.record("U001", "S001", assistant="王先生您好，请问有什么可以帮您？")
    contexts.append(ctx)

    ctx = cm.prepare("U001", "S001", "帮我查一下订单号 20241001 的物流状态", tools=TOOLS)
    _show("2 order lookup", ctx, echo)
    cm.record("U001", "S001", assistant=_call("call_1", "query_order", {"order_id": "20241001"}),
              tool_results=[_result("call_1", "query_order", {
                  "order_id": "20241001", "status": "已发货", "carrier": "顺丰",
                  "tracking": "SF1234567890", "eta": "2024-11-30"})])
    cm.record("U001", "S001", assistant="订单 20241001 已由顺丰发出，运单号 SF1234567890，"
                                        "预计 11 月 30 日送达。")
    contexts.append(ctx)

    ctx = cm.prepare("U001", "S001", "先查库存再调用供应商接口更新订单状态", tools=TOOLS)
    _show("3 multi-step task", ctx, echo)
    cm.record("U001", "S001", assistant=_call("call_2", "check_stock", {"sku": "A-100"}),
              tool_results=[_result("call_2", "check_stock", {"sku": "A-100", "stock": 15})])
    ctx = cm.prepare("U001", "S001", tools=TOOLS)
    _show("3b same turn, after the stock check", ctx, echo)
    messages = ctx.to_messages("openai")
    echo("system message the model gets (the stable prefix the provider caches):")
    echo(messages[0]["content"])
    echo("\nthe session's zones, after the stable part (labelled; conversation data fenced):")
    for message in messages[1:]:
        content = str(message["content"] or "")
        if "[事实区]" in content or "[输出区]" in content:
            echo(f"({message['role']}) {content}")
    contexts.append(ctx)

    state = cm.state("U001", "S001")
    echo("\nmode history: " + " → ".join(
        f"{s.new_mode} (#{s.at_seq} {s.basis} {s.trigger!r})" for s in state.mode_history))
    other = cm.prepare("U002", "S001", "我的订单呢？")
    leaked = "20241001" in json.dumps(other.to_messages("openai"), ensure_ascii=False)
    echo(f"another user with the same session id sees U001's order: {leaked}")
    contexts.append(other)
    return contexts
