"""Edge cases of ``eval cases``: text in other scripts, baselines, and the files it reads."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright import ContextBuilder, Request
from contextwright.cli_eval import eval_app
from contextwright.core.plan import plan_from_mapping
from contextwright.errors import DatasetError
from contextwright.evaluate._files import read_jsonl
from contextwright.evaluate.ablation import ablations
from contextwright.evaluate.case_metrics import Checks, Wanted, measure, sentences
from contextwright.evaluate.cases import load_cases

COUNT = ContextBuilder(tokenizer="o200k_base").tokenizer.count


# --- noise in scripts that write no space after a sentence -----------------------------------


def test_sentences_split_chinese_and_japanese_text_without_spaces() -> None:
    text = "上海今天的天气是多云，气温二十五度左右。明天上海会下大雨，请大家记得带伞出门！"
    assert sentences(text) == ["上海今天的天气是多云，气温二十五度左右。",
                               "明天上海会下大雨，请大家记得带伞出门！"]
    assert sentences("The gym opens at seven every day.Then it shuts.") == [
        "The gym opens at seven every day.Then it shuts."]  # "e.g.x" stays whole in Latin text


def test_noise_counts_a_shown_sentence_of_a_cut_chinese_message() -> None:
    shown = "明天上海会下大雨，请大家记得带伞出门！"
    text = "上海今天的天气是多云，气温二十五度左右。" + shown
    request = Request(user_input="q", history=[{"role": "user", "content": text, "id": "n"},
                                               {"role": "assistant", "content": "ok"}])
    rendered = [{"role": "user", "content": shown}, {"role": "user", "content": "q"}]
    result = measure(request, Checks(noise=Wanted(messages=("n",))), rendered, [], COUNT)
    assert result.noise_tokens == COUNT(shown)
    assert result.noise_shown == ("message n",)


# --- baselines: checks added to or dropped from a case ---------------------------------------


def write_cases(path: Path, *cases: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases),
                    "utf-8")
    return path


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(eval_app, ["cases", *args])


ORDER = {"id": "order", "request": {"user_input": "Where is order KST418?"},
         "must_contain": {"facts": ["KST418"]}}
GREETING = {"id": "greeting", "request": {"user_input": "Hello there, who are you?"}}


def test_a_check_added_to_a_case_is_no_overall_regression(tmp_path: Path) -> None:
    cases, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    write_cases(cases, ORDER, GREETING)
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    # The greeting now checks a fact its context lacks: the case measures completeness for the
    # first time, which is new, as a new case would be, and changes no case the baseline measured.
    write_cases(cases, ORDER, {**GREETING, "must_contain": {"facts": ["nowhere to be found"]}})
    result = run_cli(str(cases), "--baseline", str(saved))
    assert "regression" not in result.stderr
    assert result.exit_code == 0, result.stderr


def test_a_check_dropped_from_a_case_hides_no_overall_regression(tmp_path: Path) -> None:
    cases, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    missing = {**GREETING, "must_contain": {"facts": ["nowhere to be found"]}}
    write_cases(cases, ORDER, missing)
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    # The order case's context loses its fact (its request no longer holds it) and the greeting
    # drops its check: the mean over the cases measuring completeness in both runs (the order
    # case) fell from 1 to 0.
    lost = {**ORDER, "request": {"user_input": "Where is my order?"}}
    write_cases(cases, lost, GREETING)
    result = run_cli(str(cases), "--baseline", str(saved), "--tolerance", "completeness=0")
    assert "regression: overall: completeness 1.000 → 0.000" in result.stderr


# --- dataset files -----------------------------------------------------------------------------


def test_a_json_lines_row_holding_a_unicode_line_separator_is_one_row(tmp_path: Path) -> None:
    # json.dumps(..., ensure_ascii=False) writes U+2028, U+2029 and U+0085 as they are: JSON
    # allows them inside strings, so they end no line of a JSON Lines file.
    rows = [{"text": "first\u2028line"}, {"text": "para\u2029graph\x85end"}, {"n": 3}]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\r\n",
                    encoding="utf-8")
    assert read_jsonl(path) == rows


# --- eval ablate cases: builds that fail -----------------------------------------------------

TIGHT = {"id": "tight", "budget": 20,
         "request": {"system": "You are the support assistant of Lumen Outfitters. Never share "
                               "a customer's full card number. Answer in three sentences.",
                     "user_input": "Where is order KST418?"},
         "must_contain": {"facts": ["KST418"]}}


def test_ablate_names_the_builds_that_failed_and_a_failing_full_plan_exits_1(
        tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", ORDER, TIGHT)
    result = CliRunner().invoke(eval_app, ["ablate", "cases", str(cases)])
    # The tight case's never-cut system prompt exceeds its budget: its full plan cannot be built,
    # and the table's full-plan row is the mean of the other case alone, so it must say so.
    assert "full plan @ per case: 1 of 2 builds failed (first: tight: build failed: " \
           "BudgetError" in result.stdout
    assert result.exit_code == 1
    as_json = CliRunner().invoke(eval_app, ["ablate", "cases", str(cases), "--json"])
    full = json.loads(as_json.stdout)["rows"][0]
    assert full["failures"] == 1 and full["failure"].startswith("tight: build failed: ")
    assert as_json.exit_code == 1


def test_ablate_of_cases_that_all_build_exits_0_and_names_no_failure(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", ORDER)
    result = CliRunner().invoke(eval_app, ["ablate", "cases", str(cases)])
    assert result.exit_code == 0, result.output
    assert "failed" not in result.stdout


# --- cases naming a message id that two messages have -----------------------------------------


def test_a_named_message_id_that_two_messages_have_is_refused(tmp_path: Path) -> None:
    # History numbered from 1 and this turn numbered from 1 again: "1" would be counted shown
    # when either message is, so a lost message could pass unnoticed.
    case = {"id": "twice", "request": {
        "user_input": "Where is it?",
        "history": [{"role": "user", "content": "Order KST418 please.", "id": "1"},
                    {"role": "assistant", "content": "Noted.", "id": "2"}],
        "turn": [{"role": "assistant", "content": "Let me look.", "id": "1"}]},
        "must_contain": {"messages": ["1"]}}
    path = write_cases(tmp_path / "cases.jsonl", case)
    with pytest.raises(DatasetError, match=r"cases.jsonl:1: must_contain.messages\[0\]: 2 "
                       r"messages of request.history and request.turn have id '1'"):
        load_cases(path)
    unnamed = {**case, "must_contain": {"messages": ["2"]}}
    assert load_cases(write_cases(tmp_path / "ok.jsonl", unnamed))[0].id == "twice"


# --- baselines made another way ----------------------------------------------------------------


def test_a_baseline_with_another_budget_or_tokenizer_is_said_to_differ(tmp_path: Path) -> None:
    cases, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    write_cases(cases, ORDER, GREETING)
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    same = run_cli(str(cases), "--baseline", str(saved))
    assert same.exit_code == 0 and "note" not in same.stderr
    smaller = run_cli(str(cases), "--baseline", str(saved), "--budget", "900")
    assert ("note: 2 case(s) built with another plan or budget than in the baseline (order: "
            "simple_qa at 5,120 → simple_qa at 900; greeting: ") in smaller.stderr
    data = json.loads(saved.read_text("utf-8"))
    data["tokenizer"] = "cl100k_base"
    saved.write_text(json.dumps(data), "utf-8")
    other = run_cli(str(cases), "--baseline", str(saved))
    assert ("note: the baseline was measured with tokenizer cl100k_base and this run with "
            "o200k_base") in other.stderr


# --- files saved with a byte order mark ------------------------------------------------------


def test_a_cases_file_and_a_baseline_saved_with_a_byte_order_mark_are_read(
        tmp_path: Path) -> None:
    # Windows PowerShell 5 (Out-File -Encoding utf8) and Notepad save UTF-8 with a BOM.
    cases, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    cases.write_bytes(("\ufeff" + json.dumps(ORDER) + "\r\n").encode("utf-8"))
    assert [case.id for case in load_cases(cases)] == ["order"]
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    saved.write_bytes("\ufeff".encode() + saved.read_bytes())
    result = run_cli(str(cases), "--baseline", str(saved))
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("user_input", ["", "   "])
def test_question_at_tail_without_a_question_is_refused(tmp_path: Path, user_input: str) -> None:
    # An empty input is never found (the check always fails), spaces alone are found anywhere
    # (it always passes): either way the check says nothing, as a blank position text would.
    case = {"id": "blank", "request": {"user_input": user_input},
            "position": {"question_at_tail": True}}
    with pytest.raises(DatasetError, match=r"cases.jsonl:1: position.question_at_tail: "
                       r"request.user_input is empty or white space alone"):
        load_cases(write_cases(tmp_path / "cases.jsonl", case))


# --- text the build adds: fence markers --------------------------------------------------------


def test_a_fact_found_only_inside_a_fence_marker_is_not_shown() -> None:
    # The marker is 12 hex digits of a hash: a short number such as a temperature is inside one
    # by chance, where it tells the model nothing.
    request = Request(user_input="Weather in Shanghai?")
    body = "Tool result (get_weather): city: Shanghai, weather: cloudy"
    head, end = "<<data 25ab25cd2500 tool get_weather>>", "<<end 25ab25cd2500>>"
    rendered = [{"role": "user", "content": "Weather in Shanghai?"},
                {"role": "tool", "tool_call_id": "c1", "content": f"{head}\n{body}\n{end}"}]
    result = measure(request, Checks(required=Wanted(facts=("25", "cloudy", "get_weather")),
                                     noise=Wanted(facts=("ab25",))),
                     rendered, [], COUNT)
    assert result.missing == ('fact[0] "25"',)
    assert result.noise_shown == ()
    shown = [{"role": "user", "content": "Weather in Shanghai?"},
             {"role": "tool", "tool_call_id": "c1",
              "content": f"{head}\n{body}, temp: 25\n{end}"}]
    assert measure(request, Checks(required=Wanted(facts=("25",))), shown, [],
                   COUNT).missing == ()


# --- long cases --------------------------------------------------------------------------------


def test_measuring_a_long_history_that_names_every_message_is_not_quadratic() -> None:
    rounds = 12000
    history = []
    for i in range(rounds):
        history += [{"role": "user", "content": f"Chit chat number {i} about the weather.",
                     "id": f"u{i}"},
                    {"role": "assistant", "content": f"Nice, reply number {i}.", "id": f"a{i}"}]
    request = Request(user_input="Where is order KST418?", history=history)
    kept = [{"role": m["role"], "content": m["content"]} for m in history[-6000:]]
    rendered = [*kept, {"role": "user", "content": "Where is order KST418?"}]
    checks = Checks(noise=Wanted(messages=tuple(f"u{i}" for i in range(rounds))),
                    required=Wanted(messages=tuple(f"a{i}" for i in range(rounds - 50, rounds))))
    started = time.perf_counter()
    result = measure(request, checks, rendered, [], COUNT)
    elapsed = time.perf_counter() - started
    assert result.scores["completeness"] == 1.0
    assert len(result.noise_shown) == 3000
    assert elapsed < 8, f"{elapsed:.1f} s (was about 19 s: one scan of the history per id)"


# --- options that would change nothing -----------------------------------------------------------


def test_tolerance_without_a_baseline_is_refused(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", ORDER)
    result = run_cli(str(cases), "--tolerance", "density=0.05")
    assert result.exit_code == 2
    assert "--tolerance applies only with --baseline" in result.stderr
    saved = tmp_path / "base.json"
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    assert run_cli(str(cases), "--baseline", str(saved), "--tolerance",
                   "density=0.05").exit_code == 0


# --- eval ablate: what a variant turns off ------------------------------------------------


def test_the_descriptions_ablation_turns_compaction_off_not_back_to_auto() -> None:
    plan = plan_from_mapping({"name": "p", "sources": [
        {"source": "tools", "options": {"compact_descriptions": True}}, {"source": "user"}]})
    by_label = {a.label: a for a in ablations([plan])}
    variant = by_label["-tools.descriptions"].apply(plan)
    assert variant is not None
    # Without the option the default is "auto", which still compacts a large catalogue.
    assert dict(variant.spec("tools").options) == {"compact_descriptions": False}
    tools = [{"type": "function", "function": {
        "name": f"tool_{i}", "description": "Looks things up. " + "It is careful. " * 60,
        "parameters": {"type": "object", "properties": {}}}} for i in range(12)]
    request = Request(user_input="Look it up.", tools=tools)
    offered = ContextBuilder(tokenizer="o200k_base").build(variant, request).to_request("openai")
    assert all(t["function"]["description"] == tools[0]["function"]["description"]
               for t in offered["tools"])


@pytest.mark.parametrize(("options", "listed"), [
    ({}, False), ({"compact_descriptions": False}, False), ({"compact_descriptions": "auto"}, True),
    ({"description_budget": 500}, True)])
def test_the_descriptions_ablation_is_listed_when_it_changes_the_plan(
        options: dict[str, Any], listed: bool) -> None:
    plan = plan_from_mapping({"name": "p", "sources": [{"source": "tools", "options": options},
                                                       {"source": "user"}]})
    assert ("-tools.descriptions" in [a.label for a in ablations([plan])]) is listed


def test_a_baseline_sharing_no_case_with_the_run_says_nothing_was_compared(
        tmp_path: Path) -> None:
    cases, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    write_cases(cases, ORDER)
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    write_cases(cases, {**ORDER, "id": "order-renamed"}, GREETING)
    result = run_cli(str(cases), "--baseline", str(saved))
    assert "note: no case of this run was built in the baseline: nothing was compared" \
        in result.stderr


# --- one file as baseline and save ---------------------------------------------------------------


def test_a_run_that_regressed_does_not_overwrite_the_baseline_it_was_compared_with(
        tmp_path: Path) -> None:
    # The usual CI line updates the baseline in place: `--baseline B --save B`. A regressed run
    # wrote itself over B, so the next run compared with the regression and passed.
    cases, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    write_cases(cases, ORDER)
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    before = saved.read_text("utf-8")
    write_cases(cases, {**ORDER, "request": {"user_input": "Where is my order?"}})
    result = run_cli(str(cases), "--baseline", str(saved), "--save", str(saved))
    assert result.exit_code == 1
    assert saved.read_text("utf-8") == before
    assert "not saved" in result.stderr
    again = run_cli(str(cases), "--baseline", str(saved))
    assert again.exit_code == 1  # still a regression against the kept baseline


def test_a_run_that_passes_updates_the_baseline_in_place(tmp_path: Path) -> None:
    cases, saved = tmp_path / "cases.jsonl", tmp_path / "base.json"
    write_cases(cases, ORDER)
    assert run_cli(str(cases), "--save", str(saved)).exit_code == 0
    write_cases(cases, ORDER, GREETING)
    result = run_cli(str(cases), "--baseline", str(saved), "--save", str(saved))
    assert result.exit_code == 0, result.stderr
    assert [case["id"] for case in json.loads(saved.read_text("utf-8"))["cases"]] == [
        "order", "greeting"]
