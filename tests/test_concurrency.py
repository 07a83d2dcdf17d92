"""Builds are safe under concurrency, and the same input always gives the same context.

Eight threads share one builder and one plan and build a mix of requests (history to cut, tool
results, documents, notes, a request that cannot fit); every result must equal, byte for byte, the
result of building the same request alone. The plan must not be changeable in place (a shared
mutable plan would leak one request's limits into another).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
from typing import Any

import pytest

from contextwright import (
    BudgetError,
    BuildPlan,
    ContextBuilder,
    ContextwrightError,
    Document,
    Request,
)

THREADS = 8
BUILDS_PER_THREAD = 50

PLAN = (
    BuildPlan.builder("concurrency")
    .add("system", weight=0.15).add("env", weight=0.03, max_tokens=120)
    .add("tools", weight=0.1).add("examples", weight=0.05).add("notes", weight=0.05)
    .add("history", weight=0.3).add("user", weight=0.1).add("tool_results", weight=0.1)
    .add("rag", weight=0.12)
    .budget(window=3000, reserved_output=300)
    .build()
)


def weather_call(call_id: str, city: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]}


def weather_result(call_id: str, city: str, day: int) -> dict[str, Any]:
    forecast = [{"hour": h, "temp": 15 + (h + day) % 9, "rain_mm": (h * day) % 4}
                for h in range(0, 24, 2)]
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(
        {"code": 200, "data": {"city": city, "day": day, "forecast": forecast}})}


def history(seed: int, rounds: int, tag: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(rounds):
        messages.append({"role": "user", "id": f"c{seed}-u{i}",
                         "content": f"{tag} {seed}: round {i}, what about day {i}?"})
        if i % 3 == seed % 3:
            call_id = f"c{seed}-call{i}"
            messages += [weather_call(call_id, "杭州"), weather_result(call_id, "杭州", i)]
        messages.append({"role": "assistant", "id": f"c{seed}-a{i}",
                         "content": f"Day {i} in Hangzhou: cloudy, then clear. " * (1 + i % 4)})
    return messages


TOOLS = [
    {"type": "function", "function": {"name": name, "description": description,
                                      "parameters": {"type": "object", "properties": {}}}}
    for name, description in (("get_weather", "current weather of a city"),
                              ("save_memo", "save a memo"),
                              ("lookup_order", "look up an order by number"))
]


def request(seed: int, tag: str) -> Request:
    """A varied request; every text stays short enough to be counted in one piece.

    ``tag`` goes into the texts, so requests of different tests share no cached counts.
    """
    chinese = seed % 2 == 1
    question = (f"{tag} {seed}：今天杭州天气怎么样？" if chinese
                else f"{tag} {seed}: what's the weather in Hangzhou today?")
    if seed == 11:
        question = "too long to fit " * 3000
    turn: list[dict[str, Any]] = []
    for k in range(seed % 3):
        call_id = f"c{seed}-turn{k}"
        turn += [weather_call(call_id, "上海"), weather_result(call_id, "上海", seed + k)]
    documents = [
        Document(id=f"c{seed}-doc{k}", score=1.0 - k / 10, source=f"kb/{k}.md §{seed}",
                 text=f"Hangzhou climate note {k} for request {seed}. " * (5 + 7 * k))
        for k in range(seed % 5)
    ]
    return Request(
        user_input=question,
        system=f"You are assistant #{seed}. Answer briefly. " * (1 + seed % 3),
        history=history(seed, (seed * 7) % 31, tag),
        turn=turn,
        tools=TOOLS[: 1 + seed % 3],
        documents=documents,
        env={"time": f"2026-11-{10 + seed:02d} 10:00", "timezone": "Asia/Shanghai"},
        examples=[{"input": f"example {seed}", "output": "short answer"}] * (seed % 2),
        notes=[f"note {n} of request {seed}" for n in range(seed % 4)],
    )


SEEDS = range(16)


def outcome(builder: ContextBuilder, plan: BuildPlan, req: Request) -> str:
    """Messages (OpenAI and Anthropic) and report as canonical JSON, or the error and its report."""
    try:
        ctx = builder.build(plan, req)
    except BudgetError as exc:
        return json.dumps({"error": str(exc), "report": exc.report.to_dict()}, sort_keys=True,
                          ensure_ascii=False)
    except ContextwrightError as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})
    return json.dumps({
        "messages": ctx.to_messages("openai"),
        "anthropic": ctx.to_request("anthropic"),
        "total_tokens": ctx.total_tokens,
        "report": ctx.report.to_dict(),
    }, sort_keys=True, ensure_ascii=False)


def test_requests_are_varied() -> None:
    builder = ContextBuilder()
    kinds = set()
    for req in [request(seed, "varied") for seed in SEEDS]:
        result = json.loads(outcome(builder, PLAN, req))
        if "error" in result:
            kinds.add("error")
            continue
        actions = {d["action"] for d in result["report"]["decisions"]}
        kinds.add("cut" if actions & {"dropped", "truncated"} else "whole")
    assert kinds == {"error", "cut", "whole"}


def test_threads_sharing_one_builder_and_plan_get_the_serial_results() -> None:
    # The threads run first, on texts no other test counted, so they also race on the count
    # cache; the serial baseline runs afterwards.
    requests = [request(seed, "threads") for seed in SEEDS]
    builder = ContextBuilder()
    plan_before = copy.deepcopy(PLAN)
    start = threading.Barrier(THREADS)
    results: dict[int, list[tuple[int, str]]] = {}
    failures: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            start.wait()
            mine = []
            for n in range(BUILDS_PER_THREAD):
                index = (thread * 5 + n * 3) % len(requests)
                mine.append((index, outcome(builder, PLAN, requests[index])))
            results[thread] = mine
        except BaseException as exc:  # reported below, with the thread's traceback
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures

    serial = [outcome(builder, PLAN, req) for req in requests]
    assert sum(len(r) for r in results.values()) == THREADS * BUILDS_PER_THREAD
    for thread, mine in results.items():
        for index, got in mine:
            assert got == serial[index], f"thread {thread}, request {index} differs from serial"
    assert PLAN == plan_before


def test_fresh_builders_agree_with_a_shared_one() -> None:
    shared = ContextBuilder()
    for req in [request(seed, "fresh") for seed in range(6)]:
        assert outcome(ContextBuilder(), PLAN, req) == outcome(shared, PLAN, req)


# --- the same input gives the same context, whatever ran before -------------------------------

def test_report_does_not_depend_on_what_was_built_before() -> None:
    # A document long enough to be counted in pieces, once where it cannot fit (counting stops
    # early) and once where it fits (counted whole and cached). The first request's report must
    # be the same before and after the second request ran.
    plan = (BuildPlan.builder("pieces").add("system").add("user").add("rag")
            .budget(window=80_000, reserved_output=1_000).build())
    text = "".join(f"Line {i}: fox number {i} jumps over dog {i * 7}.\n" for i in range(3_000))
    document = Document(id="long", text=f"determinism {text}")
    crowded = Request(user_input="What does fox 17 do?", system="Rule. " * 22_000,
                      documents=[document])
    roomy = Request(user_input="What does fox 17 do?", documents=[document])
    builder = ContextBuilder()
    first = json.loads(outcome(builder, plan, crowded))
    outcome(builder, plan, roomy)
    again = json.loads(outcome(builder, plan, crowded))
    changed = [(a["key"], a["tokens_before"], b["tokens_before"])
               for a, b in zip(first["report"]["decisions"], again["report"]["decisions"],
                               strict=True) if a != b]
    assert first == again, f"report changed after an unrelated build: {changed}"


# --- plans cannot be changed in place --------------------------------------------------------

def test_plan_fields_cannot_be_reassigned() -> None:
    plan = BuildPlan.named("chat")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.budget.window = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.sources[0].max_tokens = 1  # type: ignore[misc]
    with pytest.raises((TypeError, AttributeError)):
        plan.sources.append(plan.sources[0])  # type: ignore[attr-defined]


def test_plan_source_options_cannot_be_changed_in_place() -> None:
    plan = BuildPlan.named("chat")
    options = plan.spec("history").options  # type: ignore[union-attr]
    before = dict(options)
    with pytest.raises(TypeError):
        options["max_rounds"] = 1  # type: ignore[index]
    assert dict(plan.spec("history").options) == before  # type: ignore[union-attr]
    assert "max_rounds" not in options


def test_changing_a_plan_makes_a_new_one() -> None:
    plan = BuildPlan.named("chat")
    bigger = plan.with_budget(window=32_768)
    assert bigger is not plan
    assert plan.budget.window == 8192
    assert bigger.budget.window == 32_768


def test_builder_registry_cannot_be_changed_after_construction() -> None:
    builder = ContextBuilder()
    with pytest.raises(TypeError):
        builder.sources["history"] = builder.sources["user"]  # type: ignore[index]
