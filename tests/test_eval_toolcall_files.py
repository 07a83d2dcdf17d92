"""The tasks file of ``eval toolcalls``, as a user edits it: a byte order mark, a repeated id."""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import pytest

from contextwright.errors import InvalidInputError
from contextwright.evaluate.toolcall_score import load_tasks, parse_tasks
from contextwright.evaluate.toolcalls import ResultCache

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}


def task_line(task_id: str) -> str:
    return json.dumps({"id": task_id, "request": {"user_input": "Weather in Paris?",
                                                  "tools": [WEATHER]},
                       "expected": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})


def test_a_tasks_file_saved_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + (task_line("t1") + "\n").encode("utf-8"))
    assert [task.id for task in load_tasks(path)] == ["t1"]


def test_a_repeated_task_id_names_both_lines() -> None:
    text = "\n".join([task_line("t1"), "", task_line("t2"), task_line("t1")]) + "\n"
    message = "tasks.jsonl line 4: task id 't1' is repeated (also on line 1)"
    with pytest.raises(InvalidInputError, match=f"^{re.escape(message)}$"):
        parse_tasks(text, "tasks.jsonl")


# --- the results cache: records a resumed run cannot use ---------------------------------------


@pytest.mark.parametrize("outcome", [
    {"config": "a", "verdict": "correct"},  # no task
    {"task": "t", "config": "a", "verdict": "splendid"},
    {"task": "t", "config": "a", "verdict": "correct", "calls": ["get_weather"]},
    {"task": "t", "config": "a", "verdict": "correct", "prompt_tokens": "many"},
])
def test_a_cache_record_a_resumed_run_cannot_read_is_an_error_naming_its_line(
        tmp_path: Path, outcome: dict[str, object]) -> None:
    cache = tmp_path / "runs.jsonl"
    good = {"key": "k1", "outcome": {"task": "t", "config": "a", "verdict": "correct"}}
    cache.write_text(json.dumps(good) + "\n" + json.dumps({"key": "k2", "outcome": outcome})
                     + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"line 2 is not a cache record"):
        ResultCache(cache)
