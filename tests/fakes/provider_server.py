"""A local HTTP server that enforces the OpenAI and Anthropic APIs' documented request rules.

It listens on 127.0.0.1 (an ephemeral port) and answers ``POST /v1/chat/completions``,
``POST /v1/responses`` and ``POST /v1/messages`` the way the real APIs do for a valid request
(a minimal completion, response or message), and with HTTP 400 and the rule that was broken for
an invalid one, so tests can send contextwright's renderings through the official SDKs and see
them accepted. The checks are written from the APIs' documentation, independently of
contextwright's own validator. Every request is recorded (path and JSON body).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Rejected(Exception):
    """The request breaks one of the API's rules (the message says which)."""


@dataclass(frozen=True, slots=True)
class Received:
    """One request the server received."""

    path: str
    body: dict[str, Any]
    status: int
    error: str | None


# --- OpenAI Chat Completions -------------------------------------------------------------


def check_chat(body: dict[str, Any]) -> None:
    _require_model(body)
    _check_cache_key(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages must be a non-empty array")
    tools = body.get("tools") or []
    _check_chat_tools(tools)
    if not tools and ("tool_choice" in body or "parallel_tool_calls" in body):
        raise Rejected("tool_choice and parallel_tool_calls are only allowed when tools are "
                       "specified")
    pending: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise Rejected(f"messages[{index}].role is invalid")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                raise Rejected(f"messages[{index}]: messages with role 'tool' must be a response "
                               "to a preceding message with 'tool_calls'")
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            raise Rejected("an assistant message with 'tool_calls' must be followed by tool "
                           "messages responding to each 'tool_call_id'")
        if role in ("system", "developer", "user") and message.get("content") is None:
            raise Rejected(f"messages[{index}].content is required")
        calls = message.get("tool_calls") or []
        if calls and role != "assistant":
            raise Rejected(f"messages[{index}]: only assistant messages have tool_calls")
        for call in calls:
            json.loads(call["function"]["arguments"])
            pending.append(call["id"])
    if pending:
        raise Rejected("an assistant message with 'tool_calls' must be followed by tool messages")


def _check_chat_tools(tools: list[dict[str, Any]]) -> None:
    for index, tool in enumerate(tools):
        function = tool.get("function") or {}
        if tool.get("type") != "function" or not TOOL_NAME.match(function.get("name", "")):
            raise Rejected(f"tools[{index}] is not a function with a valid name")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise Rejected(f"tools[{index}].function.parameters must be an object")


# --- OpenAI Responses --------------------------------------------------------------------


def check_responses(body: dict[str, Any]) -> None:
    _require_model(body)
    _check_cache_key(body)
    items = body.get("input")
    if not isinstance(items, list) or not items:
        raise Rejected("input must be a non-empty array")
    tools = body.get("tools") or []
    for index, tool in enumerate(tools):
        if tool.get("type") != "function" or not TOOL_NAME.match(tool.get("name", "")):
            raise Rejected(f"tools[{index}] is not a function with a valid name")
        if (tool.get("parameters") or {}).get("type") != "object":
            raise Rejected(f"tools[{index}].parameters must be an object schema")
    if not tools and ("tool_choice" in body or "parallel_tool_calls" in body):
        raise Rejected("tool_choice needs tools")
    calls: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            json.loads(item["arguments"])
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise Rejected(f"input[{index}]: no tool call found for function call output "
                               f"with call_id {item.get('call_id')}")
        elif kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise Rejected(f"input[{index}].role is invalid")
            if not isinstance(item.get("content"), str | list):
                raise Rejected(f"input[{index}].content is required")
        else:
            raise Rejected(f"input[{index}].type {kind!r} is not supported here")


# --- Anthropic Messages ------------------------------------------------------------------


def check_messages(body: dict[str, Any]) -> None:
    _require_model(body)
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        raise Rejected("max_tokens: field required")
    if "system" in body:
        _check_system(body["system"])
    tools = body.get("tools") or []
    _check_anthropic_tools(tools)
    _check_cache_control(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise Rejected("messages: first message must use the \"user\" role")
    previous_calls: list[str] = []
    for index, message in enumerate(messages):
        blocks = _blocks(message, index)
        for block in blocks:
            _check_block(block, index, bool(tools))
        if message["role"] == "user":
            results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
            if previous_calls and (blocks[: len(results)] != [b for b in blocks
                                                              if b["type"] == "tool_result"]
                                   or sorted(results) != sorted(previous_calls)):
                raise Rejected(f"messages.{index}: tool_use ids were found without tool_result "
                               "blocks immediately after")
            if results and not previous_calls:
                raise Rejected(f"messages.{index}: unexpected tool_use_id found in tool_result "
                               "blocks")
            previous_calls = []
        else:
            previous_calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
    if previous_calls:
        raise Rejected("tool_use ids were found without tool_result blocks immediately after")
    last = messages[-1]
    if last["role"] == "assistant":
        tail = _blocks(last, len(messages) - 1)[-1]
        if tail["type"] == "text" and tail["text"] != tail["text"].rstrip():
            raise Rejected("final assistant content cannot end with trailing whitespace")


def _check_system(system: object) -> None:
    """A non-blank string, or a list of non-blank text blocks."""
    if isinstance(system, str) and system.strip():
        return
    if isinstance(system, list) and system and all(
            isinstance(b, dict) and b.get("type") == "text" and str(b.get("text", "")).strip()
            for b in system):
        return
    raise Rejected("system: text content blocks must be non-empty")


def _check_cache_control(body: dict[str, Any]) -> None:
    """At most 4 breakpoints, each ``{"type": "ephemeral"}`` (with an optional ttl)."""
    system = body.get("system")
    blocks = [*(body.get("tools") or []), *(system if isinstance(system, list) else []),
              *(b for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                for b in m["content"])]
    marks = [b["cache_control"] for b in blocks if isinstance(b, dict) and "cache_control" in b]
    if len(marks) > 4:
        raise Rejected(f"A maximum of 4 blocks with cache_control may be provided. Found "
                       f"{len(marks)}.")
    for mark in marks:
        if not isinstance(mark, dict) or mark.get("type") != "ephemeral" or set(mark) - {
                "type", "ttl"} or mark.get("ttl", "5m") not in ("5m", "1h"):
            raise Rejected("cache_control: Input tag does not match 'ephemeral'")


def _check_anthropic_tools(tools: list[dict[str, Any]]) -> None:
    for index, tool in enumerate(tools):
        if not TOOL_NAME.match(tool.get("name", "")):
            raise Rejected(f"tools.{index}.name: String should match pattern")
        if (tool.get("input_schema") or {}).get("type") != "object":
            raise Rejected(f"tools.{index}.custom.input_schema.type: Field required")


def _blocks(message: dict[str, Any], index: int) -> list[dict[str, Any]]:
    if message.get("role") not in ("user", "assistant"):
        raise Rejected(f"messages.{index}.role: Input should be 'user' or 'assistant'")
    content = message.get("content")
    if isinstance(content, str):
        if not content.strip():
            raise Rejected(f"messages.{index}: text content blocks must be non-empty")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise Rejected(f"messages.{index}: all messages must have non-empty content except for "
                       "the optional final assistant message")
    return content


def _check_block(block: dict[str, Any], index: int, tools: bool) -> None:
    kind = block.get("type")
    if kind == "text":
        if not block.get("text", "").strip():
            raise Rejected(f"messages.{index}: text content blocks must contain non-whitespace "
                           "text")
    elif kind in ("tool_use", "tool_result"):
        if not tools:
            raise Rejected("requests which include `tool_use` or `tool_result` blocks must "
                           "define tools")
        if kind == "tool_use" and not isinstance(block.get("input"), dict):
            raise Rejected(f"messages.{index}: tool_use.input must be an object")
    elif kind == "search_result":
        content = block.get("content")
        if (not isinstance(block.get("source"), str) or not isinstance(block.get("title"), str)
                or not isinstance(content, list) or not content
                or any(c.get("type") != "text" for c in content)):
            raise Rejected(f"messages.{index}: search_result needs source, title and text "
                           "content")
    else:
        raise Rejected(f"messages.{index}: unsupported block type {kind!r}")


def _check_cache_key(body: dict[str, Any]) -> None:
    if "prompt_cache_key" in body and not isinstance(body["prompt_cache_key"], str):
        raise Rejected("prompt_cache_key: Input should be a valid string")


def _require_model(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Rejected("model: field required")


# --- the server --------------------------------------------------------------------------

CHECKS = {"/v1/chat/completions": check_chat, "/v1/responses": check_responses,
          "/v1/messages": check_messages}


def reply_for(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A minimal valid reply of each API."""
    model = body.get("model", "m")
    if path == "/v1/chat/completions":
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    if path == "/v1/responses":
        return {"id": "resp_1", "object": "response", "created_at": 0, "model": model,
                "status": "completed", "output": [
                    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


class ProviderServer:
    """Start with ``with ProviderServer() as server:``; ``server.base_url`` ends in ``/v1``."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def origin(self) -> str:
        """The base URL without ``/v1`` (the Anthropic SDK adds it itself)."""
        return self.base_url.removesuffix("/v1")

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                check = CHECKS.get(self.path)
                if check is None:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    check(body)
                except (Rejected, KeyError, TypeError, ValueError, AttributeError) as exc:
                    message = f"{type(exc).__name__}: {exc}"
                    server._record(Received(self.path, body, 400, message))
                    self._send(400, {"type": "error", "error": {
                        "type": "invalid_request_error", "message": message}})
                    return
                server._record(Received(self.path, body, 200, None))
                self._send(200, reply_for(self.path, body))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read ``received`` instead."""

        return Handler
