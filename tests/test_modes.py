"""Mode config, router and zones without a store."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from contextwright.errors import PlanError
from contextwright.modes import (
    RAG_ENHANCED,
    SLIDING_WINDOW,
    STRUCTURED,
    Classification,
    ModesConfig,
    Router,
    ToolRecord,
    Zones,
)
from contextwright.modes.zones import (
    MAX_FACTS,
    MAX_FACTS_PER_MESSAGE,
    add_facts,
    add_handoff,
    add_tool_calls,
    close_task,
    plan_steps,
    render_zone,
    update_task,
)


def test_default_config_has_seed_003_values() -> None:
    config = ModesConfig.default()
    window = config.settings(SLIDING_WINDOW)
    rag = config.settings(RAG_ENHANCED)
    structured = config.settings(STRUCTURED)
    assert (window.window_size, window.summary_threshold_ratio) == (6, 0.6)
    assert (rag.chunk_size, rag.top_k, rag.rerank_top_k, rag.similarity_threshold) == (
        200, 8, 3, 0.35)
    assert structured.zones and structured.tool_zone_keep == 3
    assert config.default_mode == SLIDING_WINDOW


@pytest.mark.parametrize(("text", "mode"), [
    ("你好，我想咨询一下退款政策", RAG_ENHANCED),
    ("帮我查一下订单号 20241001 的物流状态", RAG_ENHANCED),
    ("先查库存再调用供应商接口更新订单状态", STRUCTURED),
    ("Can you look up my order?", RAG_ENHANCED),
    ("First check the stock, then call the supplier API", STRUCTURED),
    ("今天天气不错", SLIDING_WINDOW),
])
def test_router_sends_seed_examples_to_the_right_mode(text: str, mode: str) -> None:
    assert Router().route(text).mode == mode


def test_router_rule_reports_its_trigger() -> None:
    decision = Router().route("帮我查一下物流")
    assert decision.basis == "rule"
    assert decision.trigger == "帮我查"


def test_english_keywords_match_whole_words_only() -> None:
    assert Router().route("the border was closed").mode == SLIDING_WINDOW


def test_unsure_keeps_current_mode_by_default_and_can_fall_back_to_default() -> None:
    assert Router().route("好的，谢谢", RAG_ENHANCED).basis == "kept"
    assert Router().route("好的，谢谢", RAG_ENHANCED).mode == RAG_ENHANCED
    config = ModesConfig.default()
    fallback = ModesConfig(modes=config.modes, rules=config.rules, when_unsure="default")
    decision = Router(fallback).route("好的，谢谢", RAG_ENHANCED)
    assert (decision.mode, decision.basis) == (SLIDING_WINDOW, "default")


class _Classifier:
    name = "centroid"

    def __init__(self, mode: str, confidence: float) -> None:
        self.answer = Classification(mode=mode, confidence=confidence)

    def classify(self, text: str) -> Classification | None:
        return self.answer


def test_classifier_decides_after_rules_when_confident() -> None:
    router = Router(classifier=_Classifier(STRUCTURED, 0.9))
    assert router.route("random chat").mode == STRUCTURED
    assert router.route("random chat").basis == "classifier"
    assert router.route("帮我查订单").mode == RAG_ENHANCED  # rules first


def test_unconfident_classifier_is_ignored() -> None:
    router = Router(classifier=_Classifier(STRUCTURED, 0.2))
    assert router.route("random chat").mode == SLIDING_WINDOW


def test_classifier_naming_an_unknown_mode_is_an_error() -> None:
    with pytest.raises(PlanError, match="unknown mode"):
        Router(classifier=_Classifier("nope", 0.9)).route("random chat")


def test_config_file_overrides_and_adds_a_custom_mode(tmp_path: Path) -> None:
    path = tmp_path / "modes.json"
    path.write_text(json.dumps({
        "modes": {"sliding_window": {"plan": "chat", "window_size": 4},
                  "billing": {"plan": "simple_qa", "instruction": "Answer billing questions."}},
        "rules": [{"mode": "billing", "keywords": ["发票", "invoice"]}],
    }), "utf-8")
    config = ModesConfig.load(path)
    assert config.settings(SLIDING_WINDOW).window_size == 4
    assert config.settings(RAG_ENHANCED).top_k == 8  # untouched modes keep the defaults
    assert Router(config).route("我要开发票").mode == "billing"


@pytest.mark.parametrize(("data", "match"), [
    ({"modes": {"x": {"plan": "chat", "window_size": -1}}}, "window_size"),
    ({"rules": [{"mode": "ghost", "keywords": ["a"]}]}, "unknown mode"),
    ({"default_mode": "ghost"}, "default_mode"),
    ({"rules": [{"mode": "structured"}]}, "neither keywords nor patterns"),
    ({"surprise": 1}, "surprise"),
    ({"default_mod": "structured"}, "did you mean 'default_mode'"),
    ({"modes": {"x": {"plan": "chat", "window_siz": 4}}}, "did you mean 'window_size'"),
    ({"modes": {"x": {"plan": "chat", "recall": {"shar": 0.5}}}}, "did you mean 'share'"),
    ({"rules": [{"mode": "structured", "keyword": ["a"]}]}, "did you mean 'keywords'"),
    ({"rules": [{"mode": "structurd", "keywords": ["a"]}]}, "did you mean 'structured'"),
    ({"modes": {"x": {"plan": "chat", "top_k": "3"}}}, "top_k: Input should be a valid integer"),
    ({"keep_limit": "4"}, "keep_limit"),
])
def test_bad_config_gets_a_plan_error_naming_the_problem(tmp_path: Path, data: object,
                                                          match: str) -> None:
    path = tmp_path / "modes.yaml"
    path.write_text(json.dumps(data), "utf-8")
    with pytest.raises(PlanError, match=match):
        ModesConfig.load(path)


def test_facts_zone_is_write_once() -> None:
    zones = add_facts(Zones(), ["订单号 A-20241001"])
    again = add_facts(zones, ["订单号 A-20241001", "地址 北京市朝阳区"])
    assert again.facts == ("订单号 A-20241001", "地址 北京市朝阳区")
    assert add_facts(again, []).facts[0] == "订单号 A-20241001"


def test_facts_zone_is_bounded() -> None:
    zones = Zones()
    for message in range(MAX_FACTS // MAX_FACTS_PER_MESSAGE + 2):
        zones = add_facts(zones, [f"fact {message}.{i}" for i in range(MAX_FACTS_PER_MESSAGE)])
    assert len(zones.facts) == MAX_FACTS


def test_one_message_adds_at_most_its_first_few_facts() -> None:
    pasted = [f"ORD-{100000 + i}" for i in range(250)]
    zones = add_facts(Zones(), pasted)
    assert zones.facts == tuple(pasted[:MAX_FACTS_PER_MESSAGE])
    assert "jane@example.com" in add_facts(zones, ["jane@example.com"]).facts


def test_tools_zone_keeps_last_three_and_handoff_clears_it() -> None:
    records = [ToolRecord(name=f"t{i}", arguments="{}", result=str(i)) for i in range(5)]
    zones = add_tool_calls(Zones(), records, keep=3)
    assert [t.name for t in zones.tools] == ["t2", "t3", "t4"]
    cleared = add_handoff(zones, "原始需求: 查物流")
    assert cleared.tools == ()
    assert cleared.handoffs == ("原始需求: 查物流",)


def test_plan_steps_splits_multi_step_requests() -> None:
    assert plan_steps("先查库存再调用供应商接口更新订单状态") == [
        "查库存", "调用供应商接口更新订单状态"]
    assert plan_steps("First check the stock, then call the supplier") == [
        "check the stock", "call the supplier"]
    assert plan_steps("好的再见") == []
    assert plan_steps("hello there") == []


@pytest.mark.parametrize(("text", "steps"), [
    ("Could you first check stock for SKU-77 and then update order A-1001?",
     ["check stock for SKU-77", "update order A-1001"]),
    ("Check stock first, then update order A-1", ["Check stock", "update order A-1"]),
    ("Look up my order and then cancel it", ["Look up my order", "cancel it"]),
    ("我想先查库存，然后退款", ["查库存", "退款"]),
])
def test_only_what_follows_a_plan_opener_is_a_step(text: str, steps: list[str]) -> None:
    assert plan_steps(text) == steps


@pytest.mark.parametrize("text", ["What should I do next?", "OK then!", "我先走了", "王先生您好"])
def test_a_step_word_alone_plans_nothing(text: str) -> None:
    assert plan_steps(text) == []


def test_a_message_that_plans_nothing_keeps_the_current_steps() -> None:
    zones = update_task(Zones(), "First check stock for SKU-77, then update order A-1001")
    zones = add_tool_calls(zones, [ToolRecord(name="check_stock", arguments="{}",
                                              result="5")], keep=3)
    for text in ("What should I do next?", "OK then!", "我先走了"):
        assert update_task(zones, text) == zones


def test_a_polite_plan_closes_once_its_steps_ran() -> None:
    zones = update_task(Zones(), "Could you first check stock for SKU-77 and then update "
                                 "order A-1001?")
    zones = add_tool_calls(zones, [ToolRecord(name="check_stock", arguments="{}", result="5"),
                                   ToolRecord(name="update_order", arguments="{}",
                                              result="ok")], keep=3)
    assert zones.task.done == ("check stock for SKU-77 (check_stock)",
                               "update order A-1001 (update_order)")
    assert zones.task.next == ()
    assert close_task(zones).task.closed


def test_task_zone_tracks_goal_done_and_next_steps() -> None:
    zones = update_task(Zones(), "先查库存再调用供应商接口更新订单状态")
    assert zones.task.goal.startswith("先查库存")
    zones = add_tool_calls(zones, [ToolRecord(name="check_stock", arguments="{}",
                                              result="stock: 15")], keep=3)
    assert zones.task.done == ("查库存 (check_stock)",)
    assert zones.task.next == ("调用供应商接口更新订单状态",)


def test_a_call_made_again_with_the_same_arguments_does_not_take_the_next_step() -> None:
    # A retry of the stock check is the same step: the supplier was never called.
    zones = update_task(Zones(), "First check the stock then call the supplier API")
    check = ToolRecord(name="check_stock", arguments='{"sku":"A1"}', result="none", call_id="c1")
    zones = add_tool_calls(zones, [check], keep=3)
    zones = add_tool_calls(zones, [replace(check, call_id="c2")], keep=3)
    assert zones.task.done == ("check the stock (check_stock)",)
    assert zones.task.next == ("call the supplier API",)
    assert not close_task(zones).task.closed  # an answer now leaves the task open
    # Other arguments for the same tool are still that step (a stock check for another SKU
    # calls no supplier); another tool takes the next step, in the same batch as well.
    zones = add_tool_calls(zones, [replace(check, arguments='{"sku":"B2"}', call_id="c3")],
                           keep=3)
    assert zones.task.next == ("call the supplier API",)
    supplier = ToolRecord(name="call_supplier", arguments="{}", result="ok", call_id="c5")
    zones = add_tool_calls(zones, [replace(check, arguments='{"sku":"C3"}', call_id="c4"),
                                   supplier], keep=3)
    assert zones.task.next == ()


def test_zones_render_with_labels_in_the_session_language() -> None:
    zones = add_facts(update_task(Zones(), "先查库存再更新订单"), ["A-20241001"])
    assert render_zone("facts", zones, "zh").startswith("[事实区]\n- A-20241001")
    assert render_zone("task", zones, "en").startswith("[Task]\nGoal: ")
    assert render_zone("tools", zones, "en") == ""


def test_zones_round_trip_through_json() -> None:
    zones = add_tool_calls(add_facts(update_task(Zones(), "first a, then b"), ["x1"]),
                           [ToolRecord(name="a", arguments="{}", result="ok")], keep=3)
    assert Zones.from_dict(json.loads(json.dumps(zones.to_dict()))) == zones
