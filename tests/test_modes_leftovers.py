"""Modes: config file mistakes named in the file's words, the session part's label, the task
zone's cut lines and corrected values."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from contextwright.errors import PlanError
from contextwright.manager import ContextManager
from contextwright.modes import ModesConfig, ToolRecord, Zones
from contextwright.modes.zones import add_tool_calls, cut_result, render_zone, update_task

FAMILY = "👨\u200d👩\u200d👧\u200d👦"
PLAN_ZH = "先查5月7日北京到上海的高铁，再订一家外滩附近的酒店"


def _load(tmp_path: Path, text: str, name: str = "modes.yaml") -> ModesConfig:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return ModesConfig.load(path)


# --- a misspelt shipped mode -------------------------------------------------------------

@pytest.mark.parametrize(("text", "meant"), [
    ("modes: {structurd: {window_size: 5}}", "structured"),
    ("modes: {sliding_windw: {window_size: 4}}", "sliding_window"),
    ("modes: {rag_enhance: {top_k: 4}}", "rag_enhanced"),
])
def test_a_misspelt_shipped_mode_is_named_with_the_closest_one(tmp_path: Path, text: str,
                                                               meant: str) -> None:
    with pytest.raises(PlanError, match=rf"unknown mode .*did you mean '{meant}'") as caught:
        _load(tmp_path, text)
    assert "Field required" not in str(caught.value)
    assert "a new mode needs a plan" in str(caught.value)


def test_a_new_mode_without_a_plan_is_told_it_needs_one(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="unknown mode 'billing'") as caught:
        _load(tmp_path, "modes: {billing: {window_size: 4}}")
    message = str(caught.value)
    assert "shipped modes: sliding_window, rag_enhanced, structured" in message
    assert "a new mode needs a plan" in message


def test_a_mode_that_gives_its_plan_is_a_custom_mode_even_near_a_shipped_name(
        tmp_path: Path) -> None:
    # Guard: a name that says all a mode needs is taken as meant.
    config = _load(tmp_path, "modes: {structured2: {plan: tool_heavy, window_size: 2}}")
    assert config.settings("structured2").window_size == 2
    assert config.settings("structured").window_size == 3


# --- wrong-shape and empty files -------------------------------------------------------

@pytest.mark.parametrize(("text", "kind"), [
    ("- chat\n", "a list"), ("[]", "a list"), ("42", "a number"), ("just words", "a string"),
])
def test_a_modes_file_that_is_no_mapping_says_what_it_is(tmp_path: Path, text: str,
                                                         kind: str) -> None:
    with pytest.raises(PlanError, match=f"modes.yaml: a modes config is a mapping .*not {kind}"
                       ) as caught:
        _load(tmp_path, text)
    assert "_ConfigModel" not in str(caught.value)


@pytest.mark.parametrize(("text", "where", "kind"), [
    ("modes: [a]", "modes", "a list"),
    ("modes:", "modes", "empty"),
    ("modes: {structured: [1]}", "modes.structured", "a list"),
    ("modes: {structured: {output: 3}}", "modes.structured.output", "a number"),
    ("rules: ['structured']", "rules.0", "a string"),
])
def test_a_section_of_the_wrong_shape_is_named_without_our_classes(
        tmp_path: Path, text: str, where: str, kind: str) -> None:
    with pytest.raises(PlanError) as caught:
        _load(tmp_path, text)
    assert str(caught.value) == f"modes.yaml: {where}: must be a mapping, not {kind}"


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_an_empty_modes_file_is_refused_not_read_as_the_defaults(tmp_path: Path,
                                                                 text: str) -> None:
    with pytest.raises(PlanError, match=r"modes config modes.yaml is empty: .*\{\}"):
        _load(tmp_path, text)


def test_an_empty_mapping_keeps_every_default(tmp_path: Path) -> None:
    # Guard: ``{}`` says "no changes" on purpose.
    config = _load(tmp_path, "{}", name="modes.json")
    assert config.settings("structured").zones


def test_context_manager_names_the_file_not_our_classes(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    path.write_text("- chat\n", "utf-8")
    with pytest.raises(PlanError) as caught:
        ContextManager(modes=path)
    assert str(caught.value).startswith("modes.yaml: ")
    assert "Model" not in str(caught.value)


# --- the session part's label -------------------------------------------------------------

def _separators(user_text: str) -> list[str]:
    manager = ContextManager(background=False)
    try:
        context = manager.prepare("u", "s", user_text)
        return [line for line in context.to_text().splitlines() if line.startswith("===")]
    finally:
        manager.close()


def test_the_session_part_is_headed_in_chinese_in_a_chinese_build() -> None:
    separators = _separators(PLAN_ZH)
    assert "=== 会话 ===" in separators
    assert "=== session ===" not in separators
    assert "=== 系统 ===" in separators


def test_the_session_part_is_headed_like_the_others_in_english() -> None:
    separators = _separators("First look up order 12345, then cancel it")
    assert "=== Session ===" in separators
    assert "=== session ===" not in separators


# --- the task zone's goal, cut -------------------------------------------------------------

def _goal(text: str) -> str:
    return update_task(Zones(), text).task.goal


def test_a_long_goal_is_not_cut_inside_a_grapheme_cluster() -> None:
    pad = ("先帮我查一下订单的物流状态，再把收货地址改成新的地址。" * 16)[:195]
    goal = _goal(pad + FAMILY + " 订单号 ORD-2024-000123，谢谢！")
    assert goal.endswith("…")
    assert len(goal) <= 200
    assert "\u200d" not in goal  # the whole family or none of it


def test_a_long_goal_is_not_cut_inside_a_conjunct() -> None:
    goal = _goal("कृपया मेरा ऑर्डर देखें और फिर पता बदलें: " + "क्ष" * 120)
    assert goal.endswith("…")
    assert unicodedata.name(goal[-2]) != "DEVANAGARI SIGN VIRAMA"


def test_a_long_goal_is_not_cut_inside_an_id() -> None:
    pad = ("先帮我查一下订单的物流状态，再把收货地址改成新的地址。" * 8)[:186]
    goal = _goal(pad + "订单号 ORD-2024-000123 谢谢")
    assert goal.endswith("…")
    assert "ORD-2024-" not in goal  # left out whole: the facts zone lists it


def test_a_goal_that_opens_with_a_long_id_keeps_it_whole() -> None:
    link = "https://example.com/orders/" + "a1b2c3d4" * 24
    goal = _goal(f"{link} 先看看这个订单，再告诉我什么时候到")
    assert goal == f"{link}…"


def test_a_cut_tool_result_keeps_its_ids_whole() -> None:
    result = cut_result("status: shipped; " * 16 + "tracking no. 1Z999AA10123456784 via UPS")
    assert result.endswith("…")
    assert len(result) <= 300
    assert "1Z999" not in result  # it would end past the limit: left out whole


# --- the task zone and corrections ---------------------------------------------------------

def test_the_goal_and_steps_mark_a_corrected_value_like_the_facts_zone() -> None:
    manager = ContextManager(background=False)
    try:
        manager.prepare("u", "s", PLAN_ZH)
        context = manager.prepare("u", "s", "不对，日期改成5月8日")
        zones = manager.state("u", "s").zones
    finally:
        manager.close()
    assert zones.task.goal == PLAN_ZH  # the user's words are kept as said
    marked = "5月7日（已失效，更正为 5月8日）"
    lines = context.to_text().splitlines()
    assert f"目标: 先查{marked}北京到上海的高铁，再订一家外滩附近的酒店" in lines
    assert f"待执行: 查{marked}北京到上海的高铁" in lines
    assert f"- {marked}" in lines  # as the facts zone shows it


def test_steps_done_and_to_do_mark_the_value_they_name() -> None:
    request = "First search trains on May 7, then check seats on May 7, then book a hotel"
    zones = update_task(Zones(facts=("May 7", "May 8"), superseded=(("May 7", "May 8"),)),
                        request)
    zones = add_tool_calls(zones, [ToolRecord(name="search_trains", arguments="{}",
                                              result="…")], keep=3)
    text = render_zone("task", zones, "en")
    marked = "May 7 (no longer valid: corrected to May 8)"
    assert f"Goal: First search trains on {marked}, then check seats on {marked}, then" in text
    assert f"Done: search trains on {marked} (search_trains)" in text
    assert f"Next: check seats on {marked}" in text
    assert "May 8 (no longer valid" not in text


def test_a_task_without_corrections_renders_as_said() -> None:
    zones = update_task(Zones(facts=("May 7",)), "First search trains on May 7, then book a hotel")
    assert "no longer valid" not in render_zone("task", zones, "en")


def test_a_corrected_value_is_found_when_written_full_width() -> None:
    zones = update_task(Zones(superseded=(("¥1,200", "¥1,500"),)),
                        "先把预算 ￥1,200 记下，再订酒店")
    text = render_zone("task", zones, "zh")
    assert "目标: 先把预算 ￥1,200（已失效，更正为 ¥1,500） 记下，再订酒店" in text
    assert "待执行: 把预算 ￥1,200（已失效，更正为 ¥1,500） 记下" in text
