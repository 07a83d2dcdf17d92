"""Task and tools zones on inputs near their rules' edges."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright.errors import CorruptRecordError
from contextwright.manager import ContextManager
from contextwright.modes import SLIDING_WINDOW
from contextwright.modes.zones import (
    PENDING_RESULT,
    Task,
    ToolRecord,
    Zones,
    add_tool_calls,
    fill_tool_results,
    plan_steps,
    render_zone,
    update_task,
)
from contextwright.session.state import SessionState

LINE = 200
"""The longest goal or step line (``zones.GOAL_CHARS``)."""


def _call(name: str, arguments: dict[str, Any], call_id: str = "call_0") -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}


def test_a_step_naming_a_two_character_chinese_argument_is_the_next_step() -> None:
    # "再查上海天气" names the city of the next weather call: that call does the next step,
    # and once the answer tells what was asked the task is done and the mode lets go.
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "先查北京天气，再查上海天气，然后查广州天气，最后告诉我哪里最暖和")
    for index, city in enumerate(("北京", "上海", "广州")):
        manager.record("u", "s", assistant=_call("weather", {"city": city}, f"c{index}"),
                       tool_results=[{"role": "tool", "tool_call_id": f"c{index}",
                                      "content": f"{city} 20度"}])
        manager.prepare("u", "s")
    task = manager.state("u", "s").zones.task
    assert task.done == ("查北京天气 (weather)", "查上海天气 (weather)", "查广州天气 (weather)")
    assert task.next == ("告诉我哪里最暖和",)
    manager.record("u", "s", assistant="广州最暖和。")
    assert manager.state("u", "s").zones.task.closed
    assert manager.prepare("u", "s", "写一首关于春天的诗").mode == SLIDING_WINDOW


def test_a_short_latin_value_still_names_no_step() -> None:
    # "en" is in many a step: a second call with it is still the step just done.
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "First translate the menu, then send it to the chef")
    manager.record("u", "s", assistant=_call("translate", {"lang": "de"}, "c1"),
                   tool_results=[{"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    manager.prepare("u", "s")
    manager.record("u", "s", assistant=_call("translate", {"lang": "en"}, "c2"),
                   tool_results=[{"role": "tool", "tool_call_id": "c2", "content": "ok"}])
    assert manager.state("u", "s").zones.task.next == ("send it to the chef",)


def test_a_step_followed_by_a_paste_is_one_short_line() -> None:
    # The paste is in the conversation; the task zone names the step, it does not copy it.
    paste = "line of code with stuff; " * 2000
    zones = update_task(Zones(), "First check the logs below, then fix the bug in this file:\n"
                        + paste)
    assert zones.task.next[0] == "check the logs below"
    assert zones.task.next[1].startswith("fix the bug in this file: line of code")
    assert all(len(step) <= LINE and "\n" not in step for step in zones.task.next)
    assert len(render_zone("task", zones, "en")) < 3 * LINE + 50
    chinese = update_task(Zones(), "先检查下面的日志，再修复这个文件里的错误：\n"
                          + "代码行内容" * 3000)
    assert all(len(step) <= LINE for step in chinese.task.next)


@pytest.mark.parametrize(("text", "steps"), [
    ("First of all, check the stock, then email the supplier",
     ["check the stock", "email the supplier"]),
    ("First off, check stock. Then email me the count", ["check stock", "email me the count"]),
    ("First of all, thanks! Then can you check my order 12345?", []),
    ("首先谢谢你！然后帮我查一下订单12345", []),
    ("First, check the stock. Then, email the supplier.", ["check the stock",
                                                          "email the supplier"]),
])
def test_a_plan_opened_by_first_of_all_and_thanks_between_steps(text: str,
                                                                 steps: list[str]) -> None:
    # "of all" and a thanks are no steps: the first tool call must not "do" them.
    assert plan_steps(text) == steps


@pytest.mark.parametrize(("text", "steps"), [
    ("1. First check the stock\n2. Then email the supplier\n3. Finally update order 20241001",
     ["check the stock", "email the supplier", "update order 20241001"]),
    ("1) 先查库存\n2) 然后发邮件\n3) 最后更新订单", ["查库存", "发邮件", "更新订单"]),
    ("- first check stock\n- then email supplier", ["check stock", "email supplier"]),
    ("Step 1: first check stock. Step 2: then email", ["check stock", "email"]),
    ("第一步先查库存；第二步再发邮件", ["查库存", "发邮件"]),
    # Values that end a step stay: only a list's own marker goes.
    ("first buy 2\nthen sell 3", ["buy 2", "sell 3"]),
    ("first update to 1.2. Then restart", ["update to 1.2", "restart"]),
    ("first buy from Dept. B. then go", ["buy from Dept. B", "go"]),
])
def test_a_numbered_or_bulleted_plan_has_no_list_marks_in_its_steps(text: str,
                                                                    steps: list[str]) -> None:
    assert plan_steps(text) == steps


def _tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}]}


def _tool_result(call_id: str, text: str, *, error: bool = False) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                         "content": text, **({"is_error": True} if error else {})}]}


def test_a_failed_call_does_no_step_and_its_retry_does() -> None:
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "First look up order 20241001, then refund it")
    order = {"order_id": "20241001"}
    manager.record("u", "s", assistant=_tool_use("t1", "get_order", order),
                   tool_results=[_tool_result("t1", "timeout", error=True)])
    task = manager.state("u", "s").zones.task
    assert (task.done, task.next) == ((), ("look up order 20241001", "refund it"))
    manager.prepare("u", "s")
    manager.record("u", "s", assistant=_tool_use("t2", "get_order", order),
                   tool_results=[_tool_result("t2", "shipped")])
    assert manager.state("u", "s").zones.task.next == ("refund it",)
    manager.prepare("u", "s")
    manager.record("u", "s", assistant=_tool_use("t3", "refund", order),
                   tool_results=[_tool_result("t3", "refund window closed", error=True)])
    manager.prepare("u", "s")
    manager.record("u", "s", assistant="Sorry, the refund failed: the window is closed.")
    task = manager.state("u", "s").zones.task
    # The refund did not happen: the zone does not say it did, and the task is not over.
    assert (task.done, task.next, task.closed) == (("look up order 20241001 (get_order)",),
                                                   ("refund it",), False)


@pytest.mark.parametrize("zones", [
    {"task": {"last_call": ["get_order"]}},
    {"facts": "20241001"},
    {"handoffs": "Earlier: …"},
    {"task": {"done": "look up order"}},
    {"task": {"next": [1, 2]}},
])
def test_a_zones_document_of_another_shape_reads_as_malformed(zones: dict[str, Any]) -> None:
    # A text where a list belongs had been read letter by letter (a facts zone of digits), and a
    # short call pair had raised IndexError.
    with pytest.raises(CorruptRecordError):
        SessionState.from_dict({"zones": zones})


def test_a_call_whose_failure_is_recorded_later_undoes_its_step_and_its_retry_does_it() -> None:
    # An agent records the call, runs the tool, then records its result: the step was marked
    # done when the call was recorded, and a failure that came later left it done, so the
    # zone told the model an order was looked up that never was.
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "First look up order 20241001, then refund it")
    order = {"order_id": "20241001"}
    manager.record("u", "s", assistant=_tool_use("t1", "get_order", order))
    assert manager.state("u", "s").zones.task.next == ("refund it",)
    manager.record("u", "s", tool_results=[_tool_result("t1", "timeout", error=True)])
    task = manager.state("u", "s").zones.task
    assert (task.done, task.next) == ((), ("look up order 20241001", "refund it"))
    manager.prepare("u", "s")
    manager.record("u", "s", assistant=_tool_use("t2", "get_order", order))
    manager.record("u", "s", tool_results=[_tool_result("t2", "shipped")])
    task = manager.state("u", "s").zones.task
    assert (task.done, task.next) == (("look up order 20241001 (get_order)",), ("refund it",))


def test_a_later_failure_without_a_plan_takes_only_its_call_off_the_done_steps() -> None:
    # Two calls in one message, both pending; the first one's result reports a failure.
    zones = Zones(task=Task(goal="Cancel order 20241001 and tell the customer"))
    calls = [ToolRecord(name="cancel_order", arguments='{"order_id":"20241001"}',
                        result=PENDING_RESULT, call_id="t1"),
             ToolRecord(name="notify", arguments='{"order_id":"20241001"}',
                        result=PENDING_RESULT, call_id="t2")]
    zones = add_tool_calls(zones, calls, keep=8)
    assert len(zones.task.done) == 2
    zones = fill_tool_results(zones, {"t1": "(tool error) refused", "t2": "sent"},
                              lambda _name, text: text)
    assert zones.task.done == ('notify({"order_id":"20241001"})',)
    assert [record.step for record in zones.tools] == ["", ""]


def test_a_repeated_call_failing_later_leaves_the_earlier_calls_step() -> None:
    zones = Zones(task=Task(goal="Ping the host"))
    ping = ToolRecord(name="ping", arguments="{}", result="pong", call_id="t1")
    zones = add_tool_calls(zones, [ping], keep=8)
    again = ToolRecord(name="ping", arguments="{}", result=PENDING_RESULT, call_id="t2")
    zones = add_tool_calls(zones, [again], keep=8)
    zones = fill_tool_results(zones, {"t2": "(tool error) timeout"}, lambda _name, text: text)
    assert zones.task.done == ("ping",)


def test_a_zones_document_of_an_older_version_reads_and_keeps_its_steps() -> None:
    # Records stored before calls noted the step they did read as having done none.
    state = SessionState.from_dict({"zones": {
        "tools": [{"name": "get_order", "arguments": "{}", "result": "(pending)",
                   "call_id": "t1"}],
        "task": {"goal": "g", "done": ["look up"], "next": ["refund"]}}})
    assert state.zones.tools[0].step == ""
    assert state.zones.task.done == ("look up",)
