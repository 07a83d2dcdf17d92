"""A small runnable agent: weather and memos, on any OpenAI-compatible endpoint.

It shows the whole loop contextwright is made for: ``prepare`` builds each call's context from the
session (kept in SQLite across restarts), the model's reply is recorded as the SDK returns it,
tool calls run locally and their results are recorded and fenced, and the turn goes on until
the model answers in text. The tools run here and need no network: ``get_weather`` reads a small
built-in table of sample conditions (a stand-in for a weather service, and labelled as such in its
result), ``save_memo`` and ``list_memos`` keep memos in the same SQLite file as the session.

Needs the ``llm`` extra (the ``openai`` SDK). ``contextwright agent --base-url URL --model M``
runs it in a terminal (``/retry`` there continues a turn whose model call failed); ``run_turn`` is
the loop for other programs. The reply's calls and each result are recorded as they happen, so
after a failure mid-turn ``run_turn(..., text=None)`` continues the turn: no question stored
twice, no tool whose result is recorded run again.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextwright.convert import chat_messages
from contextwright.core.items import parse_message
from contextwright.core.pairing import pair_results
from contextwright.errors import ContextwrightError, InvalidInputError, LLMError
from contextwright.llm.client import check_timeout, make_sdk_client
from contextwright.manager import ContextManager
from contextwright.session.sqlite import SqliteStore
from contextwright.session.store import SessionKey

SYSTEM = ("You are a helpful assistant with two abilities: looking up the weather of a city "
          "(get_weather) and keeping memos for the user (save_memo, list_memos). Call a tool "
          "when the user asks for one of these; answer briefly. Only do what the user asked.")
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The providers' rule for a tool name."""
MAX_STEPS = 8
"""Model calls one user message may take (tool rounds included) before the turn stops."""
DEFAULT_TIMEOUT = 600.0
"""Seconds one attempt of a model call may take unless ``make_agent`` is told otherwise (the
``openai`` SDK's own default: a local model's long answer is not cut off)."""
SDK_RETRIES = 2
"""Extra attempts the SDK makes after a timeout, a connection error, 408/409/429 or a 5xx (its
own default)."""

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city (sample data).",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "save_memo", "description": "Save a short memo for the user.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"]}}},
    {"type": "function", "function": {
        "name": "list_memos", "description": "List the user's memos, oldest first.",
        "parameters": {"type": "object", "properties": {}}}},
]

_SAMPLE_WEATHER = {
    "shanghai": ("cloudy", 25, 60), "上海": ("cloudy", 25, 60),
    "beijing": ("sunny", 28, 35), "北京": ("sunny", 28, 35),
    "hangzhou": ("light rain", 21, 85), "杭州": ("light rain", 21, 85),
    "london": ("overcast", 14, 78), "paris": ("clear", 18, 55),
    "tokyo": ("sunny", 19, 50), "东京": ("sunny", 19, 50),
    "berlin": ("windy", 11, 70), "柏林": ("windy", 11, 70),
    "shenzhen": ("thunderstorms", 29, 88), "深圳": ("thunderstorms", 29, 88),
    "chengdu": ("foggy", 17, 92), "成都": ("foggy", 17, 92),
    "new york": ("snow", -2, 80), "纽约": ("snow", -2, 80),
}


@dataclass
class MemoBook:
    """Memos per user, in a table of the agent's SQLite file."""

    path: Path
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS agent_memos (user_id TEXT NOT NULL, "
                       "seq INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def save(self, user_id: str, text: str) -> int:
        """Store a memo; returns how many the user has."""
        with self._lock, self._connect() as db:
            db.execute("INSERT INTO agent_memos (user_id, text) VALUES (?, ?)", (user_id, text))
            (count,) = db.execute("SELECT COUNT(*) FROM agent_memos WHERE user_id = ?",
                                  (user_id,)).fetchone()
        return int(count)

    def list(self, user_id: str) -> list[str]:
        """The user's memos, oldest first."""
        with self._lock, self._connect() as db:
            rows = db.execute("SELECT text FROM agent_memos WHERE user_id = ? ORDER BY seq",
                              (user_id,)).fetchall()
        return [str(text) for (text,) in rows]


def run_tool(name: str, arguments: str, user_id: str, memos: MemoBook) -> str:
    """Run one tool call; the result is JSON text (an ``error`` field when it failed)."""
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return json.dumps({"error": "arguments are not JSON"})
    if not isinstance(args, dict):
        return json.dumps({"error": "arguments must be an object"})
    if name == "get_weather":
        city = _text_argument(args, "city")
        if city is None:
            return json.dumps({"error": "city must be a string"})
        found = _SAMPLE_WEATHER.get(city.lower())
        if found is None:
            return json.dumps({"error": f"no sample data for {city!r}", "city": city},
                              ensure_ascii=False)
        weather, temp, humidity = found
        return json.dumps({"city": city, "weather": weather, "temp_c": temp,
                           "humidity": humidity, "source": "sample data"}, ensure_ascii=False)
    if name == "save_memo":
        text = _text_argument(args, "text")
        if text is None:
            return json.dumps({"error": "text must be a string"})
        if not text:
            return json.dumps({"error": "empty memo"})
        return json.dumps({"saved": text, "memos": memos.save(user_id, text)},
                          ensure_ascii=False)
    if name == "list_memos":
        return json.dumps({"memos": memos.list(user_id)}, ensure_ascii=False)
    return json.dumps({"error": f"unknown tool {name!r}"})


def _text_argument(args: dict[str, Any], name: str) -> str | None:
    """The string argument ``name`` stripped (``""`` when absent); None when it is not text.

    ``str()`` of anything else would pass its Python repr for the user's words: a ``null``
    memo saved as "None", a list as "['milk', 'eggs']".
    """
    value = args.get(name, "")
    return value.strip() if isinstance(value, str) else None


@dataclass
class Agent:
    """The agent: a session store and memo book in one SQLite file, and a chat client."""

    client: Any
    """An ``openai.OpenAI`` client (any OpenAI-compatible endpoint)."""
    model: str
    path: Path
    owns_client: bool = False
    """Whether ``close`` closes ``client`` too: true for the client ``make_agent`` opened,
    false for one the caller made and may still use."""
    store: SqliteStore = field(init=False)
    manager: ContextManager = field(init=False)
    memos: MemoBook = field(init=False)

    def __post_init__(self) -> None:
        self.store = SqliteStore(self.path)
        self.manager = ContextManager(store=self.store, system=SYSTEM)
        self.memos = MemoBook(self.path)

    def run_turn(self, user_id: str, session_id: str, text: str | None,
                 on_tool: Callable[[str, str, str], None] | None = None) -> str:
        """Answer one user message, running tool calls until the model replies in text.

        The answer is the reply's words as the session recorded them: a refusal's included.
        ``text=None`` continues the session's pending turn instead (after a model call or a
        tool that failed) without storing the user's message again: the calls of its last
        reply that have no recorded result run, those that have one do not run again.

        Raises:
            InvalidInputError: ``text`` is blank, or it is None and the session has no turn
                to continue (it is empty, or its last turn has its answer).
            LLMError: a model call failed; what the turn did so far stays recorded.
        """
        if text is None:
            self._run_pending_calls(user_id, session_id, on_tool)
        elif not text.strip():
            raise InvalidInputError("say something")
        prepared = self.manager.prepare(user_id, session_id, text, tools=TOOLS)
        for step in range(MAX_STEPS):
            message = self._complete(prepared.to_request("openai", model=self.model))
            if not message.tool_calls:
                self.manager.record(user_id, session_id, assistant=message)
                return _answer_text(message)
            self._run_reply(user_id, session_id, message, step, on_tool)
            prepared = self.manager.prepare(user_id, session_id, None, tools=TOOLS)
        return f"(stopped after {MAX_STEPS} model calls without a final answer)"

    def _run_reply(self, user_id: str, session_id: str, message: Any, step: int,
                   on_tool: Callable[[str, str, str], None] | None) -> None:
        """Record a reply with tool calls, then run its calls, recording each result at once.

        A failure while the calls run (a tool, the store) leaves the reply and the results so
        far recorded, so continuing the turn runs only the calls that have none: a tool with
        side effects (a refund) is not run twice.
        """
        (assistant,) = chat_messages(message, "assistant")
        calls = assistant["tool_calls"]
        unique_call_ids(calls, step)
        not_run = [_unrunnable_result(call) for call in calls]
        # The whole reply is checked before any tool runs: a tool with side effects must
        # not run for a turn the session then refuses to store.
        parse_message(assistant, "reply")
        # The results of calls that cannot run go with the reply: their arguments were replaced
        # by "{}", and a resume must not run them with that.
        refused = [{"tool_call_id": call["id"], "content": result}
                   for call, result in zip(calls, not_run, strict=True) if result is not None]
        self.manager.record(user_id, session_id, assistant=assistant, tool_results=refused)
        for call, result in zip(calls, not_run, strict=True):
            if result is None:
                self._run_call(user_id, session_id, call, on_tool)
            elif on_tool is not None:
                on_tool(call["function"]["name"], call["function"]["arguments"], result)

    def _run_pending_calls(self, user_id: str, session_id: str,
                           on_tool: Callable[[str, str, str], None] | None) -> None:
        """Run the calls of the session's pending turn that have no recorded result.

        ``InvalidInputError`` when there is no turn to continue.
        """
        tail = self._turn_tail(SessionKey(user_id=user_id, session_id=session_id))
        if not tail:
            raise InvalidInputError("no turn to continue: the session is empty; pass text")
        head = tail[0]
        if head.get("role") == "user":
            return  # the model call after the question failed: it is asked again
        if head.get("role") != "assistant" or not head.get("tool_calls"):
            raise InvalidInputError("no turn to continue: the session's last turn has its "
                                    "answer; pass text")
        calls = head["tool_calls"]
        answered = [message.get("tool_call_id") for message in tail[1:]]
        pending = set(pair_results([call["id"] for call in calls], answered).unanswered)
        for call in calls:
            if call["id"] in pending:
                self._run_call(user_id, session_id, call, on_tool)

    def _turn_tail(self, key: SessionKey) -> list[Mapping[str, Any]]:
        """The session's newest message and the tool results after it, oldest first.

        Read backwards in growing steps: a reply's results may outnumber any fixed window.
        """
        last = 16
        while True:
            read = [stored.message for stored in self.store.read(key, last=last)]
            start = len(read)
            while start > 0 and read[start - 1].get("role") == "tool":
                start -= 1
            if start > 0 or len(read) < last:
                return read[max(start - 1, 0):]
            last *= 2

    def _run_call(self, user_id: str, session_id: str, call: dict[str, Any],
                  on_tool: Callable[[str, str, str], None] | None) -> None:
        """Run one call and record its result before anything else can fail."""
        function = call["function"]
        output = run_tool(function["name"], function["arguments"], user_id, self.memos)
        self.manager.record(user_id, session_id,
                            tool_results=[{"tool_call_id": call["id"], "content": output}])
        if on_tool is not None:
            on_tool(function["name"], function["arguments"], output)

    def _complete(self, body: dict[str, Any]) -> Any:
        """The model's reply message.

        A failed call is an ``LLMError``; the turn so far stays recorded, so ``run_turn`` with
        ``text=None`` continues it.
        """
        try:
            completion = self.client.chat.completions.create(**body)
        except Exception as exc:  # the SDK's errors (connection, status) have no common base here
            raise _call_failure(exc) from exc
        return _reply_message(completion)

    def close(self) -> None:
        """Finish pending summaries and close the store (and the client, if the agent owns it)."""
        try:
            self.manager.close()
        finally:
            if self.owns_client:
                self.client.close()


RETRY = "/retry"
"""What the REPL takes as "continue the turn that failed" (``run_turn`` with ``text=None``)."""


def repl(agent: Agent, user_id: str, session_id: str,
         read: Callable[[str], str] = input, write: Callable[[str], None] = print,
         warn: Callable[[str], None] | None = None) -> ContextwrightError | None:
    """Answer lines read from the terminal until end of input, showing each tool call.

    A turn that fails (a model call, a reply the session cannot store) is one line on ``warn``
    (standard error by default) and the REPL goes on. Its question is stored, so ``/retry``
    continues the turn rather than the question being typed (and stored) again; the same is
    said at start-up of a session whose last question has no answer.

    Returns the error of the last turn when it failed and left its question unanswered, else
    None: a program piping questions in can tell that the last one got no answer.
    """
    warn = warn or _to_stderr
    key = SessionKey(user_id=user_id, session_id=session_id)
    if _has_pending_turn(agent, key):
        write(f"(the last question of this session has no answer yet: {RETRY} continues it)")
    unanswered: ContextwrightError | None = None
    while True:
        try:
            text = read("you> ").strip()
        except EOFError:
            return unanswered
        if not text:
            continue
        try:
            reply = agent.run_turn(user_id, session_id, None if text == RETRY else text,
                                   on_tool=lambda name, arguments, _: write(
                                       f"  [tool] {name}({arguments})"))
        except (LLMError, InvalidInputError) as exc:
            pending = _has_pending_turn(agent, key)
            warn(_failure_line(exc, pending))
            unanswered = exc if pending else None
            continue
        unanswered = None
        write(f"agent> {reply}")


def _has_pending_turn(agent: Agent, key: SessionKey) -> bool:
    """Whether the session's last question has no answer (what ``run_turn(text=None)`` takes).

    Its newest message is the question, or a reply with tool calls (their results recorded or
    not): the model call that would answer it failed, or never came.
    """
    tail = agent._turn_tail(key)
    if not tail:
        return False
    head = tail[0]
    return head.get("role") == "user" or (head.get("role") == "assistant"
                                          and bool(head.get("tool_calls")))


def _failure_line(exc: ContextwrightError, pending: bool) -> str:
    """A failed turn on one line: the error, and how to go on when its question is stored."""
    line = f"error: {type(exc).__name__}: {' '.join(str(exc).split())}"
    if pending:
        line += f" (the question is stored: {RETRY} continues the turn)"
    return line


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _call_failure(exc: Exception) -> LLMError:
    """The ``LLMError`` for an exception of the model call, its ``kind`` saying what failed."""
    status = getattr(exc, "status_code", None)
    if status:
        kind = "status"
    elif _is_timeout(exc):
        return LLMError(f"the model call timed out: {type(exc).__name__}: {exc}", kind="timeout")
    elif isinstance(exc, ValueError):  # a 200 whose body is not JSON: the decoder's error
        kind = "response"
    else:
        kind = "connection"
    return LLMError(f"the model call failed: {type(exc).__name__}: {exc}", kind=kind,
                    status_code=status)


def _is_timeout(exc: Exception) -> bool:
    """Whether ``exc`` is the SDK's timeout (the agent's client may be any SDK-like object)."""
    try:
        import openai
    except ImportError:
        return False
    return isinstance(exc, openai.APITimeoutError)


def _reply_message(completion: object) -> Any:
    """The first choice's message, or ``LLMError`` when the reply is not a completion.

    The SDK builds its response objects without validating them, so a server (or a proxy in
    front of it) that answers 200 with the wrong shape yields strings, lists or None where
    objects belong: each step is checked before the loop reads it.
    """
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise LLMError("the model's reply has no list of choices", kind="response")
    if not choices:
        raise LLMError("the model returned no choices", kind="empty")
    message = getattr(choices[0], "message", None)
    if not (hasattr(message, "content") and hasattr(message, "tool_calls")):
        raise LLMError("the model's reply has no message", kind="response")
    return message


def _answer_text(message: Any) -> str:
    """The words of a reply without calls, as the session records them (a refusal's too)."""
    recorded = chat_messages(message, "assistant")
    return str(recorded[0].get("content") or "") if recorded else ""


def unique_call_ids(calls: list[dict[str, Any]], step: int) -> None:
    """Give each call with an empty id, or one an earlier call of the reply has, its own id.

    Some OpenAI-compatible servers send ``""``, or the same ``"call_0"``, for every parallel
    call: no result could then say which call it answers, and the session refuses the reply.
    The new id (``call_<step>_<index>``) is set on the call, so its result carries it too.
    """
    taken = {call.get("id") for call in calls}
    seen: set[str] = set()
    for index, call in enumerate(calls):
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            call_id = f"call_{step}_{index}"
            while call_id in taken or call_id in seen:
                call_id += "_"
            call["id"] = call_id
        seen.add(call_id)


def _unrunnable_result(call: dict[str, Any]) -> str | None:
    """The result of a call the session could not store, which is not run (None: it can run).

    Its arguments become ``{}`` (and a name the providers refuse ``invalid_tool_name``) and
    its result says why, so the turn is recorded whole and the model can try again.
    """
    try:
        parse_message({"role": "assistant", "content": None, "tool_calls": [call]}, "call")
    except InvalidInputError as exc:
        function = call["function"]
        function["arguments"] = "{}"
        if not TOOL_NAME.fullmatch(str(function.get("name", ""))):
            function["name"] = "invalid_tool_name"
        return json.dumps({"error": f"the call was not run: {exc}"}, ensure_ascii=False)
    return None


def make_agent(base_url: str, model: str, path: str | Path, api_key: str = "none", *,
               timeout: float = DEFAULT_TIMEOUT) -> Agent:
    """An agent on the endpoint at ``base_url`` (needs the ``llm`` extra).

    ``timeout``: seconds each attempt of a model call may take (the SDK retries a timed-out
    attempt twice); a call that runs out of them is an ``LLMError`` of kind ``timeout``.

    Raises:
        LLMError: ``base_url`` is not an http(s) URL with a host, or ``timeout`` is not a
            positive number of seconds (kind ``config``), checked before anything is stored
            or sent.
    """
    try:
        import openai  # noqa: F401  (only to say which extra is missing)
    except ImportError as exc:
        raise InvalidInputError("the agent needs the openai package: pip install "
                                "'contextwright[llm]'") from exc
    seconds = check_timeout(timeout)
    client = make_sdk_client(base_url, api_key, seconds, SDK_RETRIES)
    try:
        return Agent(client=client, model=model, path=Path(path), owns_client=True)
    except BaseException:  # the store could not be opened: nothing else will close the client
        client.close()
        raise
