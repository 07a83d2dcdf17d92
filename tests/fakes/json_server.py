"""The HTTP plumbing the tests' fake model servers share: JSON in, JSON (or raw bytes) out.

``LocalJSONServer`` runs ``http.server`` in a thread on 127.0.0.1 (an ephemeral port, so tests
never collide and no network leaves the machine), reads every POST's JSON body and hands it to
``answer``, which a fake overrides with what its API says. Starting and stopping is a context
manager; stopping is quick (a short poll interval) and wakes any answer still waiting out its
delay, so a test's teardown never waits for a slow scripted reply.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What the server sends back for one request."""

    status: int
    """HTTP status."""
    body: bytes
    """The response body, sent as ``application/json`` whatever it holds."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers."""
    delay: float = 0.0
    """Seconds to wait first (to provoke client timeouts); nothing is sent if the server stops
    meanwhile."""


def json_answer(status: int, payload: Any) -> Answer:
    """``payload`` as a JSON body."""
    return Answer(status=status, body=json.dumps(payload).encode())


class LocalJSONServer:
    """Base of the fakes: override ``answer``; ``with Fake(...) as server:`` serves meanwhile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        """Guards what the fake records and consumes (requests arrive on several threads)."""
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown (and so every test's teardown) quick.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def base_url(self) -> str:
        """Base URL to give an OpenAI client (``http://127.0.0.1:PORT/v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def origin(self) -> str:
        """The base URL without ``/v1`` (the Anthropic SDK adds it itself)."""
        return self.base_url.removesuffix("/v1")

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Answer:
        """The answer to a POST of ``body`` to ``path`` (header names lower-cased)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()  # wakes any answer that is still sleeping out its delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler_for(server: LocalJSONServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = server.answer(self.path, headers, body)
            if answer.delay and server._stopping.wait(answer.delay):
                return
            self.send_response(answer.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer.body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(answer.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to tell it

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests read what the fake recorded instead."""

    return Handler
