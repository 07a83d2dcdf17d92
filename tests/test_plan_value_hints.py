"""A plan's misspelt ``strategy`` is named with the closest; a number read as text says how to
write it.

Field names already were (``max_token`` → ``max_tokens``); a misspelt value of a field with a
few choices was only told the list, and ``weight: 1e-1`` only that it "should be a valid number".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextwright.core.plan import BuildPlan, plan_from_mapping
from contextwright.errors import PlanError


@pytest.mark.parametrize(("given", "meant"), [
    ("trunc", "truncate"), ("keyword-window", "keyword_window"), ("dorp", "drop")])
def test_a_misspelt_strategy_names_the_closest(tmp_path: Path, given: str, meant: str) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"name: p\nsources:\n  - {{source: user, strategy: {given}}}\n",
                    encoding="utf-8")
    with pytest.raises(PlanError, match=rf"sources\.0\.strategy: .*did you mean '{meant}'\?"):
        BuildPlan.load(plan)


@pytest.mark.parametrize("given", ["zzz", 5, None])
def test_a_strategy_close_to_none_lists_the_choices_only(given: object) -> None:
    with pytest.raises(PlanError) as raised:
        plan_from_mapping({"name": "p", "sources": [{"source": "user", "strategy": given}]})
    assert "did you mean" not in str(raised.value)
    assert "sources.0.strategy" in str(raised.value)


def test_the_plan_builder_names_it_too() -> None:
    with pytest.raises(PlanError, match="did you mean 'head'"):
        BuildPlan.builder("p").add("user", strategy="haed").build()


@pytest.mark.parametrize(("line", "field", "written"), [
    ("  - {source: user, weight: 1e-1}", "sources.0.weight", "write 0.1"),
    ("  - {source: user, max_tokens: 1e3}", "sources.0.max_tokens", "write 1000"),
    ("  - {source: user, weight: 2.5e2}", "sources.0.weight", "write 250.0"),
])
def test_a_number_yaml_reads_as_text_is_named_with_how_to_write_it(
        tmp_path: Path, line: str, field: str, written: str) -> None:
    """PyYAML reads ``1e-1`` (an exponent without a dot and a sign) as the string "1e-1": the
    error said only "should be a valid number", about what looks like one."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"name: p\nsources:\n{line}\n", encoding="utf-8")
    with pytest.raises(PlanError) as raised:
        BuildPlan.load(plan)
    message = str(raised.value)
    assert f"{field}: " in message and "YAML reads" in message and written in message


def test_a_quoted_number_is_named_as_text(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text('name: p\nbudget: {window: "8192"}\nsources:\n  - {source: user}\n',
                    encoding="utf-8")
    with pytest.raises(PlanError, match=r"budget\.window: .*'8192' is text, not a number: "
                                        r"write 8192 without quotes"):
        BuildPlan.load(plan)


@pytest.mark.parametrize("value", ['"lots"', '"nan"', "true", "[1]"])
def test_text_that_is_no_number_gets_no_such_hint(tmp_path: Path, value: str) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"name: p\nsources:\n  - {{source: user, weight: {value}}}\n",
                    encoding="utf-8")
    with pytest.raises(PlanError) as raised:
        BuildPlan.load(plan)
    assert "is text" not in str(raised.value) and "YAML reads" not in str(raised.value)
