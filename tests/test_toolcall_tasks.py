"""The 30 generated tool-call tasks: deterministic, valid, noisy and long, answerable."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from contextwright.agent import MemoBook
from contextwright.core.request import Request
from contextwright.evaluate.toolcall_score import load_tasks
from contextwright.evaluate.toolcall_tasks import CITIES, generate_tasks, write_tasks
from contextwright.evaluate.toolcall_tools import TOOL_NAMES, TOOLS, run_tool
from contextwright.evaluate.toolcalls import builtin_tasks, everything_messages, messages_tokens
from contextwright.tokens import get_tokenizer


@pytest.fixture(scope="module")
def tasks() -> list[dict[str, Any]]:
    return generate_tasks()


def test_thirty_tasks_the_same_on_every_generation(tasks: list[dict[str, Any]]) -> None:
    assert len(tasks) == 30
    assert json.dumps(tasks, sort_keys=True) == json.dumps(generate_tasks(), sort_keys=True)
    assert len({t["id"] for t in tasks}) == 30
    assert Counter(t["family"] for t in tasks) == {
        "weather_direct": 5, "weather_reference": 5, "weather_memo": 4, "reminder": 6,
        "conversion": 6, "multi": 4}


def test_every_task_is_a_valid_request_offering_every_tool(tasks: list[dict[str, Any]]) -> None:
    for task in builtin_tasks():
        request = Request.from_dict(task.request)  # every message checked
        assert [t["function"]["name"] for t in request.tools] == list(TOOL_NAMES)
        assert "Today is" in (request.system or "")


def test_histories_are_long_noisy_and_hold_real_tool_results(
        tasks: list[dict[str, Any]]) -> None:
    count = get_tokenizer("o200k_base")
    sizes = [messages_tokens(everything_messages(Request.from_dict(t["request"])), count)
             for t in tasks]
    assert min(sizes) < 5120 < 8192 < max(sizes)  # some fit a budget, some no 8k window
    assert sum(size > 8192 for size in sizes) >= 5 and sum(size < 8192 for size in sizes) >= 5
    for task in tasks:
        history = task["request"]["history"]
        results = [m for m in history if m["role"] == "tool"]
        called = {c["function"]["name"] for m in history for c in m.get("tool_calls", [])}
        assert len(results) >= 2 and len(called) >= 2, task["id"]
        assert all("error" not in json.loads(m["content"]) for m in results), task["id"]
        assert max(len(m["content"]) for m in results) > 1500, task["id"]  # a big result
        text = json.dumps(history, ensure_ascii=False)
        asked = json.dumps(task["expected"], ensure_ascii=False) + task["request"]["user_input"]
        named = {english for english, chinese in CITIES if english in text or chinese in text}
        assert named - {e for e, c in CITIES if e in asked or c in asked}, task["id"]


def test_a_referred_city_is_followed_by_other_cities(tasks: list[dict[str, Any]]) -> None:
    for task in (t for t in tasks if t["family"] == "weather_reference"):
        history = task["request"]["history"]
        city = task["expected"][0]["arguments"]["city"]
        at = next(i for i, m in enumerate(history) if m["role"] == "user"
                  and f" in {city} now" in m["content"])
        later = json.dumps(history[at + 1:], ensure_ascii=False)
        assert any(english in later for english, _ in CITIES if english != city), task["id"]


def tokens(messages: list[dict[str, Any]]) -> int:
    count = get_tokenizer("o200k_base")
    return sum(count.count(json.dumps(m, ensure_ascii=False)) for m in messages)


def test_a_stated_fact_sits_where_the_task_says(tasks: list[dict[str, Any]]) -> None:
    with_facts = [t for t in tasks if "fact_position" in t]
    assert Counter(t["fact_position"] for t in with_facts) == {"old": 3, "middle": 4,
                                                               "recent": 3}
    for task in with_facts:
        history = task["request"]["history"]
        words = {"weather_reference": "my ", "reminder": "flight", "conversion": "invoice came"}
        word = words[task["family"]]
        at = next(i for i, m in enumerate(history) if m["role"] == "user"
                  and word in m["content"] and (word != "my " or "now —" in m["content"]))
        share = tokens(history[:at]) / tokens(history)
        low, high = {"old": (0, 0.2), "middle": (0.3, 0.7), "recent": (0.65, 1)}[
            task["fact_position"]]
        assert low <= share <= high, (task["id"], share)


def test_every_expected_call_is_a_call_the_tool_runs(tmp_path: Path,
                                                     tasks: list[dict[str, Any]]) -> None:
    memos = MemoBook(tmp_path / "m.db")
    for task in builtin_tasks():
        for expected in task.expected:
            arguments = dict(expected.arguments)
            for key, groups in expected.contains.items():
                arguments[key] = " ".join(group[0] for group in groups)
            schema = next(t["function"]["parameters"] for t in TOOLS
                          if t["function"]["name"] == expected.name)
            assert set(schema["required"]) <= set(arguments), task.id
            result = json.loads(run_tool(expected.name, json.dumps(arguments), memos))
            assert "error" not in result, (task.id, result)


def test_written_tasks_load_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    assert write_tasks(path) == 30
    loaded = load_tasks(path)
    assert [t.id for t in loaded] == [t.id for t in builtin_tasks()]
    assert loaded[10].request == builtin_tasks()[10].request
