"""``contextwright eval cases``: the case schema, the metrics, the example file, baselines.

Metrics are checked on hand-made requests built for real (and on hand-made renderings where a
wrong one must not be credited); the CLI on files written in ``tmp_path`` and on the shipped
``examples/cases.jsonl``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.cli_eval import eval_app
from contextwright.errors import DatasetError
from contextwright.evaluate.ablation import ablations
from contextwright.evaluate.case_metrics import Checks, Placement, Wanted, measure, sentences
from contextwright.evaluate.case_results import (
    DEFAULT_TOLERANCES,
    find_regressions,
    read_baseline,
)
from contextwright.evaluate.cases import (
    CaseRun,
    EvalCase,
    build_case,
    load_cases,
    parse_case,
    run_cases,
)
from contextwright.evaluate.records import ExpectedCall
from contextwright.plans import select_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
COUNT = ContextBuilder(tokenizer="o200k_base").tokenizer.count


def case_line(**fields: Any) -> str:
    data = {"id": "c", "request": {"user_input": "Where is order KST418?"}, **fields}
    return json.dumps(data, ensure_ascii=False)


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(line + "\n" for line in lines), "utf-8")
    return path


HISTORY = [
    {"role": "user", "content": "Hello there, I need help with an order of mine.", "id": "h1"},
    {"role": "assistant", "content": "Of course, which order is it?", "id": "h2"},
    {"role": "user", "content": "It is order KST418, placed on 2024-05-01.", "id": "h3"},
    {"role": "assistant", "content": None, "id": "h4", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "track_order", "arguments": '{"order_id": "KST418"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "id": "h5",
     "content": '{"order_id": "KST418", "status": "shipped", "eta": "2024-05-04"}'},
    {"role": "assistant", "content": "KST418 has shipped and arrives on 2024-05-04.", "id": "h6"},
]
TRACK = {"type": "function", "function": {"name": "track_order", "description": "Track it.",
                                          "parameters": {"type": "object", "properties": {
                                              "order_id": {"type": "string"}}}}}


# --- schema ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "expected"), [
    ("{not json", "cases.jsonl:1: not valid JSON"),
    ("[1, 2]", "cases.jsonl:1: a case must be a JSON object"),
    (case_line(extra=1), "cases.jsonl:1: extra: Extra inputs are not permitted"),
    (case_line(budget="900"), "cases.jsonl:1: budget: Input should be a valid integer"),
    (case_line(budget=0), "cases.jsonl:1: budget: Input should be greater than 0"),
    (case_line(must_contain={"facts": [""]}), "cases.jsonl:1: must_contain.facts[0]: String "
                                               "should have at least 1 character"),
    (case_line(must_contain={"fact": ["x"]}), "cases.jsonl:1: must_contain.fact: Extra inputs"),
    (case_line(position={"question_at_tail": "yes"}), "cases.jsonl:1: "
                                                      "position.question_at_tail: Input should "
                                                      "be a valid boolean"),
    (json.dumps({"request": {"user_input": "x"}}), "cases.jsonl:1: id: Field required"),
    (case_line(request={"user_input": "x", "histroy": []}),
     "cases.jsonl:1: request.histroy: Extra inputs are not permitted"),
    (case_line(request={"user_input": "x", "history": [{"role": "tool", "content": "r",
                                                         "tool_call_id": "c"}]}),
     "cases.jsonl:1: request.history[0] is a tool result that follows no assistant tool call"),
    (case_line(must_contain={"messages": ["h9"]}),
     "cases.jsonl:1: must_contain.messages[0]: no message of request.history or request.turn "
     "has id 'h9'"),
    (case_line(noise={"documents": ["d1"]}),
     "cases.jsonl:1: noise.documents[0]: no document of request.documents has id 'd1'"),
    (case_line(must_contain={"tools": ["track_order"]}),
     "cases.jsonl:1: must_contain.tools[0]: no tool of request.tools is named 'track_order'"),
    (case_line(must_contain={"facts": ["KST418"]}, noise={"facts": ["KST418"]}),
     "cases.jsonl:1: noise.facts: 'KST418' is also in must_contain.facts"),
    (case_line(expected_call={"name": "track_order", "arguments": {}}),
     "cases.jsonl:1: expected_call.name: no tool of request.tools is named 'track_order'"),
    (case_line(answer="It has shipped.", request={"user_input": "Where is KST418?",
                                                  "tools": [TRACK]},
               expected_call={"name": "track_order", "arguments": {"order_id": "KST418"}}),
     "cases.jsonl:1: answer, expected_call: a case expects either a reference answer or a "
     "tool call, not both"),
])
def test_a_bad_case_names_its_line_and_field(tmp_path: Path, line: str, expected: str) -> None:
    with pytest.raises(DatasetError) as caught:
        load_cases(write(tmp_path, line))
    assert str(caught.value).startswith(expected)


def test_line_numbers_count_blank_lines_and_ids_must_be_unique(tmp_path: Path) -> None:
    path = write(tmp_path, case_line(id="a"), "", case_line(id="a"))
    with pytest.raises(DatasetError, match=r"^cases.jsonl:3: id: 'a' is also the id of line 1$"):
        load_cases(path)


def test_an_empty_file_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="holds no cases"):
        load_cases(write(tmp_path, "", "  "))
    with pytest.raises(DatasetError, match="cannot read cases file"):
        load_cases(tmp_path / "absent.jsonl")


def test_a_missing_cases_file_is_named_by_its_path(tmp_path: Path) -> None:
    absent = tmp_path / "suite" / "absent.jsonl"
    with pytest.raises(DatasetError, match=f"^cannot read cases file {absent}: "):
        load_cases(absent)


@pytest.mark.parametrize(("plan", "expected"), [
    ("tool_hevy", "error: DatasetError: cases.jsonl:2: plan: 'tool_hevy' is neither a shipped "
                  "plan"),
    ("plans/absent.yaml", "error: DatasetError: cases.jsonl:2: plan: cannot read plan file "
                          "plans/absent.yaml: "),
])
def test_a_case_plan_that_cannot_be_loaded_names_the_file_and_line(tmp_path: Path, plan: str,
                                                                   expected: str) -> None:
    path = write(tmp_path, case_line(id="ok"), case_line(id="bad", plan=plan))
    result = CliRunner().invoke(eval_app, ["cases", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), result.stderr
    if plan == "tool_hevy":
        assert lines[0].endswith("did you mean 'tool_heavy'?")


def test_a_misspelt_plan_for_every_case_is_named_with_the_closest_shipped_one(
        tmp_path: Path) -> None:
    result = CliRunner().invoke(eval_app, ["cases", str(write(tmp_path, case_line())),
                                           "--plan", "tool_hevy"])
    assert result.exit_code == 2
    assert "did you mean 'tool_heavy'?" in result.stderr


def test_bad_input_is_exit_2_with_one_line_naming_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, case_line(id="ok"), case_line(id="bad", budget=-3))
    result = CliRunner().invoke(eval_app, ["cases", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: DatasetError: cases.jsonl:2: budget: Input should be greater than 0"]


# --- metrics -----------------------------------------------------------------------------------


def built(request: Request, checks: Checks, plan: str | None = None,
          budget: int | None = None) -> Any:
    case = EvalCase(id="m", line=1, request=request, checks=checks)
    plan_ = BuildPlan.named(plan) if plan else select_plan(request)
    if budget is not None:
        plan_ = plan_.with_budget(available_override=budget)
    return build_case(ContextBuilder(tokenizer="o200k_base"), case, plan_)


def test_completeness_counts_facts_messages_documents_and_tools_shown() -> None:
    request = Request(user_input="When does KST418 arrive?", system="Be brief.",
                      history=HISTORY, tools=[TRACK],
                      documents=[{"id": "d1", "text": "Deliveries take three days."}])
    checks = Checks(required=Wanted(facts=("2024-05-04", "not in there"), messages=("h3", "h5"),
                                    documents=("d1",), tools=("track_order",)))
    result = built(request, checks).result
    assert result.scores["completeness"] == pytest.approx(5 / 6)
    assert result.missing == ('fact[1] "not in there"',)
    assert result.scores["pair_integrity"] == 1.0


def test_a_message_cut_to_fit_or_left_out_is_not_shown() -> None:
    long = "The delivery address is 12 Harbour Street. " + "Filler words here. " * 400
    history = [{"role": "user", "content": long, "id": "big"},
               {"role": "assistant", "content": "Noted.", "id": "ok"}]
    request = Request(user_input="What is the delivery address?", history=history)
    checks = Checks(required=Wanted(messages=("big", "ok"), facts=("12 Harbour Street",)))
    result = built(request, checks, plan="chat", budget=400).result
    assert "message big" in result.missing  # cut around the keywords: not whole
    assert "message ok" not in result.missing


def test_a_tool_result_counts_in_any_form_but_a_placeholder() -> None:
    turn_call = {"role": "assistant", "content": None, "id": "t1", "tool_calls": [
        {"id": "c9", "type": "function", "function": {"name": "track_order",
                                                      "arguments": '{"order_id": "A1"}'}}]}
    request = Request(user_input="And A1?", history=HISTORY, turn=[turn_call], tools=[TRACK])
    result = built(request, Checks(required=Wanted(messages=("t1", "h5")))).result
    # h5 is shown compacted (JSON as text); t1's result is missing, so a placeholder answers it.
    assert result.missing == ()
    rendered: list[dict[str, Any]] = [
        {"role": "system", "content": "s"}, {"role": "user", "content": "And A1?"},
        {"role": "assistant", "content": None, "tool_calls": turn_call["tool_calls"]},
        {"role": "tool", "tool_call_id": "c9",
         "content": "[no result was recorded for this call]"}]
    placeholder_request = Request(user_input="And A1?", turn=[
        turn_call, {"role": "tool", "tool_call_id": "c9", "content": "ok", "id": "t2"}])
    shown = measure(placeholder_request, Checks(required=Wanted(messages=("t1", "t2"))),
                    rendered, [], COUNT)
    assert shown.missing == ("message t2",)


def test_a_call_is_shown_only_with_its_exact_arguments() -> None:
    call = {"role": "assistant", "content": None, "id": "t1", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}
    request = Request(user_input="q", history=[call, {"role": "tool", "tool_call_id": "c1",
                                                      "content": "r"}])
    other = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}, {"role": "user", "content": "q"}]
    same = [{**other[0], "tool_calls": [{**call["tool_calls"][0],
                                         "function": {"name": "f", "arguments": '{ "a":1 }'}}]},
            *other[1:]]
    checks = Checks(required=Wanted(messages=("t1",)))
    assert measure(request, checks, other, [], COUNT).missing == ("message t1",)
    assert measure(request, checks, same, [], COUNT).missing == ()


def test_density_and_noise_are_token_shares_of_what_is_rendered() -> None:
    request = Request(user_input="What is the code?", system="Answer briefly.",
                      documents=[{"id": "good", "text": "The door code is 4471."},
                                 {"id": "bad", "text": "The canteen serves soup on Fridays."}])
    rendered = [{"role": "system", "content": "Answer briefly."},
                {"role": "assistant", "content": "The door code is 4471."},
                {"role": "assistant", "content": "The canteen serves soup on Fridays."},
                {"role": "user", "content": "What is the code?"}]
    checks = Checks(required=Wanted(documents=("good",)), noise=Wanted(documents=("bad",)))
    result = measure(request, checks, rendered, [], COUNT)
    total = sum(COUNT(m["content"]) + 4 for m in rendered) + 3
    useful = COUNT("Answer briefly.") + COUNT("The door code is 4471.") + COUNT(
        "What is the code?")
    assert result.scores["density"] == pytest.approx(useful / total)
    assert result.scores["noise"] == pytest.approx(COUNT(
        "The canteen serves soup on Fridays.") / total)
    assert result.noise_shown == ("document bad",)


def test_a_text_named_only_for_its_place_is_not_useful() -> None:
    # Asking where a noise message sits made it count as useful too: density rose with noise.
    request = Request(user_input="Where is KST418?", system="Be brief.")
    rendered = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "I ordered KST418 yesterday."},
                {"role": "user", "content": "The weather in Paris is lovely today."},
                {"role": "user", "content": "Where is KST418?"}]
    placed = Checks(placement=Placement(tail=("The weather in Paris is lovely today.",)))
    result = measure(request, placed, rendered, [], COUNT)
    total = sum(COUNT(m["content"]) + 4 for m in rendered) + 3
    assert result.scores["density"] == pytest.approx(
        (COUNT("Be brief.") + COUNT("Where is KST418?")) / total)


def test_noise_counts_the_sentences_of_a_cut_text_and_nothing_twice() -> None:
    text = "The canteen serves soup on Fridays. The gym opens at seven every day."
    request = Request(user_input="q", history=[{"role": "user", "content": text, "id": "n"},
                                               {"role": "assistant", "content": "ok"}])
    rendered = [{"role": "user", "content": "The gym opens at seven every day."},
                {"role": "user", "content": "q"}]
    result = measure(request, Checks(noise=Wanted(messages=("n",), facts=("gym opens",))),
                     rendered, [], COUNT)
    assert result.noise_tokens == COUNT("The gym opens at seven every day.")
    assert sentences(text) == ["The canteen serves soup on Fridays.",
                               "The gym opens at seven every day."]


def test_no_noise_declared_is_not_measured_rather_than_zero() -> None:
    result = measure(Request(user_input="q"), Checks(), [{"role": "user", "content": "q"}], [],
                     COUNT)
    assert result.scores["noise"] is None
    assert result.scores["completeness"] is None and result.scores["position"] is None


def test_position_wants_constraints_at_the_head_and_the_question_at_the_tail() -> None:
    filler = [{"role": "assistant", "content": f"Line number {i} of a long history."}
              for i in range(30)]
    request = Request(user_input="The question?", system="Rule one.")
    good = [{"role": "system", "content": "Rule one."}, *filler,
            {"role": "user", "content": "The question?"}]
    bad = [*filler[:15], {"role": "system", "content": "Rule one."},
           {"role": "user", "content": "The question?"}, *filler[15:]]
    placement = Checks(placement=Placement(head=("Rule one.", "Absent rule."),
                                           question_at_tail=True))
    assert measure(request, placement, good, [], COUNT).scores["position"] == pytest.approx(2 / 3)
    result = measure(request, placement, bad, [], COUNT)
    assert result.scores["position"] == 0.0
    assert result.misplaced[0].startswith("head[0] sits at 0.")
    assert result.misplaced[1] == "head[1] not shown"
    assert result.misplaced[2].startswith("question sits at 0.")


def test_a_repeated_question_counts_its_last_copy_for_the_tail() -> None:
    request = Request(user_input="What is the refund window?", documents=[
        {"id": f"d{i}", "text": f"Paragraph {i} about refunds and returns." * 10}
        for i in range(4)])
    checks = Checks(placement=Placement(question_at_tail=True))
    assert built(request, checks, plan="rag_qa").result.scores["position"] == 1.0
    no_repeat = BuildPlan.named("rag_qa")
    plain = type(no_repeat)(name="x", sources=no_repeat.sources, budget=no_repeat.budget)
    line = case_line(request={"user_input": "What is the refund window?", "documents": [
        {"id": f"d{i}", "text": f"Paragraph {i} about refunds and returns." * 10}
        for i in range(4)]}, position={"question_at_tail": True})
    case = parse_case(line, "t")
    result = build_case(ContextBuilder(tokenizer="o200k_base"), case, plain).result
    assert result.scores["position"] == 0.0


def test_a_build_that_fails_is_a_failed_row_not_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, case_line(request={"user_input": "word " * 3000}, budget=50))
    result = run_cases(load_cases(path))
    assert result.failures == 1
    assert result.cases[0].error is not None and "BudgetError" in result.cases[0].error
    assert all(value is None for value in result.cases[0].scores.values())


# --- the example file --------------------------------------------------------------------------


def test_the_example_file_is_what_its_script_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_cases", EXAMPLES / "make_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (EXAMPLES / "cases.jsonl").read_text("utf-8") == module.render()


def test_the_example_file_runs_and_every_case_gets_what_it_needs() -> None:
    result = CliRunner().invoke(eval_app, ["cases", str(EXAMPLES / "cases.jsonl"), "--json"])
    assert result.exit_code == 0, result.stderr
    output = json.loads(result.stdout)
    assert 8 <= len(output["cases"]) <= 15
    tags = {tag for case in output["cases"] for tag in case["tags"]}
    assert {"tools", "documents", "long history", "constraints", "noise"} <= tags
    for case in output["cases"]:
        assert case["error"] is None, case["id"]
        assert case["scores"]["completeness"] == 1.0, (case["id"], case["missing"])
        assert case["scores"]["pair_integrity"] == 1.0
        assert case["scores"]["budget_use"] <= 1.0
    # The noisy chat keeps every irrelevant round its budget can hold: a noise target missed.
    noisy = next(c for c in output["cases"] if c["id"] == "noisy-chitchat")
    assert noisy["scores"]["noise"] > 0.2
    # The current refund policy replaces the outdated one: no token of the old text is shown.
    refund = next(c for c in output["cases"] if c["id"] == "refund-policy-versions")
    assert not any(item.startswith("fact") for item in refund["noise_shown"])


def _table(text: str) -> list[str]:
    """The lines from a case table's header to its targets line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("case  "))
    end = next(i for i, line in enumerate(lines) if line.startswith("targets (overall)"))
    return lines[start:end + 1]


def test_the_readme_shows_what_the_example_file_gives() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text("utf-8")
    result = CliRunner().invoke(eval_app, ["cases", str(EXAMPLES / "cases.jsonl")])
    assert _table(readme) == _table(result.stdout), (
        "the README's table of examples/cases.jsonl is out of date")


def test_without_the_digest_the_order_id_of_a_long_history_is_lost() -> None:
    cases = load_cases(EXAMPLES / "cases.jsonl")
    order = [c for c in cases if c.id == "order-id-long-history"]
    full = BuildPlan.named("tool_heavy")
    no_digest = next(a for a in ablations([full]) if a.label == "-history.digest").apply(full)
    assert run_cases(order, run=CaseRun(plan=full)).cases[0].missing == ()
    result = run_cases(order, run=CaseRun(plan=no_digest))
    assert result.cases[0].missing == ('fact[0] "LMN-58213"',)


# --- baselines ---------------------------------------------------------------------------------


def test_save_then_compare_passes_and_a_smaller_budget_is_a_regression(tmp_path: Path) -> None:
    runner = CliRunner()
    cases = str(EXAMPLES / "cases.jsonl")
    saved = tmp_path / "results.json"
    first = runner.invoke(eval_app, ["cases", cases, "--save", str(saved)])
    assert first.exit_code == 0, first.stderr
    same = runner.invoke(eval_app, ["cases", cases, "--baseline", str(saved)])
    assert same.exit_code == 0 and "regression" not in same.stderr
    worse = runner.invoke(eval_app, ["cases", cases, "--baseline", str(saved),
                                     "--budget", "300"])
    assert worse.exit_code == 1
    lines = [line for line in worse.stderr.splitlines() if line]
    assert "regression: overall: completeness 1.000 → " in lines[0]
    assert "regression: case agent-loop-turn: completeness 1.000 → 0.000 (tolerance 0)" in lines
    assert worse.stdout.startswith("cases ")  # the table is still printed


def test_tolerances_decide_what_counts_as_a_regression(tmp_path: Path) -> None:
    cases = load_cases(EXAMPLES / "cases.jsonl")
    before = run_cases(cases)
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps(before.to_dict()), "utf-8")
    after = run_cases(cases, run=CaseRun(budget=600))
    regressions = find_regressions(after, read_baseline(saved))
    assert regressions, "a smaller budget must lose something"
    loose = dict.fromkeys(DEFAULT_TOLERANCES, 1.0)
    assert find_regressions(after, read_baseline(saved), loose) == []


def test_a_saved_run_and_its_json_output_both_read_as_baselines(tmp_path: Path) -> None:
    runner = CliRunner()
    path = write(tmp_path, case_line())
    saved = tmp_path / "results.json"
    assert runner.invoke(eval_app, ["cases", str(path), "--save", str(saved)]).exit_code == 0
    printed = runner.invoke(eval_app, ["cases", str(path), "--json"])
    (tmp_path / "printed.json").write_text(printed.stdout, "utf-8")
    for baseline in (saved, tmp_path / "printed.json"):
        again = runner.invoke(eval_app, ["cases", str(path), "--baseline", str(baseline)])
        assert again.exit_code == 0, again.stderr


def test_a_case_that_fails_now_regresses_and_a_bad_baseline_is_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    path = write(tmp_path, case_line(request={"user_input": "word " * 300}))
    saved = tmp_path / "results.json"
    assert runner.invoke(eval_app, ["cases", str(path), "--save", str(saved)]).exit_code == 0
    failing = runner.invoke(eval_app, ["cases", str(path), "--baseline", str(saved),
                                       "--budget", "40"])
    assert failing.exit_code == 1
    assert "regression: case c: the build fails now (it built in the baseline)" in failing.stderr
    saved.write_text('{"format": "other", "overall": {}, "cases": []}', "utf-8")
    bad = runner.invoke(eval_app, ["cases", str(path), "--baseline", str(saved)])
    assert bad.exit_code == 2 and "format" in bad.stderr
    wrong = runner.invoke(eval_app, ["cases", str(path), "--tolerance", "speed=1"])
    assert wrong.exit_code == 2 and "--tolerance 'speed=1'" in wrong.stderr


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["cases"][0]["scores"].update(completeness=float("nan")),
     r"cases\.0 \('c'\)\.scores\.completeness: Input should be a finite number"),
    (lambda d: d["cases"][0]["scores"].update(completeness=2.5),
     r"cases\.0 \('c'\): completeness is 2\.5, outside 0 to 1"),
    (lambda d: d["cases"][0]["scores"].update(completeness="1.0"),
     r"cases\.0 \('c'\)\.scores\.completeness: Input should be a valid number"),
    (lambda d: d["cases"][0]["scores"].update(tokens=-3),
     r"cases\.0 \('c'\): tokens is -3, below 0"),
    (lambda d: d["overall"].update(noise=-0.5), "overall: noise is -0.5, outside 0 to 1"),
    (lambda d: d["cases"].append(d["cases"][0]), r"cases\.1: id 'c' is given twice"),
    (lambda d: d["overall"].update(completnes=d["overall"].pop("completeness")),
     r"overall: unknown metric 'completnes' \(known: completeness, "),
    (lambda d: d["cases"][0]["scores"].update(completnes=d["cases"][0]["scores"].pop(
        "completeness")), r"cases\.0 \('c'\): unknown metric 'completnes'"),
    (lambda d: d["cases"][0].update(scroes=d["cases"][0]["scores"]),
     r"cases\.0 \('c'\)\.scroes: Extra inputs are not permitted"),
    (lambda d: d.update(overal=d["overall"]), "overal: Extra inputs are not permitted"),
], ids=["nan", "above-one", "string", "negative-tokens", "overall", "duplicate-id",
        "misspelt-overall-metric", "misspelt-case-metric", "misspelt-case-key",
        "misspelt-top-key"])
def test_a_baseline_score_that_cannot_be_compared_is_exit_2(
        tmp_path: Path, change: Any, message: str) -> None:
    """NaN never regressed, 2.5 always did, "1.0" was coerced, a repeated id compared only
    one of its rows and a misspelt metric was never compared: each is a broken baseline, not
    one to compare with."""
    runner = CliRunner()
    path = write(tmp_path, case_line())
    saved = tmp_path / "results.json"
    assert runner.invoke(eval_app, ["cases", str(path), "--save", str(saved)]).exit_code == 0
    data = json.loads(saved.read_text("utf-8"))
    change(data)
    saved.write_text(json.dumps(data), "utf-8")  # json writes NaN as the literal NaN
    result = runner.invoke(eval_app, ["cases", str(path), "--baseline", str(saved)])
    assert result.exit_code == 2
    assert re.search(r"bad baseline results\.json: " + message, result.stderr), result.stderr


def test_a_shown_tool_result_is_useful_without_its_fence_lines() -> None:
    call = {"role": "assistant", "content": None, "id": "t1", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    request = Request(user_input="q", turn=[call, {"role": "tool", "tool_call_id": "c1",
                                                   "content": '{"a": 1}', "id": "t2"}])
    body = "Tool result (f): a: 1"
    rendered = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": call["tool_calls"]},
                {"role": "tool", "tool_call_id": "c1",
                 "content": f"<<data 0123456789ab tool f>>\n{body}\n<<end 0123456789ab>>"}]
    result = measure(request, Checks(required=Wanted(messages=("t2",))), rendered, [], COUNT)
    assert result.missing == ()
    assert result.useful_tokens == COUNT("q") + COUNT(body)


def test_a_case_made_in_code_with_both_an_answer_and_a_call_is_refused() -> None:
    request = Request(user_input="Track KST418.", tools=[TRACK])
    with pytest.raises(DatasetError, match="answer, expected_call"):
        EvalCase(id="both", line=3, request=request, checks=Checks(), answer="It arrives Friday.",
                 expected_call=ExpectedCall(name="track_order", arguments={"order_id": "KST418"}))
    assert EvalCase(id="one", line=4, request=request, checks=Checks(),
                    answer="It arrives Friday.").expected is not None


def test_cases_on_standard_input_run_as_the_file_does() -> None:
    path = EXAMPLES / "cases.jsonl"
    from_file = CliRunner().invoke(eval_app, ["cases", str(path), "--json"])
    piped = CliRunner().invoke(eval_app, ["cases", "-", "--json"], input=path.read_bytes())
    assert piped.exit_code == 0, piped.output
    assert json.loads(piped.stdout)["cases"] == json.loads(from_file.stdout)["cases"]
    empty = CliRunner().invoke(eval_app, ["cases", "-"], input=b"\n")
    assert empty.exit_code == 2 and "stdin holds no cases" in empty.stderr


def test_an_error_after_the_progress_bar_is_the_only_line_on_stderr(tmp_path: Path) -> None:
    # The bar is drawn on a terminal only: written to a pipe it left a blank line behind.
    runner = CliRunner()
    path = write(tmp_path, case_line(plan="tool_hevy"))
    misspelt = runner.invoke(eval_app, ["cases", str(path)])
    assert misspelt.exit_code == 2
    assert misspelt.stderr.startswith("error: ") and misspelt.stderr.count("\n") == 1
    good = write(tmp_path, case_line())
    unsaved = runner.invoke(eval_app, ["cases", str(good), "--save",
                                       str(tmp_path / "missing" / "x.json")])
    assert unsaved.exit_code == 2
    assert unsaved.stderr.startswith("error: cannot write ") and unsaved.stderr.count("\n") == 1
