"""Deterministic synthetic chat histories for the speed benchmark.

Everything here is pure Python (standard library only) and deterministic: the same
``(n_messages, seed)`` always yields the same list of OpenAI-format message dicts.

Shape of a history produced by :func:`make_history`:

* message 0 is a ``system`` prompt;
* then *rounds*, each starting with a ``user`` message:

  - a plain round is ``user -> assistant``;
  - a tool round is ``user -> assistant(tool_calls=[1..2 calls]) -> tool (one per
    call) -> assistant``. Some tool results are long JSON documents (roughly 300-600
    o200k_base tokens: weather forecasts, order details, flight searches).

Messages are English, Chinese, or a mix of both, and average roughly 60 o200k_base
tokens each. Every message carries a unique ``"id"`` string. The history is always
"legal" for the OpenAI chat API: every ``tool`` message directly follows the assistant
message that issued its call (a round that would not fit in the requested number of
messages is replaced by a shorter one).

:func:`next_message` produces messages to append in a steady-state benchmark; it
alternates plain ``user`` and plain ``assistant`` messages, so appending never breaks
the tool-call pairing.
"""

from __future__ import annotations

import json
import random
from typing import Any

__all__ = ["make_history", "make_tools", "next_message"]

Message = dict[str, Any]

# ---------------------------------------------------------------------------
# Word pools
# ---------------------------------------------------------------------------

_CITIES: tuple[tuple[str, str], ...] = (
    ("Shanghai", "上海"),
    ("Beijing", "北京"),
    ("Shenzhen", "深圳"),
    ("Hangzhou", "杭州"),
    ("Chengdu", "成都"),
    ("Tokyo", "东京"),
    ("Singapore", "新加坡"),
    ("London", "伦敦"),
    ("Paris", "巴黎"),
    ("Berlin", "柏林"),
    ("New York", "纽约"),
    ("San Francisco", "旧金山"),
    ("Sydney", "悉尼"),
    ("Toronto", "多伦多"),
    ("Seoul", "首尔"),
    ("Bangkok", "曼谷"),
)
_AIRPORTS: tuple[str, ...] = (
    "PVG", "PEK", "SZX", "HGH", "CTU", "HND", "SIN", "LHR",
    "CDG", "BER", "JFK", "SFO", "SYD", "YYZ", "ICN", "BKK",
)  # fmt: skip
_AIRLINES: tuple[str, ...] = (
    "China Eastern", "Air China", "Singapore Airlines", "ANA", "Lufthansa",
    "British Airways", "United", "Cathay Pacific", "Korean Air", "Qantas",
)  # fmt: skip
_PRODUCTS: tuple[tuple[str, str], ...] = (
    ("wireless headphones", "无线耳机"),
    ("mechanical keyboard", "机械键盘"),
    ("4K monitor", "4K 显示器"),
    ("espresso machine", "意式咖啡机"),
    ("running shoes", "跑鞋"),
    ("standing desk", "升降桌"),
    ("air purifier", "空气净化器"),
    ("travel backpack", "旅行背包"),
    ("smart watch", "智能手表"),
    ("e-book reader", "电子书阅读器"),
)
_TOPICS: tuple[tuple[str, str], ...] = (
    ("the quarterly budget", "季度预算"),
    ("the product launch", "产品发布会"),
    ("the team offsite", "团队团建"),
    ("the database migration", "数据库迁移"),
    ("the customer survey", "客户调研"),
    ("the hiring plan", "招聘计划"),
    ("the security review", "安全评审"),
    ("the marketing campaign", "市场推广活动"),
)
_CONDITIONS: tuple[tuple[str, str], ...] = (
    ("sunny", "晴"),
    ("partly cloudy", "多云"),
    ("overcast", "阴"),
    ("light rain", "小雨"),
    ("thunderstorms", "雷阵雨"),
    ("fog", "雾"),
    ("snow showers", "阵雪"),
)
_WEEKDAYS: tuple[tuple[str, str], ...] = (
    ("Monday", "周一"),
    ("Tuesday", "周二"),
    ("Wednesday", "周三"),
    ("Thursday", "周四"),
    ("Friday", "周五"),
    ("Saturday", "周六"),
    ("Sunday", "周日"),
)
_NAMES: tuple[str, ...] = ("Alice", "Bob", "Chen Wei", "李娜", "王强", "Priya", "Lukas", "张敏")

# ---------------------------------------------------------------------------
# Sentence templates (fields: c=city, c2=other city, p=product, t=topic, d=day, n, m, name)
# ---------------------------------------------------------------------------

_USER_EN: tuple[str, ...] = (
    "Can you tell me what the weather will be like in {c} on {d}?",
    "I'm planning a trip from {c} to {c2} next month, any advice?",
    "Where is my order {oid}? I ordered the {p} about {n} days ago.",
    "Please remind me to follow up on {t} with {name} tomorrow morning.",
    "What's a good way to summarise {t} for the leadership meeting?",
    "Could you find me a flight to {c2} that leaves before noon?",
    "I need to pack for {c}; should I bring an umbrella?",
    "How much did we spend on {t} last quarter, roughly?",
    "Is the {p} still under warranty if I bought it {n} months ago?",
    "Let's draft a short note to {name} about {t}.",
    "What time zone is {c} in, and how far ahead of {c2} is it?",
    "Compare the two cheapest options for me, please.",
)
_USER_ZH: tuple[str, ...] = (
    "帮我查一下{d}{cz}的天气怎么样？",
    "我下个月要从{cz}去{c2z}出差，有什么建议吗？",
    "我的订单{oid}到哪了？{n}天前买的{pz}。",
    "提醒我明天上午跟{name}确认一下{tz}的进度。",
    "{tz}的材料能不能帮我整理成三点摘要？",
    "帮我找一班中午之前从{cz}飞{c2z}的航班。",
    "去{cz}需要带伞吗？那边最近天气如何？",
    "这个{pz}买了{n}个月了，还在保修期内吗？",
    "把刚才的结果用中文再总结一下，谢谢。",
    "{cz}和{c2z}之间的时差是多少？",
)
_ASSIST_EN: tuple[str, ...] = (
    "Sure, here is what I found for {c} on {d}.",
    "Based on the latest data, temperatures should range from {n} to {m} degrees.",
    "I would recommend booking at least two weeks in advance to get a better fare.",
    "Your {p} was shipped on {d} and should arrive within {n} business days.",
    "I've noted the reminder about {t}; I'll bring it up again tomorrow.",
    "In short: costs are on track, two risks remain open, and the next milestone is {d}.",
    "If you prefer a morning departure, the {n}:05 flight is the most convenient option.",
    "The warranty covers manufacturing defects for {m} months from the purchase date.",
    "Let me know if you want me to adjust anything or add more detail.",
    "{c} is usually {n} hours ahead of {c2}, but check daylight saving changes.",
    "One option is cheaper, while the other has a shorter layover and better reviews.",
    "I can also draft the message to {name} if that helps.",
    "Keep in mind that prices and availability may change before you book.",
)
_ASSIST_ZH: tuple[str, ...] = (
    "好的，这是{cz}{d}的天气情况。",
    "根据最新数据，气温大约在{n}到{m}度之间，早晚温差较大。",
    "建议至少提前两周预订，这样票价会便宜一些。",
    "您的{pz}已于{d}发货，预计{n}个工作日内送达。",
    "我已经记下了关于{tz}的提醒，明天会再提醒您。",
    "简单总结：成本基本可控，还有两个风险待处理，下一个里程碑在{d}。",
    "如果您希望上午出发，{n}点05分的航班最合适。",
    "保修期为自购买之日起{m}个月，仅覆盖非人为损坏。",
    "如需调整或补充细节，请随时告诉我。",
    "{cz}通常比{c2z}快{n}个小时，注意夏令时的变化。",
)
_PREFACE_EN: tuple[str, ...] = (
    "Let me check that for you.",
    "One moment, I'll look that up.",
    "I'll call the relevant tools now.",
)
_PREFACE_ZH: tuple[str, ...] = ("我来帮您查一下。", "稍等，我查询一下。")

_SYSTEM_PROMPT = (
    "You are a helpful travel and shopping assistant for a bilingual (English / 中文) "
    "user base. Answer in the language the user writes in. Use the available tools to "
    "look up weather, orders and flights, and to save memos; never invent order numbers "
    "or flight times. Keep answers concise, friendly and accurate. "
    "如果用户使用中文提问，请用中文回答，并保持简洁。"
)

# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------


def make_tools() -> list[dict[str, Any]]:
    """Return the OpenAI tool schemas that the synthetic histories call.

    Returns:
        Four ``{"type": "function", "function": {...}}`` schemas: ``get_weather``,
        ``save_memo``, ``lookup_order`` and ``search_flights``.
    """
    return [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get the current weather and a forecast for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "description": "City name."},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                        "days": {"type": "integer", "description": "Forecast days (1-7)."},
                    },
                    "required": ["city"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "save_memo",
                "description": "Save a short memo or reminder for the user.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "Memo text."},
                        "remind_at": {
                            "type": "string",
                            "description": "ISO 8601 date-time for the reminder.",
                        },
                    },
                    "required": ["text"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Look up an order's status, items and shipping events.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "order_id": {"type": "string", "description": "Order number."},
                    },
                    "required": ["order_id"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "search_flights",
                "description": "Search one-way flights between two airports on a date.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "origin": {"type": "string", "description": "IATA code."},
                        "destination": {"type": "string", "description": "IATA code."},
                        "date": {"type": "string", "description": "YYYY-MM-DD."},
                        "max_results": {"type": "integer"},
                    },
                    "required": ["origin", "destination", "date"],
                },
            },
        },
    ]


# ---------------------------------------------------------------------------
# Generation helpers
# ---------------------------------------------------------------------------


def _fields(rng: random.Random) -> dict[str, str]:
    """Draw one set of template fields."""
    c, cz = rng.choice(_CITIES)
    c2, c2z = rng.choice(_CITIES)
    p, pz = rng.choice(_PRODUCTS)
    t, tz = rng.choice(_TOPICS)
    n = rng.randint(2, 12)
    return {
        "c": c,
        "cz": cz,
        "c2": c2,
        "c2z": c2z,
        "p": p,
        "pz": pz,
        "t": t,
        "tz": tz,
        "d": rng.choice(_WEEKDAYS)[0],
        "n": str(n),
        "m": str(n + rng.randint(3, 20)),
        "name": rng.choice(_NAMES),
        "oid": f"A{rng.randint(100000, 999999)}",
    }


def _text(rng: random.Random, en: tuple[str, ...], zh: tuple[str, ...], lo: int, hi: int) -> str:
    """Compose ``lo..hi`` sentences: English, Chinese, or a mix (60/25/15)."""
    f = _fields(rng)
    k = rng.randint(lo, hi)
    r = rng.random()
    if r < 0.60:
        parts = [rng.choice(en).format(**f) for _ in range(k)]
        return " ".join(parts)
    if r < 0.85:
        return "".join(rng.choice(zh).format(**f) for _ in range(k))
    parts = [rng.choice(zh if j % 2 else en).format(**f) for j in range(k)]
    return " ".join(parts)


def _call_id(rng: random.Random) -> str:
    return f"call_{rng.getrandbits(96):024x}"


def _weather_result(rng: random.Random, city: str, long: bool) -> dict[str, Any]:
    cond, cond_zh = rng.choice(_CONDITIONS)
    base = rng.randint(-5, 30)
    out: dict[str, Any] = {
        "city": city,
        "current": {
            "temp_c": base,
            "feels_like_c": base - rng.randint(0, 4),
            "condition": cond,
            "condition_zh": cond_zh,
            "humidity": rng.randint(20, 95),
            "wind_kph": rng.randint(0, 40),
        },
    }
    if long:
        days = []
        for d in range(rng.randint(5, 9)):
            dc, dcz = rng.choice(_CONDITIONS)
            days.append(
                {
                    "day": _WEEKDAYS[d % 7][0],
                    "high_c": base + rng.randint(0, 8),
                    "low_c": base - rng.randint(0, 8),
                    "condition": dc,
                    "condition_zh": dcz,
                    "precip_mm": round(rng.random() * 20, 1),
                    "uv_index": rng.randint(0, 11),
                }
            )
        out["forecast"] = days
        out["advisory"] = "Bring an umbrella if rain is forecast. 注意防晒和补水。"
    return out


def _order_result(rng: random.Random, order_id: str, long: bool) -> dict[str, Any]:
    p, pz = rng.choice(_PRODUCTS)
    out: dict[str, Any] = {
        "order_id": order_id,
        "status": rng.choice(("processing", "shipped", "in_transit", "delivered")),
        "items": [{"sku": f"SKU-{rng.randint(1000, 9999)}", "name": p, "name_zh": pz, "qty": 1}],
    }
    if long:
        for _ in range(rng.randint(2, 3)):
            q, qz = rng.choice(_PRODUCTS)
            out["items"].append(
                {
                    "sku": f"SKU-{rng.randint(1000, 9999)}",
                    "name": q,
                    "name_zh": qz,
                    "qty": rng.randint(1, 3),
                    "unit_price": round(rng.uniform(9, 899), 2),
                }
            )
        c, cz = rng.choice(_CITIES)
        out["shipping"] = {
            "carrier": rng.choice(("SF Express", "DHL", "FedEx", "JD Logistics")),
            "tracking_no": f"TRK{rng.getrandbits(40):010d}",
            "address": f"{rng.randint(1, 999)} Example Road, {c} / {cz}",
            "events": [
                {
                    "time": f"2025-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T"
                    f"{rng.randint(10, 23)}:{rng.randint(10, 59)}:00Z",
                    "location": rng.choice(_CITIES)[rng.randint(0, 1)],
                    "description": rng.choice(
                        (
                            "Departed sorting facility",
                            "Arrived at local hub",
                            "Out for delivery",
                            "已揽收",
                            "运输中",
                            "派送中",
                        )
                    ),
                }
                for _ in range(rng.randint(4, 8))
            ],
        }
        out["total"] = round(rng.uniform(50, 2500), 2)
        out["currency"] = rng.choice(("CNY", "USD", "EUR"))
    return out


def _flights_result(
    rng: random.Random, origin: str, dest: str, date: str, long: bool
) -> dict[str, Any]:
    n = rng.randint(4, 7) if long else 1
    flights = []
    for _ in range(n):
        dep_h = rng.randint(6, 22)
        flights.append(
            {
                "flight_no": f"{rng.choice(('MU', 'CA', 'SQ', 'NH', 'LH', 'BA', 'UA'))}"
                f"{rng.randint(100, 999)}",
                "airline": rng.choice(_AIRLINES),
                "depart": f"{date}T{dep_h:02d}:{rng.choice((0, 15, 30, 45)):02d}",
                "duration_min": rng.randint(90, 900),
                "stops": rng.randint(0, 2),
                "price": {"amount": rng.randint(800, 9000), "currency": "CNY"},
                "cabin": rng.choice(("economy", "premium_economy", "business")),
                "seats_left": rng.randint(1, 9),
            }
        )
    return {"origin": origin, "destination": dest, "date": date, "results": flights}


def _tool_call_and_result(rng: random.Random, long_p: float) -> tuple[dict[str, Any], str]:
    """Return one OpenAI ``tool_calls`` entry and the JSON string of its result."""
    name = rng.choice(("get_weather", "get_weather", "lookup_order", "search_flights", "save_memo"))
    long = rng.random() < long_p
    args: dict[str, Any]
    result: dict[str, Any]
    if name == "get_weather":
        city = rng.choice(_CITIES)[rng.randint(0, 1)]
        args = {"city": city, "unit": "celsius", "days": 7 if long else 1}
        result = _weather_result(rng, city, long)
    elif name == "lookup_order":
        oid = f"A{rng.randint(100000, 999999)}"
        args = {"order_id": oid}
        result = _order_result(rng, oid, long)
    elif name == "search_flights":
        o, d = rng.sample(_AIRPORTS, 2)
        date = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        args = {"origin": o, "destination": d, "date": date, "max_results": 5}
        result = _flights_result(rng, o, d, date, long)
    else:
        t = rng.choice(_TOPICS)[rng.randint(0, 1)]
        args = {"text": f"Follow up on {t}", "remind_at": "2025-06-01T09:00:00+08:00"}
        result = {"ok": True, "memo_id": f"memo_{rng.getrandbits(32):08x}"}
    call = {
        "id": _call_id(rng),
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }
    return call, json.dumps(result, ensure_ascii=False)


def _msg_id(seed: int, i: int) -> str:
    return f"msg-{seed}-{i}"


def _user(rng: random.Random) -> str:
    return _text(rng, _USER_EN, _USER_ZH, 1, 4)


def _assistant(rng: random.Random) -> str:
    return _text(rng, _ASSIST_EN, _ASSIST_ZH, 2, 5)


# Probability that a round uses tools, of a second parallel call, of a long result.
_TOOL_ROUND_P = 0.30
_SECOND_CALL_P = 0.20
_LONG_RESULT_P = 0.30


def make_history(n_messages: int, seed: int = 0) -> list[dict[str, Any]]:
    """Generate a deterministic, API-legal OpenAI-format chat history.

    Args:
        n_messages: Exact number of messages to return (including the leading system
            message). ``0`` returns an empty list.
        seed: Random seed; the same ``(n_messages, seed)`` always gives the same history.
            A shorter history with the same seed is a prefix of a longer one except
            possibly for its last round, which may be shortened to fit.

    Returns:
        A list of message dicts with keys ``role``, ``content``, ``id`` and, where
        relevant, ``tool_calls`` (assistant) or ``tool_call_id`` (tool).
    """
    if n_messages <= 0:
        return []
    rng = random.Random(seed)
    out: list[Message] = [{"role": "system", "content": _SYSTEM_PROMPT, "id": _msg_id(seed, 0)}]
    while len(out) < n_messages:
        remaining = n_messages - len(out)
        idx = len(out)
        user = {"role": "user", "content": _user(rng), "id": _msg_id(seed, idx)}
        if remaining == 1:
            out.append(user)
            break
        if rng.random() < _TOOL_ROUND_P:
            n_calls = 2 if rng.random() < _SECOND_CALL_P else 1
            if remaining < 3 + n_calls:
                n_calls = 1
            if remaining >= 3 + n_calls:
                calls_results = [_tool_call_and_result(rng, _LONG_RESULT_P) for _ in range(n_calls)]
                r = rng.random()
                preface: str | None
                if r < 0.5:
                    preface = None
                elif r < 0.8:
                    preface = rng.choice(_PREFACE_EN)
                else:
                    preface = rng.choice(_PREFACE_ZH)
                out.append(user)
                out.append(
                    {
                        "role": "assistant",
                        "content": preface,
                        "tool_calls": [c for c, _ in calls_results],
                        "id": _msg_id(seed, idx + 1),
                    }
                )
                for k, (call, result) in enumerate(calls_results):
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": result,
                            "id": _msg_id(seed, idx + 2 + k),
                        }
                    )
                out.append(
                    {
                        "role": "assistant",
                        "content": _assistant(rng),
                        "id": _msg_id(seed, idx + 2 + n_calls),
                    }
                )
                continue
        out.append(user)
        out.append({"role": "assistant", "content": _assistant(rng), "id": _msg_id(seed, idx + 1)})
    return out


def next_message(i: int, seed: int = 0) -> dict[str, Any]:
    """Return one more plain message to append to a history (steady-state benchmark).

    Even ``i`` gives a ``user`` message, odd ``i`` a plain ``assistant`` message (no
    tool calls), so appending any sequence of these keeps a legal history legal.

    Args:
        i: Position of the new message in the conversation (use ``len(history)``); it
            makes the ``"id"`` (``"next-{seed}-{i}"``) unique and seeds the content.
        seed: Base seed, mixed with ``i``.

    Returns:
        One OpenAI-format message dict with ``role``, ``content`` and ``id``.
    """
    rng = random.Random(seed * 1_000_003 + i * 7_919 + 17)
    if i % 2 == 0:
        return {"role": "user", "content": _user(rng), "id": f"next-{seed}-{i}"}
    return {"role": "assistant", "content": _assistant(rng), "id": f"next-{seed}-{i}"}
