"""A mode that lets go after its task is done hands the task's goal over as the need."""

from __future__ import annotations

import json
from typing import Any

from contextwright import ContextManager


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def test_a_done_task_hands_over_its_goal_not_a_question_asked_on_the_side() -> None:
    cm = ContextManager(background=False)
    goal = "先查订单20241001的物流，再帮我申请退款"
    cm.prepare("u", "s", goal)
    cm.record("u", "s", assistant=call("get_logistics", {"order_id": "20241001"}, "c1"),
              tool_results=[{"role": "tool", "tool_call_id": "c1", "content": "运输中"}])
    cm.record("u", "s", assistant="订单20241001正在运输中。要现在申请退款吗？")
    for text, answer in (("退款政策是什么？", "7天无理由退款。"), ("好的", "好的。")):
        cm.prepare("u", "s", text)
        cm.record("u", "s", assistant=answer)
    cm.prepare("u", "s", "那就退款吧")
    cm.record("u", "s", assistant=call("refund", {"order_id": "20241001"}, "c2"),
              tool_results=[{"role": "tool", "tool_call_id": "c2", "content": "退款成功"}])
    cm.prepare("u", "s")
    cm.record("u", "s", assistant="已为您申请退款。")
    assert cm.state("u", "s").zones.task.closed
    released = cm.prepare("u", "s", "谢谢")
    assert released.mode != "structured"
    handoffs = cm.state("u", "s").zones.handoffs
    assert handoffs and handoffs[-1].startswith(f"原始需求: {goal}")
    assert "未完成" not in handoffs[-1]  # every step ran: nothing is left open
