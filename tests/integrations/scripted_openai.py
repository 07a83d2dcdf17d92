"""A local OpenAI server that answers from a script, for the frameworks' own OpenAI models.

``/v1/responses`` and ``/v1/chat/completions`` (not streamed) answer each request with the next
``Turn`` of the script: text, function calls, a reasoning item, a hosted web search or items
given as they are (a ``shell_call``, a ``computer_call``...), in the API's own shapes, so a
framework records them as it does from the real API. Every request is
checked first by the API rules of ``fakes.provider_server`` and refused with HTTP 400 like the
API refuses it; what those rules do not cover, the real API takes as well: reasoning and hosted
tool items sent back in ``input``, and hosted tools (``{"type": "web_search"}``) in ``tools``.
The calls of tools run on the caller's side (``computer_call``, ``shell_call``...) are held to the
API's pairing: each answered by its output, and no output without its call before it.
Reasoning items sent back are held to the API's pairing by item id: a reasoning item this server
gave must be followed at once by the item that followed it in the output, under that item's id,
and an item sent with that id must come right after its reasoning item.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from fakes.json_server import Answer, LocalJSONServer, json_answer
from fakes.provider_server import Rejected, check_chat, check_responses

CALLER_SIDE_CALLS = {"computer_call": "computer_call_output", "shell_call": "shell_call_output",
                     "local_shell_call": "local_shell_call_output",
                     "apply_patch_call": "apply_patch_call_output",
                     "mcp_approval_request": "mcp_approval_response"}
"""Calls of tools the caller runs (an approval: the caller answers), with their outputs' types."""

ITEMS_THE_API_TAKES_BACK = frozenset(("reasoning", "web_search_call", *CALLER_SIDE_CALLS,
                                      *CALLER_SIDE_CALLS.values()))
"""Output items the Responses API takes back in ``input`` that ``check_responses`` does not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One scripted answer."""

    text: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Function calls (name, arguments), in parallel when several."""
    raw_arguments: str | None = None
    """Every call's arguments text instead of its arguments' JSON (malformed, as models write)."""
    reasoning: str | None = None
    """A reasoning item's summary, first in the output (Responses only)."""
    web_search: str | None = None
    """A hosted web search's query: a ``web_search_call`` before the text (Responses only)."""
    items: tuple[dict[str, Any], ...] = ()
    """Output items as they are, before the text (Responses only)."""


@dataclass(frozen=True, slots=True)
class Received:
    path: str
    body: dict[str, Any]
    error: str | None


class ScriptedOpenAI(LocalJSONServer):
    """``with ScriptedOpenAI(Turn(...), ...) as server:``; ``base_url`` ends in ``/v1``."""

    def __init__(self, *turns: Turn) -> None:
        super().__init__()
        self.turns = list(turns)
        self.received: list[Received] = []
        self._ids = itertools.count(1)
        self._follower: dict[str, str] = {}
        """Reasoning item id -> id of the output item that came right after it."""

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.received if r.error is not None]

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Answer:
        """400 when the API would refuse the request, else the next turn in the API's shape."""
        try:
            if path.endswith("/chat/completions"):
                check_chat(body)
            else:
                check_responses_input(body)
                with self._lock:
                    follower = dict(self._follower)
                check_reasoning_pairs(body.get("input") or [], follower)
        except (Rejected, KeyError, TypeError, ValueError, AttributeError) as exc:
            with self._lock:
                self.received.append(Received(path, body, f"{type(exc).__name__}: {exc}"))
            return json_answer(400, {"error": {"message": str(exc),
                                               "type": "invalid_request_error", "code": None}})
        with self._lock:
            self.received.append(Received(path, body, None))
            turn = self.turns.pop(0) if self.turns else Turn(text="(script exhausted)")
            serial = next(self._ids)
        if path.endswith("/chat/completions"):
            return json_answer(200, _completion(body, turn, serial))
        response = _response(body, turn, serial)
        with self._lock:
            self._follower.update(reasoning_followers(response["output"]))
        return json_answer(200, response)


def check_responses_input(body: dict[str, Any]) -> None:
    """What this server checks of a Responses request, reasoning pairs aside."""
    _check_responses(body)
    check_caller_side_pairs(body.get("input") or [])


def _check_responses(body: dict[str, Any]) -> None:
    """``check_responses`` on what it covers: function tools and the items it knows."""
    checked = dict(body)
    checked["input"] = [item for item in body.get("input") or []
                        if item.get("type") not in ITEMS_THE_API_TAKES_BACK]
    checked["tools"] = [tool for tool in body.get("tools") or [] if tool.get("type") == "function"]
    if not checked["tools"]:
        for key in ("tools", "tool_choice", "parallel_tool_calls"):
            checked.pop(key, None)
    check_responses(checked)


def reasoning_followers(output: list[dict[str, Any]]) -> dict[str, str]:
    """Each reasoning item's id -> the id of the output item right after it."""
    return {item["id"]: after["id"] for item, after in itertools.pairwise(output)
            if item.get("type") == "reasoning"}


def check_reasoning_pairs(items: list[dict[str, Any]], follower: dict[str, str]) -> None:
    """The Responses API's pairing of reasoning items, by id, with the item that followed them.

    The real API answers 400 "Item 'rs_…' of type 'reasoning' was provided without its required
    following item" when the next input item does not carry the follower's id (a function call
    rebuilt without its ``fc_`` id), and "Item 'fc_…' of type 'function_call' was provided
    without its required 'reasoning' item" when an item with that id comes without it.
    """
    reasoning_of = {after: reasoning for reasoning, after in follower.items()}
    for index, item in enumerate(items):
        item_id = item.get("id")
        wanted = follower.get(item_id) if item.get("type") == "reasoning" else None
        after = items[index + 1] if index + 1 < len(items) else {}
        if wanted is not None and after.get("id") != wanted:
            raise Rejected(f"Item '{item_id}' of type 'reasoning' was provided without its "
                           "required following item.")
        reasoning = reasoning_of.get(item_id)
        before = items[index - 1] if index else {}
        if reasoning is not None and before.get("id") != reasoning:
            raise Rejected(f"Item '{item_id}' of type '{item.get('type', 'message')}' was "
                           f"provided without its required 'reasoning' item: '{reasoning}'.")


def check_caller_side_pairs(items: list[dict[str, Any]]) -> None:
    """Each caller-side call answered by its output after it; no output without its call."""
    waiting: dict[str, str] = {}  # call id -> the output type that answers it
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind in CALLER_SIDE_CALLS:
            waiting[_pair_id(item)] = CALLER_SIDE_CALLS[kind]
        elif kind in CALLER_SIDE_CALLS.values():
            if waiting.pop(_pair_id(item), None) != kind:
                raise Rejected(f"input[{index}]: no tool call found for {kind} with call_id "
                               f"{_pair_id(item)}")
            if kind == "shell_call_output":
                _check_shell_output(item.get("output"), f"input[{index}].output")
    if waiting:
        raise Rejected(f"No tool output found for call {next(iter(waiting))}.")


def _pair_id(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == "mcp_approval_request":
        return str(item.get("id"))
    if kind == "mcp_approval_response":
        return str(item.get("approval_request_id"))
    return str(item.get("call_id"))


def _check_shell_output(chunks: object, where: str) -> None:
    if not isinstance(chunks, list):
        raise Rejected(f"{where} must be an array")
    for number, chunk in enumerate(chunks):
        outcome = chunk.get("outcome")
        if not (isinstance(chunk.get("stdout"), str) and isinstance(chunk.get("stderr"), str)
                and isinstance(outcome, dict) and outcome.get("type") in ("exit", "timeout")):
            raise Rejected(f"{where}[{number}] needs stdout, stderr and an outcome")


def _arguments(turn: Turn, arguments: dict[str, Any]) -> str:
    return turn.raw_arguments if turn.raw_arguments is not None else json.dumps(arguments)


def _completion(body: dict[str, Any], turn: Turn, serial: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.calls:
        message["tool_calls"] = [
            {"id": f"call_{serial}_{index}", "type": "function",
             "function": {"name": name, "arguments": _arguments(turn, arguments)}}
            for index, (name, arguments) in enumerate(turn.calls)]
    return {"id": f"chatcmpl-{serial}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if turn.calls else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _response(body: dict[str, Any], turn: Turn, serial: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if turn.reasoning:
        output.append({"type": "reasoning", "id": f"rs_{serial}", "summary": [
            {"type": "summary_text", "text": turn.reasoning}]})
    if turn.web_search:
        output.append({"type": "web_search_call", "id": f"ws_{serial}", "status": "completed",
                       "action": {"type": "search", "query": turn.web_search}})
    output += turn.items
    if turn.text is not None:
        output.append({"type": "message", "id": f"msg_{serial}", "role": "assistant",
                       "status": "completed", "content": [
                           {"type": "output_text", "text": turn.text, "annotations": []}]})
    for index, (name, arguments) in enumerate(turn.calls):
        output.append({"type": "function_call", "id": f"fc_{serial}_{index}",
                       "call_id": f"call_{serial}_{index}", "name": name,
                       "arguments": _arguments(turn, arguments), "status": "completed"})
    return {"id": f"resp_{serial}", "object": "response", "created_at": 0,
            "model": body.get("model", "m"), "status": "completed", "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}
