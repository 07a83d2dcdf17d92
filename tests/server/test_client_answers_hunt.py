"""What the clients say when something other than the service answers at ``base_url``.

A web page, a JSON value that is no object, or a redirect (an ``http://`` address of a
service served over https) is a ``ServiceError`` saying so, never a ``JSONDecodeError``,
``KeyError`` or ``AttributeError`` from reading it; a write's error carries its key.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from contextwright.client import AsyncClient, Client, ServiceError

ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    "web-page": (200, {"Content-Type": "text/html"}, b"<html><body>Welcome</body></html>"),
    "json-list": (200, {"Content-Type": "application/json"}, b"[1, 2]"),
    "not-found-list": (404, {"Content-Type": "application/json"}, b"[]"),
    "redirect": (301, {"Location": "https://cw.example/v1"}, b""),
}


@pytest.fixture
def answers_with() -> Iterator[Callable[[str], str]]:
    """A server on 127.0.0.1 answering every call with one of ``ANSWERS``."""
    servers: list[ThreadingHTTPServer] = []

    def start(kind: str) -> str:
        status, headers, body = ANSWERS[kind]

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


CALLS: dict[str, Callable[[Client], Any]] = {
    "prepare": lambda client: client.prepare("u", "s", "Hello", idempotency_key="msg-1"),
    "record": lambda client: client.record("u", "s", assistant="Hi", idempotency_key="msg-1"),
    "session": lambda client: client.session("u", "s"),
    "erase_user": lambda client: client.erase_user("u"),
    "build": lambda client: client.build({"user_input": "Hi"}),
}


@pytest.mark.parametrize("kind", ["web-page", "json-list", "redirect"])
@pytest.mark.parametrize("call", list(CALLS))
def test_an_answer_that_is_not_the_services_is_a_service_error(
        answers_with: Callable[[str], str], kind: str, call: str) -> None:
    with Client(answers_with(kind), api_key="k", retries=0) as client:
        with pytest.raises(ServiceError) as raised:
            CALLS[call](client)
    said = str(raised.value)
    assert ("redirect" in said and "https://cw.example/v1" in said if kind == "redirect"
            else "not the service's JSON" in said)
    assert raised.value.idempotency_key == ("msg-1" if call in ("prepare", "record") else None)


def test_a_not_found_that_is_not_a_problem_is_a_service_error(
        answers_with: Callable[[str], str]) -> None:
    with Client(answers_with("not-found-list"), api_key="k", retries=0) as client:
        with pytest.raises(ServiceError) as raised:
            client.session("u", "s")
    assert raised.value.status == 404


def test_the_async_client_says_the_same(answers_with: Callable[[str], str]) -> None:
    async def call() -> None:
        async with AsyncClient(answers_with("web-page"), api_key="k", retries=0) as client:
            await client.aprepare("u", "s", "Hello")

    with pytest.raises(ServiceError, match="not the service's JSON"):
        asyncio.run(call())
