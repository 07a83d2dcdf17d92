"""Every tool left out is reported by name with its reason, also when the budget stops reading.

The tools source ranks a catalogue and offers at most 128 tools; the budget then keeps what
fits. Tools the build never read (lower-ranked than anything that could fit) and tools over the
128 a request takes are each named with their reason, not folded into one ``tools.*`` decision.
"""

from __future__ import annotations

from typing import Any

from contextwright import BuildPlan, ContextBuilder, Request

SYSTEMS = ("billing", "crm", "inventory", "shipping")
TOOLS = [{"type": "function", "function": {
    "name": f"tool_{i}", "description": f"Operation number {i} on the {SYSTEMS[i % 4]} system.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    for i in range(200)]


def _left_out(ctx: Any) -> dict[str, str]:
    return {d.key: d.reason for d in ctx.report.decisions
            if d.source == "tools" and d.action == "dropped"}


def _offered(ctx: Any) -> list[str]:
    return [t["function"]["name"] for t in ctx.to_request("openai", model="m")["tools"]]


def test_every_tool_left_out_is_named_with_its_reason() -> None:
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        BuildPlan.named("tool_heavy"),
        Request(user_input="check shipping for order 5", system="s", tools=TOOLS))
    offered = _offered(ctx)
    assert 0 < len(offered) < 128, "the budget keeps fewer than the 128 offered"
    left_out = _left_out(ctx)
    assert "tools.*" not in left_out
    assert set(left_out) == {f"tools.tool_{i}" for i in range(200)} - {
        f"tools.{name}" for name in offered}
    over = [k for k, why in left_out.items() if why.startswith("over the 128 tools")]
    assert len(over) == 72
    assert any(why.endswith("not read") for why in left_out.values())
    row = next(r for r in ctx.report.sources if r.source == "tools")
    assert row.dropped == 200 - len(offered)
    assert sum(d.count for d in ctx.report.decisions
               if d.source == "tools" and d.action == "dropped") == 200 - len(offered)


def test_a_stable_prefix_build_names_them_too() -> None:
    builder = ContextBuilder(tokenizer="o200k_base")
    plan = BuildPlan.named("tool_heavy")
    first = builder.build(plan, Request(user_input="billing question", system="s",
                                        tools=TOOLS), cache=True)
    ctx = builder.build(plan, Request(user_input="and shipping?", system="s", tools=TOOLS,
                                      history=[{"role": "user", "content": "billing question"},
                                               {"role": "assistant", "content": "ok"}]),
                        previous=first.fingerprint, cache=True)
    left_out = _left_out(ctx)
    assert "tools.*" not in left_out
    assert len(left_out) == 200 - len(_offered(ctx))
