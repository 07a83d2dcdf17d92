"""The tools of the tool-call evaluation: the example agent's weather and memos, and five more.

``TOOLS`` are OpenAI tool schemas: the example agent's ``get_weather``, ``save_memo`` and
``list_memos`` (``contextwright.agent``, reused as they are) plus a forecast, a calendar, unit and
currency conversion and a notes search. ``run_tool`` runs any of them locally on sample data
(no network, no clock, no randomness: the same call gives the same result), so the task
generator can give every earlier call in a history a real result, and large ones where a real
service would return much (hourly forecasts, a day's events, matching notes). The agent's memo
tools keep their memos in a SQLite file, as in the agent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from contextwright.agent import TOOLS as AGENT_TOOLS
from contextwright.agent import MemoBook
from contextwright.agent import run_tool as run_agent_tool

UNITS: Mapping[str, tuple[str, float]] = {
    "km": ("length", 1000.0), "mi": ("length", 1609.344), "m": ("length", 1.0),
    "ft": ("length", 0.3048), "kg": ("mass", 1.0), "lb": ("mass", 0.45359237),
    "l": ("volume", 1.0), "gal": ("volume", 3.785411784),
}
"""Linear units: (quantity, size in the quantity's base unit). ``c`` and ``f`` are affine."""
TEMPERATURE_UNITS = ("c", "f")
UNIT_CODES = (*UNITS, *TEMPERATURE_UNITS)
SAMPLE_RATES: Mapping[str, float] = {"USD": 1.0, "EUR": 0.92, "CNY": 7.24, "JPY": 151.3,
                                     "GBP": 0.79}
"""Sample exchange rates, per US dollar (not market data; labelled so in every result)."""
CONDITIONS = ("sunny", "cloudy", "overcast", "light rain", "showers", "windy", "foggy", "clear")


def _function(name: str, description: str, properties: dict[str, Any],
              required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


EXTRA_TOOLS: list[dict[str, Any]] = [
    _function("get_forecast", "Hourly forecast of a city for the next days (sample data).",
              {"city": {"type": "string"},
               "days": {"type": "integer", "minimum": 1, "maximum": 7}}, ["city", "days"]),
    _function("create_event", "Add an event to the user's calendar.",
              {"title": {"type": "string"},
               "date": {"type": "string", "description": "YYYY-MM-DD"},
               "time": {"type": "string", "description": "HH:MM, 24-hour"},
               "timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris"}},
              ["title", "date", "time", "timezone"]),
    _function("list_events", "The user's calendar events of one day.",
              {"date": {"type": "string", "description": "YYYY-MM-DD"}}, ["date"]),
    _function("convert_units", "Convert a value between units.",
              {"value": {"type": "number"},
               "from_unit": {"type": "string", "enum": list(UNIT_CODES)},
               "to_unit": {"type": "string", "enum": list(UNIT_CODES)}},
              ["value", "from_unit", "to_unit"]),
    _function("convert_currency", "Convert an amount between currencies (sample rates).",
              {"amount": {"type": "number"},
               "from_currency": {"type": "string", "description": "ISO 4217 code"},
               "to_currency": {"type": "string", "description": "ISO 4217 code"}},
              ["amount", "from_currency", "to_currency"]),
    _function("search_notes", "Search the user's notes; the best matches, whole.",
              {"query": {"type": "string"},
               "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5}},
              ["query"]),
]

TOOLS: list[dict[str, Any]] = [*AGENT_TOOLS, *EXTRA_TOOLS]
"""Every tool of the evaluation, the agent's first."""
TOOL_NAMES = tuple(tool["function"]["name"] for tool in TOOLS)

NOTES: tuple[tuple[str, str], ...] = (
    ("Lisbon trip", "Flights booked with TAP, arrive Thursday evening. Hotel in Alfama, three "
     "nights, breakfast included. Want to try the tram 28, Pastéis de Belém, LX Factory on "
     "Sunday. Budget about 900 EUR without flights."),
    ("Kyoto itinerary", "Day 1 Fushimi Inari early, Day 2 Arashiyama bamboo grove and the "
     "monkey park, Day 3 Nishiki market. Rail pass covers the Shinkansen from Tokyo."),
    ("Sourdough", "Starter fed at 1:1:1, bulk ferment 5 hours at 24°C, shape, cold retard "
     "overnight, bake 250°C lid on 20 minutes then 230°C lid off 25 minutes."),
    ("Quarterly review", "Numbers for Q3: revenue up 12%, churn 3.1%, two hires pending. Ask "
     "finance about the Acme invoice before the review on Friday."),
    ("Garden", "Tomatoes in the south bed, basil between them. Water every second morning. "
     "Order mulch and a new hose nozzle."),
    ("Reading list", "The Remains of the Day; Thinking, Fast and Slow; a history of the Silk "
     "Road; the new translation of the Tao Te Ching."),
    ("Car service", "Next service at 60,000 km; tyres rotated last time; wiper blades soon. "
     "Garage on Elm Street opens at 08:00."),
    ("Birthday ideas", "Mum: a pottery class or a good teapot. Dad: the Berlin photo book. "
     "Order before the end of the month."),
)
"""The user's sample notes, for ``search_notes``."""


def run_tool(name: str, arguments: str, memos: MemoBook, user_id: str = "user") -> str:
    """Run one call; the result is JSON text, with an ``error`` field when the call was bad."""
    if name in ("get_weather", "save_memo", "list_memos"):
        return run_agent_tool(name, arguments, user_id, memos)
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return _dumps({"error": "arguments are not JSON"})
    if not isinstance(args, dict):
        return _dumps({"error": "arguments must be an object"})
    runner = _RUNNERS.get(name)
    if runner is None:
        return _dumps({"error": f"unknown tool {name!r}"})
    return _dumps(runner(args))


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _number(seed: str, low: int, high: int) -> int:
    """A stable pseudo-random integer in [low, high] (sample data must not change per run)."""
    digest = hashlib.blake2b(seed.encode(), digest_size=4).digest()
    return low + int.from_bytes(digest, "big") % (high - low + 1)


def _forecast(args: dict[str, Any]) -> dict[str, Any]:
    city, days = str(args.get("city", "")).strip(), args.get("days")
    if not city or not isinstance(days, int) or not 1 <= days <= 7:
        return {"error": "city and days (1-7) are required"}
    hours = [
        {"day": day, "hour": f"{hour:02d}:00",
         "temp_c": _number(f"{city}/{day}/{hour}/t", 4, 30),
         "condition": CONDITIONS[_number(f"{city}/{day}/{hour}/c", 0, len(CONDITIONS) - 1)],
         "precip_pct": _number(f"{city}/{day}/{hour}/p", 0, 90),
         "wind_kmh": _number(f"{city}/{day}/{hour}/w", 2, 40)}
        for day in range(1, days + 1) for hour in range(0, 24, 3)
    ]
    return {"city": city, "days": days, "hourly": hours, "source": "sample data"}


def _create_event(args: dict[str, Any]) -> dict[str, Any]:
    fields = ("title", "date", "time", "timezone")
    missing = [f for f in fields if not str(args.get(f, "")).strip()]
    if missing:
        return {"error": f"missing {', '.join(missing)}"}
    event = {f: str(args[f]) for f in fields}
    return {"created": event, "id": "evt_" + hashlib.blake2b(
        json.dumps(event, sort_keys=True).encode(), digest_size=4).hexdigest()}


_EVENT_TITLES = ("Team stand-up", "1:1 with Mei", "Design review", "Lunch with Tom",
                 "Dentist check-up", "Gym", "Budget sync", "Call with the landlord",
                 "Pick up the dry cleaning", "Yoga", "Project retro", "Parents' evening")


def _list_events(args: dict[str, Any]) -> dict[str, Any]:
    date = str(args.get("date", "")).strip()
    if not date:
        return {"error": "date is required"}
    count = _number(f"{date}/n", 4, 8)
    events = [
        {"id": f"evt_{_number(f'{date}/{i}/id', 10000, 99999)}",
         "title": _EVENT_TITLES[_number(f"{date}/{i}/t", 0, len(_EVENT_TITLES) - 1)],
         "start": f"{8 + i * 2:02d}:{_number(f'{date}/{i}/m', 0, 3) * 15:02d}",
         "duration_min": 30 * _number(f"{date}/{i}/d", 1, 4),
         "location": ("Room 4B", "Online", "Café on 5th", "Home")[_number(f"{date}/{i}/l", 0, 3)],
         "notes": "Bring the printed agenda and the numbers from last week."}
        for i in range(count)
    ]
    return {"date": date, "events": events}


def _convert_units(args: dict[str, Any]) -> dict[str, Any]:
    value, source, target = args.get("value"), args.get("from_unit"), args.get("to_unit")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return {"error": "value must be a number"}
    if source not in UNIT_CODES or target not in UNIT_CODES:
        return {"error": f"units must be among {', '.join(UNIT_CODES)}"}
    if source in TEMPERATURE_UNITS or target in TEMPERATURE_UNITS:
        if source not in TEMPERATURE_UNITS or target not in TEMPERATURE_UNITS:
            return {"error": "cannot convert between a temperature and another quantity"}
        celsius = value if source == "c" else (value - 32) * 5 / 9
        result = celsius if target == "c" else celsius * 9 / 5 + 32
    else:
        (kind_from, size_from), (kind_to, size_to) = UNITS[source], UNITS[target]
        if kind_from != kind_to:
            return {"error": f"cannot convert {kind_from} to {kind_to}"}
        result = value * size_from / size_to
    return {"value": value, "from": source, "to": target, "result": round(result, 4)}


def _convert_currency(args: dict[str, Any]) -> dict[str, Any]:
    amount = args.get("amount")
    source = str(args.get("from_currency", "")).upper()
    target = str(args.get("to_currency", "")).upper()
    if not isinstance(amount, int | float) or isinstance(amount, bool):
        return {"error": "amount must be a number"}
    if source not in SAMPLE_RATES or target not in SAMPLE_RATES:
        return {"error": f"currencies must be among {', '.join(SAMPLE_RATES)}"}
    result = amount / SAMPLE_RATES[source] * SAMPLE_RATES[target]
    return {"amount": amount, "from": source, "to": target, "result": round(result, 2),
            "rates": "sample rates, not market data"}


def _search_notes(args: dict[str, Any]) -> dict[str, Any]:
    query = str(args.get("query", "")).strip()
    limit = args.get("limit", 5)
    if not query or not isinstance(limit, int) or not 1 <= limit <= 10:
        return {"error": "query is required; limit is 1-10"}
    words = {w for w in query.casefold().split() if len(w) > 2}

    def overlap(note: tuple[str, str]) -> int:
        text = f"{note[0]} {note[1]}".casefold()
        return sum(word in text for word in words)

    ranked = sorted(NOTES, key=overlap, reverse=True)[:limit]
    return {"query": query, "notes": [{"title": t, "text": x, "matches": overlap((t, x))}
                                      for t, x in ranked]}


_RUNNERS = {"get_forecast": _forecast, "create_event": _create_event,
            "list_events": _list_events, "convert_units": _convert_units,
            "convert_currency": _convert_currency, "search_notes": _search_notes}
