"""A recalled turn's tool results are tiered by the calls after it, with or without a stable prefix.

The manager recalls turns from the session's older messages, a list apart from the request's
window. Calls made since the last cut (the stable layout's anchor) are counted in the window,
where the anchor is; counted in the older messages instead, they made every recalled result look
newer than the calls after it say.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright import ContextManager, MemoryStore, Request
from contextwright.sources import conversation
from contextwright.sources.conversation import calls_since_cut

FACT_CITY = "Reykjavik"


def _session(cm: ContextManager, rounds: int) -> None:
    for n in range(rounds):
        city = FACT_CITY if n == 3 else f"Town{n}"
        cm.prepare("u", "s", f"Round {n}: what is the weather in {city}?")
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}
        result = json.dumps({"city": city, "forecast": [
            {"day": d, "high": 10 + d, "low": d, "summary": f"clouds over {city} on day {d}"}
            for d in range(12)]})
        cm.record("u", "s", assistant={"role": "assistant", "content": "", "tool_calls": [call]},
                  tool_results=[{"role": "tool", "tool_call_id": f"call_{n}", "content": result}])
        cm.record("u", "s", assistant=f"It is cloudy in {city}.")


def _recalled_results(cache: bool) -> list[str]:
    cm = ContextManager(store=MemoryStore(), background=False, cache=cache,
                        clock=lambda: 1_700_000_000.0)
    _session(cm, 60)
    ctx = cm.prepare("u", "s", f"What was the forecast for {FACT_CITY} again?")
    results, recalled = [], False
    for message in ctx.to_messages("openai"):
        content = str(message.get("content"))
        if message.get("role") == "user":
            recalled = content.startswith("[recalled")
        elif message.get("role") == "tool" and recalled:
            results.append(content)
    return results


def test_recalled_tool_results_are_tiered_alike_with_and_without_a_stable_prefix() -> None:
    fresh = _recalled_results(cache=False)
    stable = _recalled_results(cache=True)
    assert fresh and stable, "turns with tool calls are recalled"
    # The stable build may recall fewer turns (its layout has an allowance); those it shows,
    # it shows as a fresh build does.
    assert set(map(_unfenced, stable)) <= set(map(_unfenced, fresh))


def _unfenced(result: str) -> str:
    """A tool result's text without its fence lines (their ids differ between builders)."""
    return "\n".join(result.splitlines()[1:-1])


def test_calls_since_the_cut_are_counted_once_in_the_window(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # Counted per recalled turn over the session's older messages, this scanned a long session
    # once per recalled turn (a fresh worker's first prepare of 100,000 messages: 0.4 s).
    cm = ContextManager(store=MemoryStore(), background=False, cache=True,
                        clock=lambda: 1_700_000_000.0)
    _session(cm, 60)
    scanned: list[int] = []
    real = conversation._calls_from

    def counting(history: Any, anchor: float) -> int:
        scanned.append(len(history))
        return real(history, anchor)

    monkeypatch.setattr(conversation, "_calls_from", counting)
    ctx = cm.prepare("u", "s", f"What was the forecast for {FACT_CITY} again?")
    recalled = [d for d in ctx.report.decisions if d.reason.startswith("recalled")]
    assert len(recalled) > 1
    window = sum(1 for m in ctx.to_messages("openai") if m.get("role") != "system")
    assert scanned and all(size <= window for size in scanned), (
        "only the request's history is scanned, never the session's older messages")
    assert len(scanned) <= 2, "once for the recent stream's recalled turns, not once each"


def test_calls_since_cut_counts_call_blocks_from_the_anchor() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "", "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c", "content": "ok"},
               {"role": "assistant", "content": "", "tool_calls": [{**call, "id": "d"}]},
               {"role": "tool", "tool_call_id": "d", "content": "ok"}]
    request = Request(user_input="next", history=history)
    assert calls_since_cut(request, {}) == 0, "no cut: no call is newer than it"
    assert calls_since_cut(request, {"tier_anchor": 0}) == 2
    assert calls_since_cut(request, {"tier_anchor": 3}) == 1
