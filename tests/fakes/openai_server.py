"""A local HTTP server that speaks the OpenAI chat-completions protocol, for tests.

It runs on ``fakes.json_server`` (127.0.0.1, an ephemeral port), answers
``POST /v1/chat/completions`` from a script of replies, and records every request it received
(path, headers, JSON body) so tests can check what went over the wire. No network leaves the
machine. Replies are consumed in order; when the script runs out the server asks the
``responder`` (a function of the request body, for tests whose calls depend on what is asked)
or, without one, answers 500 so a test that asks more than it scripted fails loudly instead of
hanging.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fakes.json_server import Answer, LocalJSONServer


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted answer of the fake server."""

    content: str | None = ""
    """Assistant message content (None sends ``"content": null``)."""
    status: int = 200
    """HTTP status; anything but 200 sends an OpenAI-style error body."""
    delay: float = 0.0
    """Seconds to wait before answering (to provoke client timeouts)."""
    raw_body: bytes | None = None
    """Send these bytes as the body instead of a well-formed completion."""
    no_choices: bool = False
    """Send a completion with an empty ``choices`` list."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (``retry-after-ms`` keeps SDK retries fast)."""


def text(content: str | None) -> Reply:
    """A successful reply with this content."""
    return Reply(content=content)


def error(status: int, *, retry_after_ms: int = 1) -> Reply:
    """An HTTP error reply; ``retry-after-ms`` makes the SDK's retry wait tiny."""
    return Reply(status=status, headers={"retry-after-ms": str(retry_after_ms)})


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """One request the server received."""

    path: str
    """Request path, e.g. ``/v1/chat/completions``."""
    headers: dict[str, str]
    """Request headers, names lower-cased."""
    body: dict[str, Any]
    """The JSON body."""


class FakeOpenAIServer(LocalJSONServer):
    """Scriptable chat-completions server; use as a context manager."""

    def __init__(self, replies: list[Reply] | None = None,
                 responder: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        super().__init__()
        self._replies: deque[Reply] = deque(replies or [])
        self._responder = responder
        self.requests: list[Recorded] = []

    def script(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._replies.extend(replies)

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Answer:
        """Record the request, then send the next scripted reply (or the responder's)."""
        with self._lock:
            self.requests.append(Recorded(path=path, headers=headers, body=body))
        reply = self._next_reply(body)
        payload = reply.raw_body if reply.raw_body is not None else _body(reply, body)
        return Answer(status=reply.status, body=payload, headers=reply.headers,
                      delay=reply.delay)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        if self._responder is not None:
            return self._responder(body)
        return Reply(status=500, content="script exhausted")


def _body(reply: Reply, request: dict[str, Any]) -> bytes:
    if reply.status != 200:
        err = {"error": {"message": "scripted failure", "type": "server_error", "code": None}}
        return json.dumps(err).encode()
    choices = [] if reply.no_choices else [{
        "index": 0,
        "message": {"role": "assistant", "content": reply.content},
        "finish_reason": "stop",
    }]
    completion = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "fake"),
        "choices": choices,
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return json.dumps(completion, ensure_ascii=False).encode()
