"""A plan whose source names an overflow ``strategy`` it does not have is named with the closest.

Field names already were (``max_token`` → ``max_tokens``); a misspelt value of a field with a
few choices was only told the list.
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
