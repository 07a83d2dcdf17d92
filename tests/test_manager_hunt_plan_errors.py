"""A mode's plan that cannot be loaded: the error names the modes config and the mode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextwright.errors import PlanError
from contextwright.manager import ContextManager
from contextwright.modes.config import modes_from_mapping


def _modes_file(folder: Path, plan: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "modes.yaml"
    path.write_text(f"modes:\n  billing: {{plan: {plan!r}}}\n"
                    f"rules: [{{mode: billing, keywords: [invoice]}}]\n", "utf-8")
    return path


def test_a_misspelt_plan_names_the_modes_file_and_the_mode(tmp_path: Path) -> None:
    path = _modes_file(tmp_path / "conf", "simpel_qa")
    with pytest.raises(PlanError) as caught:
        ContextManager(modes=path)
    message = str(caught.value)
    assert message.startswith(f"modes config {path}: modes.billing.plan: 'simpel_qa' is "
                              f"neither a shipped plan")
    assert "did you mean 'simple_qa'?" in message


def test_a_missing_plan_file_names_the_modes_file_and_the_mode(tmp_path: Path) -> None:
    path = _modes_file(tmp_path / "conf", str(tmp_path / "x.yaml"))
    with pytest.raises(PlanError) as caught:
        ContextManager(modes=path)
    assert str(caught.value).startswith(f"modes config {path}: modes.billing.plan: cannot read "
                                        f"plan file {tmp_path / 'x.yaml'}")


def test_a_malformed_plan_file_names_the_modes_file_and_the_mode(tmp_path: Path) -> None:
    path = _modes_file(tmp_path, str(tmp_path / "plan.yaml"))
    (tmp_path / "plan.yaml").write_text("name: p\nsources: [{source: system, weight: -1}]\n",
                                        "utf-8")
    with pytest.raises(PlanError, match=r"^modes config .*modes\.yaml: modes\.billing\.plan: "
                                        r"plan file plan\.yaml: "):
        ContextManager(modes=path)


def test_a_relative_modes_file_path_is_named_whole(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The message says which file, wherever the process runs: its folder, not just its name.
    path = _modes_file(tmp_path / "conf", "simpel_qa")
    monkeypatch.chdir(tmp_path)
    where = re.escape(f"modes config {path}: modes.billing.plan: ")
    with pytest.raises(PlanError, match=f"^{where}"):
        ContextManager(modes="conf/modes.yaml")


def test_a_plan_mistake_in_a_config_built_in_code_names_the_mode() -> None:
    config = modes_from_mapping({"modes": {"billing": {"plan": "simpel_qa"}}})
    with pytest.raises(PlanError, match=r"^modes config: modes\.billing\.plan: 'simpel_qa' is "
                                        r"neither a shipped plan .*did you mean 'simple_qa'"):
        ContextManager(modes=config)


def test_a_plan_mistake_given_in_plans_names_the_mode() -> None:
    with pytest.raises(PlanError, match=r"^plans\['sliding_window'\]: 'chatt' is neither a "
                                        r"shipped plan .*did you mean 'chat'"):
        ContextManager(plans={"sliding_window": "chatt"})


def test_a_placeholder_plan_overridden_in_code_is_never_read(tmp_path: Path) -> None:
    # Guard: the plan is checked where it is used; a mode whose plan ``plans=`` replaces may
    # name one that only exists on another machine.
    path = _modes_file(tmp_path, "to be given in code")
    cm = ContextManager(modes=path, plans={"billing": "simple_qa"}, background=False)
    assert cm.prepare("u", "s", "my invoice please").report.plan.startswith("simple_qa")
