"""Ordinal plans — "First …. Second …", "Step 1 … Step 2 …", "第一步…第二步…" — in the task zone.

The router took "First, look up order 123. Second, refund it." for a plan and sent it to
structured mode, where the task zone planned nothing: it split on "then", not on "second".
An ordinal that is no step ("wait a second", "my second child", "第二天", a lone "Step 2") plans
nothing, in the zone as in the router.
"""

from __future__ import annotations

import pytest

from contextwright.modes.config import STRUCTURED
from contextwright.modes.router import Router
from contextwright.modes.zones import Zones, plan_steps, update_task

ORDINAL_PLANS = [
    ("First, look up order 123. Second, refund it.", ["look up order 123", "refund it"]),
    ("First look up order 123, second refund it, third email me the receipt.",
     ["look up order 123", "refund it", "email me the receipt"]),
    ("First, check the stock.\nSecondly, email the supplier.\nLastly, tell me when it ships.",
     ["check the stock", "email the supplier", "tell me when it ships"]),
    ("Step 1: look up order 123. Step 2: refund it.", ["look up order 123", "refund it"]),
    ("Step 1 look up the order\nStep 2 refund it\nStep 3 email me",
     ["look up the order", "refund it", "email me"]),
    ("Please do this. Step 1: check the stock; step 2: email the supplier.",
     ["check the stock", "email the supplier"]),
    ("第一步查订单123，第二步退款。", ["查订单123", "退款"]),
    ("第一步：查询库存；第二步：通知供应商；第三步：告诉我结果",
     ["查询库存", "通知供应商", "告诉我结果"]),
    ("第1步查库存，第2步下单", ["查库存", "下单"]),
    ("首先查订单，其次退款，最后通知我", ["查订单", "退款", "通知我"]),
]

NOT_PLANS = [
    "wait a second",
    "Hold on a second.",
    "my second child is sick",
    "First, my second child is sick.",
    "At first I thought so, but on second thought no.",
    "第二天我去了公园",
    "第一天我们去了长城，第二天去了故宫",
    "我卡在第二步了，怎么办",
    "第一次来，第二次就熟了",
    "I'm stuck. Step 2 fails every time, can you help?",
    "Second, I don't like your tone.",
    "This is my second order this week.",
]


@pytest.mark.parametrize(("text", "steps"), ORDINAL_PLANS)
def test_an_ordinal_plan_is_split_into_its_steps(text: str, steps: list[str]) -> None:
    assert plan_steps(text) == steps
    assert update_task(Zones(), text).task.next == tuple(steps)


@pytest.mark.parametrize("text", NOT_PLANS)
def test_an_ordinal_that_is_no_step_plans_nothing(text: str) -> None:
    assert plan_steps(text) == []


@pytest.mark.parametrize("text", [text for text, _ in ORDINAL_PLANS])
def test_what_the_router_takes_for_a_plan_the_zone_plans(text: str) -> None:
    # Whatever the router sends to structured as a plan, the task zone splits into steps.
    decision = Router().route(text)
    if decision.mode == STRUCTURED and decision.basis == "rule":
        assert plan_steps(text)


@pytest.mark.parametrize("text", [t for t in NOT_PLANS if "First," not in t])
def test_an_ordinal_that_is_no_step_is_not_routed_as_a_plan(text: str) -> None:
    assert Router().route(text).mode != STRUCTURED
