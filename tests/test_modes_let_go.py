"""Modes and task zones that let go: a mode ends when its task does, or after a few unsure turns.

With ``when_unsure: keep`` a "thanks" after an order lookup stays in the retrieval mode — but a
poem request thirty turns after a finished structured task must not still be built as that task,
with its goal and a log of every call made since.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright.errors import PlanError
from contextwright.manager import ContextManager
from contextwright.modes import SLIDING_WINDOW, STRUCTURED, ModesConfig, Router
from contextwright.modes.config import modes_from_mapping
from contextwright.modes.zones import (
    MAX_DONE,
    ToolRecord,
    Zones,
    add_tool_calls,
    close_task,
    update_task,
)
from contextwright.session import MemoryStore

PLAN = "先查库存再调用供应商接口更新订单状态"


def _call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": arguments}}]}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _manager(**kwargs: Any) -> ContextManager:
    return ContextManager(store=MemoryStore(), background=False, **kwargs)


def test_an_unsure_message_is_kept_at_most_keep_limit_times_in_a_row() -> None:
    router = Router(modes_from_mapping({"keep_limit": 2}))
    assert router.route("ok", STRUCTURED, kept_turns=0).basis == "kept"
    assert router.route("ok", STRUCTURED, kept_turns=1).mode == STRUCTURED
    released = router.route("ok", STRUCTURED, kept_turns=2)
    assert (released.mode, released.basis, released.trigger) == (
        SLIDING_WINDOW, "released", "turn limit")


def test_a_done_task_lets_its_mode_go_at_once() -> None:
    released = Router().route("写一首诗", STRUCTURED, task_done=True)
    assert (released.mode, released.basis, released.trigger) == (
        SLIDING_WINDOW, "released", "task done")
    # a rule still wins over a done task: a new multi-step request is a new structured task
    assert Router().route(PLAN, STRUCTURED, task_done=True).mode == STRUCTURED


def test_keep_limit_must_not_be_negative() -> None:
    with pytest.raises(PlanError, match="keep_limit"):
        modes_from_mapping({"keep_limit": -1})
    assert ModesConfig.default().keep_limit == 4


def test_structured_mode_ends_when_its_task_is_done() -> None:
    cm = _manager()
    assert cm.prepare("u", "s", PLAN).mode == STRUCTURED
    cm.record("u", "s", assistant=_call("c1", "check_stock"),
              tool_results=[_result("c1", '{"stock": 3}')])
    cm.record("u", "s", assistant=_call("c2", "supplier_api"),
              tool_results=[_result("c2", '{"status": "updated"}')])
    cm.record("u", "s", assistant="库存 3 件，订单状态已更新。")
    assert cm.state("u", "s").zones.task.closed
    poem = cm.prepare("u", "s", "写一首诗")
    assert poem.mode == SLIDING_WINDOW
    switch = cm.state("u", "s").mode_history[-1]
    assert (switch.basis, switch.trigger) == ("released", "task done")
    assert cm.prepare("u", "s", "你好").mode == SLIDING_WINDOW


def test_an_unfinished_structured_task_is_kept_only_a_few_unsure_turns() -> None:
    cm = _manager()
    cm.prepare("u", "s", PLAN)
    cm.record("u", "s", assistant="好的，我先查库存。")
    modes = []
    for text in ("嗯", "今天天气不错", "你好", "讲个笑话", "写一首诗"):
        modes.append(cm.prepare("u", "s", text).mode)
        cm.record("u", "s", assistant="好的。")
    assert modes == [STRUCTURED] * 4 + [SLIDING_WINDOW]


def test_a_task_left_unfinished_goes_into_the_hand_off_not_into_the_next_task() -> None:
    cm = _manager()
    cm.prepare("u", "s", PLAN)
    cm.record("u", "s", assistant=_call("c1", "check_stock"),
              tool_results=[_result("c1", '{"stock": 0}')])
    for text in ("嗯", "今天天气不错", "你好", "讲个笑话", "写一首诗"):
        cm.prepare("u", "s", text)
        cm.record("u", "s", assistant="好的。")
    state = cm.state("u", "s")
    assert state.mode == SLIDING_WINDOW and state.zones.task.goal == ""
    (handoff,) = state.zones.handoffs  # the window was small talk; the task was not
    assert PLAN in handoff and "未完成" in handoff
    back = cm.prepare("u", "s", "Please do this step by step: get the weather in Paris")
    assert back.mode == STRUCTURED
    task = cm.state("u", "s").zones.task
    assert task.goal == "Please do this step by step: get the weather in Paris"
    assert task.done == () and task.next == ()


def test_a_task_done_in_an_earlier_structured_run_does_not_release_another_mode() -> None:
    cm = _manager()
    cm.prepare("u", "s", PLAN)
    cm.record("u", "s", assistant=_call("c1", "check_stock"),
              tool_results=[_result("c1", '{"stock": 3}')])
    cm.record("u", "s", assistant=_call("c2", "supplier_api"),
              tool_results=[_result("c2", '{"status": "updated"}')])
    cm.record("u", "s", assistant="库存 3 件，订单状态已更新。")
    lookup = cm.prepare("u", "s", "Where is my order 20241001?")
    assert lookup.mode not in (STRUCTURED, SLIDING_WINDOW)
    cm.record("u", "s", assistant="It shipped yesterday.")
    assert cm.prepare("u", "s", "thanks").mode == lookup.mode  # kept, not "task done"


def test_a_rule_match_resets_the_count_of_kept_turns() -> None:
    cm = _manager()
    cm.prepare("u", "s", PLAN)
    for _ in range(3):
        cm.prepare("u", "s", "嗯")
    assert cm.state("u", "s").kept_turns == 3
    cm.prepare("u", "s", "First check the stock, then call the supplier API")
    assert cm.state("u", "s").kept_turns == 0


def test_a_new_request_after_a_done_task_starts_a_new_task() -> None:
    zones = update_task(Zones(), "查一下订单 A-1 的物流")
    zones = close_task(add_tool_calls(zones, [ToolRecord(name="track", arguments='{"id":"A-1"}',
                                                          result="ok")], keep=3))
    assert zones.task.closed
    assert update_task(zones, "谢谢") == zones  # thanks is no new task
    fresh = update_task(zones, "帮我订一张去上海的票")
    assert fresh.task.goal == "帮我订一张去上海的票"
    assert fresh.task.done == () and not fresh.task.closed


def test_a_plan_restarts_the_task_with_its_own_steps() -> None:
    zones = update_task(Zones(), "查订单")
    zones = add_tool_calls(zones, [ToolRecord(name="lookup", arguments="{}", result="ok")], 3)
    planned = update_task(zones, PLAN)
    assert planned.task.goal == PLAN and planned.task.done == ()
    assert planned.task.next == ("查库存", "调用供应商接口更新订单状态")


def test_the_task_zone_keeps_current_deduplicated_steps() -> None:
    zones = update_task(Zones(), "盯着订单 A-1 的物流")
    poll = ToolRecord(name="track", arguments='{"id":"A-1"}', result="in transit")
    for _ in range(5):
        zones = add_tool_calls(zones, [poll], keep=3)
    assert zones.task.done == ('track({"id":"A-1"})',)
    for i in range(20):
        zones = add_tool_calls(zones, [ToolRecord(name=f"step{i}", arguments="{}",
                                                  result="ok")], keep=3)
    assert len(zones.task.done) == MAX_DONE
    assert zones.task.done[-1] == "step19"


@pytest.mark.parametrize("keep", [3, 0])
def test_a_polled_call_is_one_step_however_many_calls_the_tools_zone_keeps(keep: int) -> None:
    zones = update_task(Zones(), "First submit the export job, then wait until it finishes, "
                                 "then send me the file")
    zones = add_tool_calls(zones, [ToolRecord(name="submit_export", arguments="{}",
                                              result="job 7")], keep)
    poll = ToolRecord(name="export_status", arguments='{"job":7}', result="running")
    for _ in range(3):
        zones = add_tool_calls(zones, [poll], keep)
        zones = Zones.from_dict(zones.to_dict())  # the state goes through the store
    assert zones.task.next == ("send me the file",)
    assert len(zones.task.done) == 2


def test_an_open_plan_is_not_done_by_an_answer() -> None:
    zones = update_task(Zones(), PLAN)
    zones = add_tool_calls(zones, [ToolRecord(name="check_stock", arguments="{}", result="3")], 3)
    assert not close_task(zones).task.closed  # one planned step is still to do


def test_closed_survives_the_store() -> None:
    zones = close_task(add_tool_calls(update_task(Zones(), "查订单 A-1"), [
        ToolRecord(name="lookup", arguments="{}", result="ok")], 3))
    assert Zones.from_dict(zones.to_dict()) == zones
    assert not Zones.from_dict({"task": {"goal": "x"}}).task.closed  # stored before the flag


@pytest.mark.parametrize(("text", "mode"), [
    ("首先查询库存，然后通知供应商", STRUCTURED),
    ("先提交导出任务，然后等导出完成，最后把文件发给我", STRUCTURED),
    ("先查库存再通知供应商", STRUCTURED),
    ("First check the stock, then notify the supplier", STRUCTURED),
    ("先这样吧，再见", SLIDING_WINDOW),          # a farewell is no second step
    ("我先看看，再说吧", SLIDING_WINDOW),
    ("好的，先不聊了，再联系", SLIDING_WINDOW),
    ("First, thank you so much for the poem!", SLIDING_WINDOW),
    ("I'm learning Python in order to get a job", SLIDING_WINDOW),
    ("Where is my order 20241001?", "rag_enhanced"),
    ("先生，我想问一下退款之后多久到账？", "rag_enhanced"),  # 先生 is no "first"
    ("先前买的那件衣服，之后还能退吗？", SLIDING_WINDOW),
    ("优先发顺丰可以吗？然后多久到？", SLIDING_WINDOW),
    ("我先去吃饭了，之后再说", SLIDING_WINDOW),
    ("先这样吧，再会", SLIDING_WINDOW),
])
def test_the_default_rules_route_plans_not_farewells(text: str, mode: str) -> None:
    assert Router().route(text).mode == mode


def test_overriding_one_field_of_a_shipped_mode_keeps_its_other_fields() -> None:
    config = modes_from_mapping({"modes": {"structured": {"window_size": 5}}})
    structured = config.settings(STRUCTURED)
    assert structured.window_size == 5
    assert structured.zones and structured.plan == "tool_heavy"
    assert structured.output.tone == "professional"


@pytest.mark.parametrize("document", ["modes:\n  structured: {window_size: 3}\n"
                                      "  structured: {window_size: 9}\n",
                                      '{"keep_limit": 2, "keep_limit": 3}'])
def test_a_key_given_twice_in_a_config_file_is_refused(tmp_path: Any, document: str) -> None:
    path = tmp_path / ("modes.json" if document.startswith("{") else "modes.yaml")
    path.write_text(document, encoding="utf-8")
    with pytest.raises(PlanError, match="appears twice"):
        ModesConfig.load(path)


def test_a_rule_pattern_that_matches_an_empty_message_is_refused() -> None:
    with pytest.raises(PlanError, match="matches an empty message"):
        modes_from_mapping({"rules": [{"mode": STRUCTURED, "patterns": ["first.+then|"]}]})


def test_a_long_tool_result_keeps_its_ids_and_dates_whole_in_the_tools_zone() -> None:
    cm = _manager()
    cm.prepare("u", "s", "先查一下订单JD20240501888的物流，然后告诉我预计送达时间")
    result = {"状态": "运输中", "轨迹": "【杭州】快件已到达杭州转运中心，正在发往下一站；" * 10,
              "快递单号": "SF1234567890123", "预计送达": "2024年5月5日"}
    cm.record("u", "s", assistant=_call("c1", "track_order", '{"order_id": "JD20240501888"}'),
              tool_results=[_result("c1", json.dumps(result, ensure_ascii=False))])
    (shown,) = cm.state("u", "s").zones.tools
    assert "SF1234567890123" in shown.result and "2024年5月5日" in shown.result


def test_a_pattern_rule_reports_its_name_as_the_trigger_or_else_its_pattern() -> None:
    named = modes_from_mapping({"rules": [{"mode": STRUCTURED, "patterns": ["先.{1,40}?再"],
                                           "name": "plan"}]})
    assert Router(named).route("先查库存再下单").trigger == "plan"
    unnamed = modes_from_mapping({"rules": [{"mode": STRUCTURED, "patterns": ["先.{1,40}?再"]}]})
    assert Router(unnamed).route("先查库存再下单").trigger == "先.{1,40}?再"
    assert Router().route("先查库存再下单").trigger == "plan (先…再 / first…then)"
