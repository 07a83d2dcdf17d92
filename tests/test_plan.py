"""Plans: immutable, built in code or loaded from YAML / TOML / JSON, bad ones named at load."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from contextwright import BuildPlan, ContextBuilder, Document, PlanError, Request, select_plan
from contextwright.core.plan import SHIPPED_PLANS, SourceSpec

YAML_PLAN = """
name: mine
sources:
  - {source: system, weight: 0.2}
  - {source: history, weight: 0.5, max_tokens: 1500, options: {max_rounds: 3}}
  - {source: user, weight: 0.3}
budget: {window: 16384, reserved_output: 2048}
"""


def test_every_shipped_plan_loads() -> None:
    for name in SHIPPED_PLANS:
        plan = BuildPlan.named(name)
        assert plan.name == name
        assert plan.spec("user") is not None and not plan.spec("user").cuttable  # type: ignore[union-attr]


def test_plans_are_immutable() -> None:
    plan = BuildPlan.named("chat")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.sources[0].weight = 9  # type: ignore[misc]
    bigger = plan.with_budget(window=32768)
    assert bigger.budget.window == 32768 and plan.budget.window == 8192


@pytest.mark.parametrize("suffix", [".yaml", ".toml", ".json"])
def test_plan_files_in_three_formats(tmp_path: Path, suffix: str) -> None:
    import yaml

    data = yaml.safe_load(YAML_PLAN)
    path = tmp_path / f"plan{suffix}"
    if suffix == ".yaml":
        path.write_text(YAML_PLAN)
    elif suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        lines = ['name = "mine"', "[budget]", "window = 16384", "reserved_output = 2048"]
        for spec in data["sources"]:
            lines += ["[[sources]]", f'source = "{spec["source"]}"', f"weight = {spec['weight']}"]
            if "max_tokens" in spec:
                lines += [f"max_tokens = {spec['max_tokens']}", "options = {max_rounds = 3}"]
        path.write_text("\n".join(lines))
    plan = BuildPlan.load(path)
    assert [s.source for s in plan.sources] == ["system", "history", "user"]
    assert plan.spec("history").max_tokens == 1500  # type: ignore[union-attr]
    assert plan.spec("history").options == {"max_rounds": 3}  # type: ignore[union-attr]
    assert plan.budget.available == 16384 * 3 // 4 - 2048


@pytest.mark.parametrize(("text", "field"), [
    ("name: x\nsources: [{source: user, weight: -1}]", "sources.0.weight"),
    ("name: x\nsources: [{source: user, wieght: 1}]", "did you mean 'weight'"),
    ("name: x\nsources: [{source: user}]\nbudget: {windw: 1}", "did you mean 'window'"),
    ("name: x\nsources: [{source: user, weight: '0.3'}]", "sources.0.weight"),
    ("name: x\nsources: [{source: user, weight: true}]", "sources.0.weight"),
    ("name: x\nsources: [{source: user, max_tokens: '100'}]", "sources.0.max_tokens"),
    ("name: x\nsources: [{source: user, strategy: shred}]", "sources.0.strategy"),
    ("name: x\nsources: []", "sources"),
    ("name: x\nsources: [{source: user}]\nbudget: {window: 0}", "budget.window"),
    ("name: x\nsources: [{source: user}, {source: user}]", "source listed twice"),
    ("name: x\nsources: [{source: user, min_tokens: 9, max_tokens: 1}]", "min_tokens"),
    ("name: x\nsources: [{source: user}]\nbudget: {window: 1000, reserved_output: 900}",
     "nothing is left"),
])
def test_bad_plan_fails_at_load_naming_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(PlanError, match=field.replace(".", r"\.")):
        BuildPlan.load(path)


def test_unparseable_and_unknown_plans(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("name: [unclosed")
    with pytest.raises(PlanError, match="not valid yaml"):
        BuildPlan.load(tmp_path / "p.yaml")
    with pytest.raises(PlanError, match="no shipped plan"):
        BuildPlan.named("nope")
    with pytest.raises(PlanError, match="cannot read"):
        BuildPlan.load(tmp_path / "missing.yaml")


def test_fluent_builder_matches_seed_plan() -> None:
    plan = (BuildPlan.builder("seed").add("system", 0.20, 1200).add("tools", 0.15, 800)
            .add("history", 0.30, 1500).add("user", 0.25, 1300).add("tool_results", 0.10, 500)
            .build())
    assert [s.source for s in plan.sources] == ["system", "tools", "history", "user",
                                                "tool_results"]
    assert not plan.spec("system").cuttable and plan.spec("history").cuttable  # type: ignore[union-attr]


def test_a_plan_is_chosen_per_request() -> None:
    assert select_plan(Request(user_input="hi")).name == "simple_qa"
    assert select_plan(Request(user_input="hi", history=[{"role": "user", "content": "a"}])
                       ).name == "chat"
    assert select_plan(Request(user_input="hi", tools=[{"type": "function", "function": {
        "name": "f"}}])).name == "tool_heavy"
    assert select_plan(Request(user_input="hi", documents=[Document(id="d", text="t")])
                       ).name == "rag_qa"


TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "sunny"}


@pytest.mark.parametrize("request_", [
    Request(user_input="q", tools=[TOOL], documents=[Document(id="d", text="t")]),
    Request(user_input="q", turn=[CALL, RESULT], documents=[Document(id="d", text="t")]),
    Request(user_input="q", history=[{"role": "user", "content": "a"}], notes=["n"],
            examples=[{"input": "i", "output": "o"}]),
    Request(user_input="q", documents=[Document(id="d", text="t")], env={"time": "now"},
            examples=[{"input": "i", "output": "o"}]),
])
def test_the_chosen_plan_has_a_source_for_every_part_the_request_gave(
        request_: Request) -> None:
    plan = select_plan(request_)
    ctx = ContextBuilder().build(plan, request_)
    assert not [w for w in ctx.report.warnings if "left out" in w], plan.name
    assert "+" in plan.name  # the added sources are named


def test_tool_calls_in_the_history_choose_the_tool_plan() -> None:
    history = [{"role": "user", "content": "weather?"}, CALL, RESULT,
               {"role": "assistant", "content": "sunny"}]
    assert select_plan(Request(user_input="and tomorrow?", history=history)).name == "tool_heavy"


OVERFLOWING = {"name": "big", "sources": [{"source": "system", "weight": 1e308},
                                          {"source": "history", "weight": 1e308},
                                          {"source": "user"}]}


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("sum.json", json.dumps(OVERFLOWING), "sum to more than a number can hold"),
    ("inf.yaml", "name: x\nsources: [{source: system, weight: .inf}, {source: user}]",
     r"sources\.0\.weight: Input should be a finite number"),
    ("nan.yaml", "name: x\nsources: [{source: user, weight: .nan}]",
     r"sources\.0\.weight: Input should be a finite number"),
    ("inf.toml", 'name = "x"\n[[sources]]\nsource = "user"\nweight = inf\n',
     r"sources\.0\.weight: Input should be a finite number"),
    ("window.json", '{"name": "x", "budget": {"window": 1' + "0" * 400 + '}, '
                    '"sources": [{"source": "user"}]}', r"budget\.window"),
])
def test_numbers_a_build_cannot_compute_with_fail_at_load(tmp_path: Path, name: str, text: str,
                                                          problem: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(PlanError, match=problem):
        BuildPlan.load(path)


def test_a_plan_made_in_code_with_an_infinite_weight_is_a_plan_error_at_build() -> None:
    chat = BuildPlan.named("chat")
    plan = dataclasses.replace(chat, sources=tuple(
        dataclasses.replace(spec, weight=math.inf) if spec.source == "history" else spec
        for spec in chat.sources))
    with pytest.raises(PlanError, match="finite"):
        ContextBuilder().build(plan, Request(user_input="hi", history=[
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]))


@pytest.mark.parametrize(("sources", "named"), [
    ((SourceSpec(source="system"), SourceSpec(source="user"), SourceSpec(source="user")),
     "source listed twice: user"),
    ((SourceSpec(source="system", weight=0), SourceSpec(source="user", weight=0)),
     "sum to zero"),
    ((SourceSpec(source="history", max_tokens=-5), SourceSpec(source="user")),
     "sources.0.max_tokens"),
])
def test_a_plan_made_in_code_is_checked_at_build_as_a_plan_file_is(
        sources: tuple[SourceSpec, ...], named: str) -> None:
    # A source listed twice showed the question twice; zero weights built silently.
    with pytest.raises(PlanError, match=named):
        ContextBuilder().build(BuildPlan(name="x", sources=sources), Request(user_input="hi"))


def test_a_misspelt_shipped_plan_is_named_with_the_closest_one(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="did you mean 'tool_heavy'"):
        BuildPlan.load("tool_hevy")
    with pytest.raises(PlanError, match=r"neither a shipped plan .* nor a plan file"):
        BuildPlan.load(tmp_path / "plan")
    with pytest.raises(PlanError, match=r"BuildPlan\.named\('chat'\)"):
        BuildPlan.load("chat")


def test_a_plan_that_cannot_be_read_is_named_as_given(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PlanError, match=r"cannot read plan file \./plans/absent\.yaml: "):
        BuildPlan.load("./plans/absent.yaml")


def test_a_misspelt_source_is_named_with_the_closest_registered_one() -> None:
    plan = (BuildPlan.builder("typo").add("system").add("histroy").add("user").build())
    with pytest.raises(PlanError, match=r"unregistered sources: histroy \(did you mean "
                                        r"'history'\?\)"):
        ContextBuilder().build(plan, Request(user_input="hi"))


@pytest.mark.parametrize(("options", "message"), [
    ({"partial_rounds": "tool_round"}, "history: option partial_rounds: should be true, false "
                                       "or 'tool_rounds' (did you mean 'tool_rounds'?)"),
    ({"partial_rounds": 2}, "history: option partial_rounds: should be true, false or "
                            "'tool_rounds'"),
])
def test_an_option_of_several_kinds_names_the_values_it_takes(options: dict[str, object],
                                                              message: str) -> None:
    with pytest.raises(PlanError) as caught:
        BuildPlan.builder("p").add("system").add("history", options=options).add("user").build()
    assert str(caught.value) == f"plan builder: {message}"
