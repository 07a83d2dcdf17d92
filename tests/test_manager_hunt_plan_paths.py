"""Relative plan paths in a modes file start from that file's folder, not the working
directory; in a config built in code, or in ``plans=``, they start from the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextwright.core import plan as core_plan
from contextwright.errors import PlanError
from contextwright.manager import ContextManager
from contextwright.modes import ModesConfig
from contextwright.modes.config import modes_from_mapping

PLAN = """\
name: billing_plan
budget: {window: 8000, reserved_output: 1000}
sources:
  - {source: system, weight: 0.2}
  - {source: history, weight: 0.5}
  - {source: user, weight: 0.3}
"""


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that is not the modes file's folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def _modes_file(folder: Path, plan: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "modes.yaml"
    path.write_text(f"modes:\n  billing: {{plan: {plan!r}}}\n"
                    f"rules: [{{mode: billing, keywords: [invoice]}}]\n", "utf-8")
    return path


def _billing_plan(cm: ContextManager) -> str:
    """The plan the billing mode built a call with."""
    return cm.prepare("u", "s", "my invoice please").report.plan


def test_a_relative_plan_path_in_a_modes_file_starts_from_its_folder(
        tmp_path: Path, elsewhere: Path) -> None:
    conf = tmp_path / "conf"
    (conf / "plans").mkdir(parents=True)
    (conf / "plans" / "billing.yaml").write_text(PLAN, "utf-8")
    path = _modes_file(conf, "plans/billing.yaml")
    assert _billing_plan(ContextManager(modes=path)).startswith("billing_plan")


def test_a_modes_file_given_by_a_relative_path_keeps_its_folder(
        tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (elsewhere / "conf").mkdir()
    (elsewhere / "conf" / "billing.yaml").write_text(PLAN, "utf-8")
    _modes_file(elsewhere / "conf", "./billing.yaml")
    config = ModesConfig.load("conf/modes.yaml")
    monkeypatch.chdir(tmp_path)  # a later change of directory changes nothing
    assert _billing_plan(ContextManager(modes=config)).startswith("billing_plan")


def test_a_missing_relative_plan_file_names_the_path_as_written_and_where_it_was_looked_for(
        tmp_path: Path, elsewhere: Path) -> None:
    path = _modes_file(tmp_path / "conf", "./x.yaml")
    with pytest.raises(PlanError) as caught:
        ContextManager(modes=path)
    message = str(caught.value)
    assert message.startswith(f"modes config {path}: modes.billing.plan: cannot read plan file "
                              f"./x.yaml ")
    assert str(tmp_path / "conf" / "x.yaml") in message
    assert str(elsewhere) not in message


def test_a_plan_in_the_working_directory_is_not_read_for_a_modes_file(
        tmp_path: Path, elsewhere: Path) -> None:
    # The file is where paths used to start from (the working directory), not next to the
    # modes file: it must not be picked up.
    (elsewhere / "billing.yaml").write_text(PLAN, "utf-8")
    path = _modes_file(tmp_path / "conf", "billing.yaml")
    with pytest.raises(PlanError, match=r"cannot read plan file billing\.yaml"):
        ContextManager(modes=path)


def test_a_misspelt_plan_name_in_a_modes_file_is_not_called_a_path(tmp_path: Path) -> None:
    path = _modes_file(tmp_path / "conf", "simpel_qa")
    with pytest.raises(PlanError) as caught:
        ContextManager(modes=path)
    message = str(caught.value)
    assert "'simpel_qa' is neither a shipped plan" in message
    assert str(tmp_path / "conf" / "simpel_qa") not in message


def test_an_absolute_plan_path_in_a_modes_file_is_read_as_written(
        tmp_path: Path, elsewhere: Path) -> None:
    (tmp_path / "billing.yaml").write_text(PLAN, "utf-8")
    path = _modes_file(tmp_path / "conf", str(tmp_path / "billing.yaml"))
    assert _billing_plan(ContextManager(modes=path)).startswith("billing_plan")


def test_a_relative_plan_path_in_a_config_built_in_code_starts_from_the_working_directory(
        elsewhere: Path) -> None:
    (elsewhere / "billing.yaml").write_text(PLAN, "utf-8")
    config = modes_from_mapping({"modes": {"billing": {"plan": "billing.yaml"}},
                                 "rules": [{"mode": "billing", "keywords": ["invoice"]}]})
    assert _billing_plan(ContextManager(modes=config)).startswith("billing_plan")


def test_a_relative_plan_path_given_in_plans_starts_from_the_working_directory(
        tmp_path: Path, elsewhere: Path) -> None:
    (elsewhere / "billing.yaml").write_text(PLAN, "utf-8")
    path = _modes_file(tmp_path / "conf", "simple_qa")
    cm = ContextManager(modes=path, plans={"billing": "billing.yaml"})
    assert _billing_plan(cm).startswith("billing_plan")


def test_the_plan_file_suffixes_are_those_plans_are_read_from() -> None:
    from contextwright.manager.plans import PLAN_FILE_SUFFIXES

    assert set(PLAN_FILE_SUFFIXES) == set(core_plan._FORMATS)
