"""The router and the task zone read ordinal plans alike: one definition of the ordinal steps.

"First … Second …", "Step 1 … Step 2 …" and "第一步…第二步…" route to structured and are split
into steps there; "wait a second", "my second child", "第二天", a lone "Step 2" do neither.
"""

from __future__ import annotations

import pytest

from contextwright.modes.config import STRUCTURED
from contextwright.modes.router import Router
from contextwright.modes.zones import plan_steps

PLANS = [
    "First, look up order 123. Second, refund it.",
    "First look up order 123, second refund it, third email me the receipt.",
    "First, check the stock.\nSecondly, email the supplier.\nLastly, tell me when it ships.",
    "Step 1: look up order 123. Step 2: refund it.",
    "Step 1 look up the order\nStep 2 refund it\nStep 3 email me",
    "Please do this. Step 1: check the stock; step 2: email the supplier.",
    "第一步查订单123，第二步退款。",
    "第一步：查询库存；第二步：通知供应商；第三步：告诉我结果",
    "第1步查库存，第2步下单",
    "首先查订单，其次退款，最后通知我",
    "先查库存再调用供应商接口更新订单状态",
    "first check the stock, then email the supplier",
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
    "Step 1: I'll read the manual. Step 2: I'll call you if it fails.",
    "This is my second order this week.",
    "Which came first, then?",
]


def _planned(text: str) -> bool:
    decision = Router().route(text)
    return decision.mode == STRUCTURED and decision.basis == "rule"


@pytest.mark.parametrize("text", PLANS)
def test_an_ordinal_plan_routes_to_structured_and_is_split_there(text: str) -> None:
    assert _planned(text)
    assert len(plan_steps(text)) >= 2


@pytest.mark.parametrize("text", NOT_PLANS)
def test_an_ordinal_that_is_no_step_neither_routes_nor_plans(text: str) -> None:
    assert Router().route(text).mode != STRUCTURED
    assert plan_steps(text) == []
