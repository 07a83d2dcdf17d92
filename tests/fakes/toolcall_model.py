"""A deterministic fake model for the tool-call evaluation, served over chat completions.

It is not a language model and its accuracy says nothing about one: it is a reader with a few
plain rules, so that what it answers depends only on what the request it receives contains.
It never sees a task id, a configuration or an expected answer. Its rules:

1. **Protocol.** A request that breaks the chat-completions rules (``provider_server.check_chat``)
   is refused with HTTP 400, as the API would.
2. **Window.** A request whose messages and tool schemas exceed ``window`` tokens (o200k:
   content, call arguments, 4 per message, the tools' JSON) is refused with HTTP 400 and
   ``code: context_length_exceeded``, OpenAI's refusal.
3. **Rules come from system messages only:** today's date (``Today is YYYY-MM-DD``), the time
   zone (``time zone is X``), "city names are passed to tools in English", "a reminder ... is a
   calendar event: call create_event". Without them it passes cities as written, files
   reminders with ``save_memo``, cannot resolve "tomorrow" and uses ``UTC``.
4. **The request** is the last user message; what follows it is this turn. Keywords (English and
   Chinese) pick the intent: note down after a tool result, remind, forecast, notes, convert,
   weather. A city, amount, date or time it needs and the request does not hold is looked up in
   the conversation, newest message first: the newest message naming the thing referred to
   (``my sister``, ``flight``, ``the Acme invoice``); for a city, failing that, the newest city
   mentioned anywhere (a guess a real model makes too). Nothing found: it answers in text.
5. It calls only tools the request offers.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextwright.tokens import get_tokenizer
from fakes.openai_server import Reply
from fakes.provider_server import Rejected, check_chat

WINDOW = 8192
CITIES = (("Shanghai", "上海"), ("Beijing", "北京"), ("Hangzhou", "杭州"), ("Shenzhen", "深圳"),
          ("Chengdu", "成都"), ("Tokyo", "东京"), ("Berlin", "柏林"), ("London", "伦敦"),
          ("Paris", "巴黎"), ("New York", "纽约"))
_CITY = re.compile("|".join(re.escape(n) for pair in CITIES for n in pair))
_ENGLISH = {name: english for english, chinese in CITIES for name in (english, chinese)}
_CURRENCY = re.compile(r"US dollars|dollars|USD|\$|euros?|EUR|€|日元|yen|JPY|人民币|元|yuan|CNY|"
                       r"pounds|GBP|£")
_CODES = {"us dollars": "USD", "dollars": "USD", "usd": "USD", "$": "USD", "euro": "EUR",
          "euros": "EUR", "eur": "EUR", "€": "EUR", "日元": "JPY", "yen": "JPY", "jpy": "JPY",
          "人民币": "CNY", "元": "CNY", "yuan": "CNY", "cny": "CNY", "pounds": "GBP",
          "gbp": "GBP", "£": "GBP"}
_UNIT = re.compile(r"miles?|kilomet(?:re|er)s?|km|°\s?F|fahrenheit|celsius|°\s?C", re.I)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_RELATIVE = (("the day after tomorrow", 2), ("in three days", 3), ("tomorrow", 1),
             ("后天", 2), ("三天后", 3), ("明天", 1))
_CHINESE_DIGITS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}


@dataclass(frozen=True, slots=True)
class Reading:
    """What the fake gathered from one request."""

    rules: str
    request: str
    turn: list[dict[str, Any]]
    conversation: list[str]
    tools: frozenset[str]


class ReadingModel:
    """``model(body)`` is the server's reply to one chat-completions request."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.count = get_tokenizer("o200k_base").count
        self.calls = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        try:
            check_chat(body)
        except (Rejected, KeyError, TypeError, ValueError) as exc:
            return _error(400, f"{type(exc).__name__}: {exc}", "invalid_request_error")
        tokens = self.prompt_tokens(body)
        if tokens > self.window:
            return _error(400, f"This model's maximum context length is {self.window} tokens. "
                          f"However, your messages resulted in {tokens} tokens.",
                          "context_length_exceeded")
        calls = decide(read(body))
        return self._reply(body.get("model", "fake"), calls)

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        total = 3
        for message in body["messages"]:
            total += 4 + self.count(_text(message.get("content")))
            for call in message.get("tool_calls") or []:
                total += self.count(call["function"]["name"] + call["function"]["arguments"])
        return total + sum(self.count(json.dumps(t, ensure_ascii=False))
                           for t in body.get("tools") or [])

    def _reply(self, model: str, calls: list[tuple[str, dict[str, Any]]]) -> Reply:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if calls:
            message["tool_calls"] = []
            for name, arguments in calls:
                self.calls += 1
                message["tool_calls"].append({
                    "id": f"call_fake_{self.calls}", "type": "function",
                    "function": {"name": name,
                                 "arguments": json.dumps(arguments, ensure_ascii=False)}})
        else:
            message["content"] = "Could you tell me a little more?"
        completion = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                      "model": model, "choices": [{
                          "index": 0, "message": message,
                          "finish_reason": "tool_calls" if calls else "stop"}],
                      "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        return Reply(raw_body=json.dumps(completion, ensure_ascii=False).encode())


def _error(status: int, message: str, code: str) -> Reply:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": code}}
    return Reply(status=status, raw_body=json.dumps(body).encode())


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def read(body: dict[str, Any]) -> Reading:
    messages = body["messages"]
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    rules = "\n".join(_text(m.get("content")) for m in messages if m["role"] == "system")
    earlier = [m for m in messages[:max(last_user, 0)] if m["role"] != "system"]
    conversation = [_text(m.get("content")) for m in reversed(earlier)]
    conversation += [c["function"]["arguments"] for m in reversed(earlier)
                     for c in m.get("tool_calls") or []]
    return Reading(rules=rules,
                   request=_text(messages[last_user].get("content")) if last_user >= 0 else "",
                   turn=list(messages[last_user + 1:]), conversation=conversation,
                   tools=frozenset(t["function"]["name"] for t in body.get("tools") or []))


Calls = list[tuple[str, dict[str, Any]]]


def decide(r: Reading) -> Calls:
    """The calls the fake makes, by the rules of the module docstring."""
    text = r.request.casefold()
    if any(t.get("role") == "tool" for t in r.turn) and _asks(text, "note it down", "记下来"):
        calls = _memo_of_result(r)
    elif _asks(text, "remind", "calendar", "提醒", "日历"):
        calls = _reminder(r)
    elif _asks(text, "forecast", "预报"):
        calls = _forecast(r)
    elif _asks(text, "notes about", "笔记"):
        calls = [("search_notes", {"query": r.request.split("notes about", 1)[-1].strip(" .?")})]
    elif _asks(text, "convert", "how much", "how many", "what is that in", "换"):
        calls = _conversion(r)
    elif _asks(text, "weather", "raining", "天气"):
        calls = _weather(r)
    else:
        calls = []
    return [c for c in calls if c[0] in r.tools]


def _asks(text: str, *words: str) -> bool:
    return any(word in text for word in words)


def _in_english(r: Reading) -> bool:
    return "city names are passed to tools in english" in r.rules.casefold()


def _city(name: str, r: Reading) -> str:
    return _ENGLISH[name] if _in_english(r) else name


def _newest(conversation: Sequence[str], pattern: re.Pattern[str], *needles: str) -> str | None:
    """The last match of ``pattern`` in the newest message holding every needle."""
    for text in conversation:
        folded = text.casefold()
        if all(n.casefold() in folded for n in needles):
            found = pattern.findall(text)
            if found:
                last = found[-1]
                return last if isinstance(last, str) else " ".join(last)
    return None


def _weather(r: Reading) -> Calls:
    named = list(dict.fromkeys(_CITY.findall(r.request)))
    if named:
        return [("get_weather", {"city": _city(name, r)}) for name in named]
    relation = re.search(r"where my ([a-z ]+?) lives?\b", r.request, re.I)
    city = None
    if relation:
        city = _newest(r.conversation, _CITY, f"my {relation.group(1)}")
    city = city or _newest(r.conversation, _CITY)
    return [("get_weather", {"city": _city(city, r)})] if city else []


def _forecast(r: Reading) -> Calls:
    named = _CITY.findall(r.request)
    days = re.search(r"(\d+)[- ]day|next (\d+) days", r.request)
    chinese = re.search(r"未来([一两二三四五六七])天", r.request)
    count = (int(days.group(1) or days.group(2)) if days
             else _CHINESE_DIGITS[chinese.group(1)] if chinese else None)
    if not named or count is None:
        return []
    return [("get_forecast", {"city": _city(named[0], r), "days": count})]


def _field(text: str, name: str) -> str | None:
    found = re.search(rf'"?{name}"?\s*:\s*"?(-?[^",;\n]+?)"?\s*(?:[,;\n}}]|$)', text)
    return found.group(1).strip() if found else None


def _memo_of_result(r: Reading) -> Calls:
    result = next(_text(t.get("content")) for t in reversed(r.turn) if t.get("role") == "tool")
    city, weather, temp = (_field(result, k) for k in ("city", "weather", "temp_c"))
    if not (city and weather and temp):
        return []
    if '"<city>: <weather>, <temp>°c"' in r.rules.casefold():
        text = f"{city}: {weather}, {temp}°C"
    else:
        text = f"Weather in {city}: {weather}, {temp} degrees"
    return [("save_memo", {"text": text})]


def _today(r: Reading) -> dt.date | None:
    found = re.search(r"Today is (\d{4}-\d{2}-\d{2})", r.rules)
    return dt.date.fromisoformat(found.group(1)) if found else None


def _reminder(r: Reading) -> Calls:
    if "call create_event" not in r.rules:
        return [("save_memo", {"text": r.request})]
    zone = re.search(r"time zone is ([A-Za-z_]+/[A-Za-z_]+)", r.rules)
    timezone = zone.group(1) if zone else "UTC"
    if "flight" in r.request.casefold():
        date = _newest(r.conversation, re.compile(r"\d{4}-\d{2}-\d{2}"), "flight")
        clock = _newest(r.conversation, re.compile(r"\b\d{2}:\d{2}\b"), "flight")
        if not (date and clock):
            return []
        return [("create_event", {"title": "Flight", "date": date, "time": clock,
                                  "timezone": timezone})]
    english = re.search(r"remind me to (.+?) (the day after tomorrow|in three days|tomorrow) "
                        r"at (\d{2}:\d{2})", r.request, re.I)
    chinese = re.search(r"提醒我(后天|三天后|明天)(\d{2}:\d{2})(.+?)。", r.request)
    if english:
        title, word, clock = english.groups()
    elif chinese:
        word, clock, title = chinese.groups()
    else:
        return []
    today = _today(r)
    days = dict(_RELATIVE)[word]
    date = (today + dt.timedelta(days=days)).isoformat() if today else word
    return [("create_event", {"title": title, "date": date, "time": clock,
                              "timezone": timezone})]


def _conversion(r: Reading) -> Calls:
    units = list(_UNIT.finditer(r.request))
    value = _NUMBER.search(r.request)
    if len(units) >= 2 and value is not None:
        # The unit right after the number is the one converted from.
        source = next((u for u in units if u.start() >= value.end()), units[0])
        target = next(u for u in units if u is not source)
        return [("convert_units", {"value": _number(value.group()),
                                   "from_unit": _unit_code(source.group()),
                                   "to_unit": _unit_code(target.group())})]
    codes = list(dict.fromkeys(_CODES[m.casefold()] for m in _CURRENCY.findall(r.request)))
    invoice = re.search(r"the (.+?) invoice", r.request, re.I)
    if invoice and codes:
        stated = _newest(r.conversation, re.compile(r"([\d,]+(?:\.\d+)?) (USD|EUR|CNY|JPY|GBP)"),
                         invoice.group(1), "invoice")
        if stated is None:
            return []
        amount, source = stated.split(" ")
        return [("convert_currency", {"amount": _number(amount), "from_currency": source,
                                      "to_currency": codes[0]})]
    amount = _NUMBER.search(r.request)
    if amount is None or len(codes) < 2:
        return []
    return [("convert_currency", {"amount": _number(amount.group()), "from_currency": codes[0],
                                  "to_currency": target}) for target in codes[1:]]


def _unit_code(word: str) -> str:
    folded = word.casefold().replace(" ", "")
    if folded.startswith("mile"):
        return "mi"
    if folded.startswith("kilomet") or folded == "km":
        return "km"
    return "f" if folded in ("°f", "fahrenheit") else "c"


def _number(text: str) -> int | float:
    value = float(text.replace(",", ""))
    return int(value) if value.is_integer() else value
