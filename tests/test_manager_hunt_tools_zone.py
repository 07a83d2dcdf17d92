"""The tools zone of structured mode names a call's tool once: its line is the call and the
result, with no "Tool result (name):" label repeating the name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright.core.items import reports_failure
from contextwright.manager import ContextManager
from contextwright.manager.handoff import record_turn_in_zones
from contextwright.modes.zones import TOOL_RESULT_CHARS, render_zone
from contextwright.session import MemoryStore
from contextwright.session.state import SessionState

PLAN = "first check the weather in Paris, then book a table for two"
LONG_FIELDS = json.dumps({"order_id": "ORD-1", "status": "shipped", "note": "word " * 80,
                          "eta": "2024-12-03"})
LONG_TEXT = "Order ORD-0001 shipped. " * 40
MANY_IDS = json.dumps({"items": [{"sku": f"SKU-{i:04d}", "price": "19.90",
                                  "desc": "a long description of the item " * 3}
                                 for i in range(30)]})


def _manager() -> ContextManager:
    return ContextManager(store=MemoryStore(), background=False)


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _zone_result(content: str, name: str = "get_order") -> str:
    settings = _manager().modes.settings("structured")
    state = record_turn_in_zones(SessionState(), [_call("c1", name, {}), _result("c1", content)],
                                 settings)
    return state.zones.tools[0].result


def test_the_tools_zone_line_names_the_tool_once() -> None:
    cm = _manager()
    assert cm.prepare("u", "s", PLAN).mode == "structured"
    cm.record("u", "s", assistant={"content": "", "tool_calls": _call(
        "c1", "get_weather", {"city": "Paris"})["tool_calls"]},
              tool_results=[{"tool_call_id": "c1", "content": '{"city":"Paris","temp":21}'}])
    zone = render_zone("tools", cm.state("u", "s").zones, "en")
    assert zone == '[Tools]\n- get_weather({"city":"Paris"}) → city: Paris, temp: 21'
    shown = "\n".join(str(m["content"]) for m in cm.prepare("u", "s", "go on").to_messages())
    assert '- get_weather({"city":"Paris"}) → city: Paris, temp: 21' in shown


def test_a_result_recorded_after_its_call_has_no_label_either() -> None:
    cm = _manager()
    cm.prepare("u", "s", PLAN)
    cm.record("u", "s", assistant={"content": "", "tool_calls": _call(
        "c1", "get_weather", {"city": "Paris"})["tool_calls"]})
    cm.record("u", "s", tool_results=[{"tool_call_id": "c1", "content": '{"temp":21}'}])
    assert cm.state("u", "s").zones.tools[0].result == "temp: 21"


@pytest.mark.parametrize(("content", "kept"), [
    pytest.param(LONG_FIELDS, ("order_id: ORD-1", "eta: 2024-12-03"), id="key-facts"),
    pytest.param(LONG_TEXT, ("ORD-0001",), id="long-text"),
    pytest.param(MANY_IDS, ("SKU-0000", "SKU-0020"), id="identifiers"),
])
def test_a_result_too_long_for_the_zone_is_shown_without_a_label(content: str,
                                                                 kept: tuple[str, ...]) -> None:
    shown = _zone_result(content)
    assert "tool result" not in shown.lower() and "get_order" not in shown, shown
    assert all(value in shown for value in kept), shown
    assert len(shown) <= TOOL_RESULT_CHARS + 20  # a "(+n more)" tail may run past


def test_a_failed_result_still_reads_as_failed() -> None:
    shown = _zone_result('(tool error) {"error":"timeout"}')
    assert reports_failure(shown) and "timeout" in shown
    reduced = _zone_result("(tool error) " + LONG_FIELDS)
    assert reports_failure(reduced) and "tool result" not in reduced.lower(), reduced
