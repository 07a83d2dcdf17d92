"""``eval toolcalls`` scores parallel calls of one tool in polynomial time, as the exhaustive
search over every order of the calls would.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from contextwright.evaluate.toolcall_score import (
    ExpectedCall,
    ModelCall,
    Score,
    _mismatch,
    score_calls,
)

CONVERT = {"type": "function", "function": {"name": "convert_units", "parameters": {
    "type": "object", "properties": {"value": {"type": "number"}, "unit": {"type": "string"},
                                     "precision": {"type": "integer", "default": 2}}}}}
NOTE = {"type": "function", "function": {"name": "save_memo", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}}}}
TOOLS = [CONVERT, NOTE]


def exhaustive(expected: Sequence[ExpectedCall], calls: Sequence[ModelCall],
               tools: Sequence[Mapping[str, Any]]) -> Score:
    """``score_calls`` as it was written first: every order of each tool's calls is tried."""
    verdict = score_calls(expected, calls, tools)
    if verdict.verdict not in ("correct", "wrong_args"):
        return verdict  # decided before any pairing
    defaults = {"convert_units": {"precision": 2}, "save_memo": {}}
    names = dict.fromkeys(e.name for e in expected)
    for name in names:
        wanted = [e for e in expected if e.name == name]
        made = [c for c in calls if c.name == name]
        reasons = []
        for order in itertools.permutations(made):
            found = [m for e, c in zip(wanted, order, strict=True)
                     if (m := _mismatch(e, c, defaults[name])) is not None]
            if not found:
                break
            reasons.append(found[0])
        else:
            return Score(verdict="wrong_args", detail=reasons[0])
    return Score(verdict="correct")


def convert(value: float, unit: str) -> ExpectedCall:
    return ExpectedCall(name="convert_units", arguments={"value": value, "unit": unit},
                        contains={})


def made(name: str, **arguments: Any) -> ModelCall:
    return ModelCall(name=name, arguments=json.dumps(arguments))


def random_case(rng: random.Random) -> tuple[list[ExpectedCall], list[ModelCall]]:
    """Few values and units, so that several calls fit several expected ones; most calls are
    written like one expected call (another case, ``2.0`` for ``2``), some are not."""
    expected: list[ExpectedCall] = []
    calls: list[ModelCall] = []
    for _ in range(rng.randint(1, 5)):
        value, unit = rng.choice([1, 2, 3]), rng.choice(["km", "mi"])
        expected.append(convert(value, unit))
        arguments: dict[str, Any] = {"value": rng.choice([value, float(value)]),
                                     "unit": rng.choice([unit, unit.upper() + " "])}
        if rng.random() < 0.25:
            arguments = {"value": rng.choice([1, 2, 3]), "unit": rng.choice(["km", "mi"])}
        if rng.random() < 0.1:
            arguments["precision"] = rng.choice([2, 3])
        if rng.random() < 0.05:
            del arguments["unit"]
        calls.append(ModelCall(name="convert_units", arguments=json.dumps(arguments)))
    # Memos whose fragments overlap: a text with more words fits more expected memos, so a
    # call may have to give way to another (fitting is not an equivalence here).
    words = ["done", "today", "Paris"]
    for _ in range(rng.randint(0, 4)):
        wanted = rng.sample(words, rng.randint(1, 3))
        expected.append(ExpectedCall(name="save_memo", arguments={},
                                     contains={"text": tuple((w,) for w in wanted)}))
        said = set(wanted) if rng.random() < 0.6 else set(rng.sample(words, rng.randint(0, 3)))
        said |= set(rng.sample(words, rng.randint(0, 1)))
        calls.append(made("save_memo", text=" ".join(["Memo:", *sorted(said)])))
    rng.shuffle(calls)
    return expected, calls


def test_scores_equal_the_exhaustive_search_on_random_small_cases() -> None:
    rng = random.Random(20261207)
    verdicts: Counter[str] = Counter()
    for _ in range(1000):
        expected, calls = random_case(rng)
        score = score_calls(expected, calls, TOOLS)
        assert score == exhaustive(expected, calls, TOOLS), (expected, calls)
        verdicts[score.verdict] += 1
    assert verdicts["correct"] > 100 and verdicts["wrong_args"] > 100


@pytest.mark.parametrize("count", [12, 40])
def test_many_parallel_calls_are_scored_at_once(count: int) -> None:
    expected = [convert(i, "km") for i in range(count)]
    reversed_calls = [made("convert_units", value=i, unit="KM") for i in reversed(range(count))]
    wrong = [*reversed_calls[:-1], made("convert_units", value=count, unit="km")]
    started = time.perf_counter()
    assert score_calls(expected, reversed_calls, TOOLS) == Score(verdict="correct")
    assert score_calls(expected, wrong, TOOLS) == Score(
        verdict="wrong_args", detail="convert_units: value differs")
    assert time.perf_counter() - started < 2.0


def test_a_matching_needs_a_call_to_give_way_to_another() -> None:
    # The first call fits both expected ones, the second only the first: a greedy pairing
    # that gives the first call to the first expected call would miss the match.
    loose = ExpectedCall(name="save_memo", arguments={}, contains={"text": (("done",),)})
    strict = ExpectedCall(name="save_memo", arguments={}, contains={"text": (("done",),
                                                                             ("today",))})
    calls = [made("save_memo", text="done today"), made("save_memo", text="done")]
    assert score_calls([strict, loose], list(reversed(calls)), TOOLS).verdict == "correct"
    assert score_calls([loose, strict], calls, TOOLS).verdict == "correct"
