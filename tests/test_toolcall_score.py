"""The tool-call matching rule and the task file: exact after normalisation, tolerances named."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from contextwright.errors import InvalidInputError
from contextwright.evaluate.toolcall_score import (
    ExpectedCall,
    ModelCall,
    load_tasks,
    score_calls,
    values_equal,
)
from contextwright.evaluate.toolcall_tools import TOOLS


def expect(name: str, contains: dict[str, Any] | None = None, **arguments: Any) -> ExpectedCall:
    groups = {k: tuple(tuple(g) for g in v) for k, v in (contains or {}).items()}
    return ExpectedCall(name=name, arguments=arguments, contains=groups)


def call(name: str, arguments: str | dict[str, Any]) -> ModelCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ModelCall(name=name, arguments=text)


def verdict(expected: list[ExpectedCall], calls: list[ModelCall]) -> str:
    return score_calls(expected, calls, TOOLS).verdict


def test_key_order_whitespace_and_case_of_strings_do_not_matter() -> None:
    wanted = [expect("convert_currency", amount=250, from_currency="USD", to_currency="EUR")]
    given = call("convert_currency", '{ "to_currency":"eur",  "amount": 250.0,\n'
                 ' "from_currency": " USD " }')
    assert verdict(wanted, [given]) == "correct"
    assert values_equal("New York", "new  york")


def test_a_number_sent_as_a_string_is_wrong() -> None:
    wanted = [expect("convert_currency", amount=1280, from_currency="USD", to_currency="EUR")]
    given = call("convert_currency", {"amount": "1280", "from_currency": "USD",
                                      "to_currency": "EUR"})
    score = score_calls(wanted, [given], TOOLS)
    assert (score.verdict, score.detail) == ("wrong_args", "convert_currency: amount differs")
    assert not values_equal(True, 1) and not values_equal(1, True)


def test_free_text_needs_one_alternative_of_every_group() -> None:
    wanted = [expect("save_memo", contains={"text": [["Shanghai", "上海"], ["cloudy"], ["25"]]})]
    assert verdict(wanted, [call("save_memo", {"text": "上海: Cloudy, 25°C"})]) == "correct"
    missing = score_calls(wanted, [call("save_memo", {"text": "Shanghai: cloudy"})], TOOLS)
    assert (missing.verdict, missing.detail) == ("wrong_args",
                                                 "save_memo: text lacks an expected fragment")
    assert verdict(wanted, [call("save_memo", {"text": 25})]) == "wrong_args"


def test_parallel_calls_match_in_any_order() -> None:
    wanted = [expect("get_weather", city="Paris"), expect("get_weather", city="London")]
    calls = [call("get_weather", {"city": "london"}), call("get_weather", {"city": "Paris"})]
    assert verdict(wanted, calls) == "correct"
    twice = [call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Paris"})]
    assert verdict(wanted, twice) == "wrong_args"


def test_each_kind_of_wrong_call_has_its_verdict() -> None:
    wanted = [expect("create_event", contains={"title": [["dentist"]]}, date="2025-03-04",
                     time="15:00", timezone="Asia/Shanghai")]
    assert verdict(wanted, []) == "no_call"
    memo = score_calls(wanted, [call("save_memo", {"text": "dentist 15:00"})], TOOLS)
    assert (memo.verdict, memo.detail) == ("wrong_tool",
                                           "called save_memo; expected create_event")
    event = {"title": "Dentist", "date": "2025-03-04", "time": "15:00",
             "timezone": "Asia/Shanghai"}
    assert verdict(wanted, [call("create_event", event)] * 2) == "wrong_count"
    assert verdict(wanted, [call("create_event", {**event, "date": "tomorrow"})]) == "wrong_args"
    assert verdict(wanted, [call("create_event", "{not json")]) == "wrong_args"
    assert verdict(wanted, [call("create_event", "[1, 2]")]) == "wrong_args"
    assert verdict(wanted, [call("create_event", event)]) == "correct"


def test_an_extra_argument_is_accepted_only_at_the_schemas_default() -> None:
    wanted = [expect("search_notes", contains={"query": [["Lisbon"]]})]
    assert verdict(wanted, [call("search_notes", {"query": "Lisbon trip", "limit": 5})]) == (
        "correct")
    wrong = score_calls(wanted, [call("search_notes", {"query": "Lisbon", "limit": 3})], TOOLS)
    assert (wrong.verdict, wrong.detail) == ("wrong_args",
                                             "search_notes: unexpected argument limit")
    city = [expect("get_weather", city="Paris")]
    assert verdict(city, [call("get_weather", {"city": "Paris", "units": "c"})]) == "wrong_args"


def _task_line(**changes: Any) -> str:
    task = {"id": "t1", "request": {"user_input": "Weather in Paris?", "tools": TOOLS[:1]},
            "expected": [{"name": "get_weather", "arguments": {"city": "Paris"}}], **changes}
    return json.dumps(task)


def test_a_task_file_loads_and_bad_lines_are_named(tmp_path: Path) -> None:
    good = tmp_path / "tasks.jsonl"
    good.write_text(_task_line() + "\n\n" + _task_line(id="t2") + "\n", encoding="utf-8")
    tasks = load_tasks(good)
    assert [t.id for t in tasks] == ["t1", "t2"]
    assert tasks[0].expected[0].arguments == {"city": "Paris"}
    cases = {
        "not json": "tasks.jsonl line 1: not JSON",
        _task_line(expected=[{"name": "save_memo"}]): "expected[0].name: the request offers no "
                                                      "tool of that name",
        _task_line(expected=[]): "expected: List should have at least 1 item",
        _task_line(surprise=1): "surprise: Extra inputs are not permitted",
        _task_line(request={"history": []}): "request: ",
        _task_line(expected=[{"name": "get_weather", "contains": {"city": [[]]}}]):
            "every group needs an alternative",
        _task_line() + "\n" + _task_line(): "task id 't1' is repeated",
    }
    for text, message in cases.items():
        bad = tmp_path / "tasks.jsonl"
        bad.write_text(text + "\n", encoding="utf-8")
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            load_tasks(bad)
    with pytest.raises(InvalidInputError, match="no tasks"):
        (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
        load_tasks(tmp_path / "empty.jsonl")
    with pytest.raises(InvalidInputError, match="cannot read tasks file"):
        load_tasks(tmp_path / "missing.jsonl")
