"""Modes: config file mistakes named in the file's words, the session part's label."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextwright.errors import PlanError
from contextwright.manager import ContextManager
from contextwright.modes import ModesConfig

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
