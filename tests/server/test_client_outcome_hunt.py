"""What the clients say when the service took a call and never answered it.

Only a write's outcome is unknown: ``record`` and a ``prepare`` with a message end in
``OutcomeUnknown`` carrying their idempotency key, an erase in ``OutcomeUnknown`` saying it
may be done, and a build, a read or a ``prepare`` without a message (which store nothing)
in ``StoreUnavailable`` that neither asks for a key nor claims nothing was sent.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from contextwright.client import AsyncClient, Client
from contextwright.errors import OutcomeUnknown, StoreUnavailable


@pytest.fixture
def hangs_up() -> Iterator[str]:
    """A server on 127.0.0.1 that reads each request and closes the connection unanswered."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                request = b""
                while b"\r\n\r\n" not in request:  # the headers at least: the call was sent
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    request += chunk

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    thread.join()
    listener.close()


CALLS: dict[str, Callable[[Any], Any]] = {
    "build": lambda client: client.build({"user_input": "Hi"}),
    "session": lambda client: client.session("u", "s"),
    "prepare-without-text": lambda client: client.prepare("u", "s", None),
}


@pytest.mark.parametrize("call", list(CALLS), ids=list(CALLS))
def test_a_call_that_stores_nothing_is_store_unavailable_without_a_key(
        hangs_up: str, call: str) -> None:
    with Client(hangs_up, api_key="k", retries=1, backoff=0.0) as client:
        with pytest.raises(StoreUnavailable) as raised:
            CALLS[call](client)
    assert not isinstance(raised.value, OutcomeUnknown)
    assert raised.value.idempotency_key is None
    message = str(raised.value)
    assert "did not answer" in message and "idempotency key" not in message
    assert "nothing was sent" not in message  # it was sent: only its answer is missing


def test_an_erase_that_got_no_answer_may_be_done(hangs_up: str) -> None:
    with Client(hangs_up, api_key="k", retries=0) as client:
        for erase in (lambda: client.erase_user("u"), lambda: client.erase_session("u", "s")):
            with pytest.raises(OutcomeUnknown, match="erase may have been done"):
                erase()


def test_a_write_that_got_no_answer_carries_its_key(hangs_up: str) -> None:
    async def calls() -> list[BaseException]:
        async with AsyncClient(hangs_up, api_key="k", retries=0) as client:
            results = await asyncio.gather(
                client.aprepare("u", "s", "Hello", idempotency_key="msg-1"),
                client.arecord("u", "s", assistant="Hi", idempotency_key="ans-1"),
                client.build({"user_input": "Hi"}), return_exceptions=True)
        return [r for r in results if isinstance(r, BaseException)]

    prepared, recorded, built = asyncio.run(calls())
    assert isinstance(prepared, OutcomeUnknown) and prepared.idempotency_key == "msg-1"
    assert isinstance(recorded, OutcomeUnknown) and recorded.idempotency_key == "ans-1"
    assert isinstance(built, StoreUnavailable) and not isinstance(built, OutcomeUnknown)
