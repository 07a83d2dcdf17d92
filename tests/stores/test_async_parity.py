"""Async parity: abuild / aprepare / arecord give what build / prepare / record give, on every
store, and the event loop keeps running while they work."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.session.store import Store

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}


def script() -> list[tuple[str, dict[str, Any]]]:
    """One conversation: messages, a tool call and its result, a continued turn."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "上海"}'}}]}
    steps: list[tuple[str, dict[str, Any]]] = []
    for index in range(4):
        steps.append(("prepare", {"text": f"第 {index} 个问题：上海天气？", "tools": [WEATHER]}))
        steps.append(("record", {"assistant": call | {"tool_calls": [
            {**call["tool_calls"][0], "id": f"c{index}"}]},
            "tool_results": [{"tool_call_id": f"c{index}", "content": '{"weather": "多云"}'}]}))
        steps.append(("prepare", {"text": None, "tools": [WEATHER]}))
        steps.append(("record", {"assistant": f"多云（第 {index} 次）"}))
    return steps


def without_session_key(body: dict[str, Any]) -> str:
    """The request without its prompt_cache_key, which names the session (a hash of its ids)."""
    assert isinstance(body.pop("prompt_cache_key"), str)
    return json.dumps(body, ensure_ascii=False)


def run_sync(manager: ContextManager, session: str) -> list[str]:
    out = []
    for kind, args in script():
        if kind == "prepare":
            out.append(without_session_key(
                manager.prepare("u", session, **args).to_request("openai")))
        else:
            out.append(json.dumps(manager.record("u", session, **args)))
    return out


async def run_async(manager: ContextManager, session: str) -> list[str]:
    out = []
    for kind, args in script():
        if kind == "prepare":
            prepared = await manager.aprepare("u", session, **args)
            out.append(without_session_key(prepared.to_request("openai")))
        else:
            out.append(json.dumps(await manager.arecord("u", session, **args)))
    return out


def test_sync_and_async_give_identical_results_on_every_store(store: Store) -> None:
    manager = ContextManager(store=store)
    try:
        expected = run_sync(manager, "sync")
        got = asyncio.run(run_async(manager, "async"))
    finally:
        manager.close()
    assert got == expected


def test_abuild_equals_build_and_the_loop_keeps_running() -> None:
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 40}
               for i in range(4000)]
    request = Request(user_input="what did we say about message 7?", history=history)
    builder = ContextBuilder()
    plan = BuildPlan.named("chat")

    async def main() -> tuple[Any, int]:
        ticks = 0
        done = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        beat = asyncio.create_task(heartbeat())
        ctx = await builder.abuild(plan, request)
        done.set()
        await beat
        return ctx, ticks

    ctx, ticks = asyncio.run(main())
    assert ctx.to_request("openai") == builder.build(plan, request).to_request("openai")
    assert ticks > 1  # the loop ran other work while the build did
