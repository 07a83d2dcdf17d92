"""``BackgroundServer`` that fails to start leaves nothing behind: no thread, no port held."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI

from contextwright.errors import StoreUnavailable
from contextwright.server import BackgroundServer


@asynccontextmanager
async def _failing_startup(_: FastAPI) -> AsyncIterator[None]:
    raise RuntimeError("the app cannot start")
    yield  # pragma: no cover - never reached


@asynccontextmanager
async def _slow_startup(_: FastAPI) -> AsyncIterator[None]:
    await asyncio.sleep(1.0)
    yield


def _port_is_free(port: int) -> bool:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("127.0.0.1", port))
    except OSError:
        return False
    finally:
        probe.close()
    return True


@pytest.mark.parametrize(("lifespan", "start_timeout"), [(_failing_startup, 20.0),
                                                          (_slow_startup, 0.2)],
                         ids=["startup-fails", "startup-too-slow"])
def test_a_server_that_did_not_start_is_stopped_and_frees_its_port(
        lifespan: object, start_timeout: float) -> None:
    server = BackgroundServer(FastAPI(lifespan=lifespan),  # type: ignore[arg-type]
                              start_timeout=start_timeout)
    with pytest.raises(StoreUnavailable, match="did not start"):
        with server:
            pytest.fail("the server should not have started")
    assert _port_is_free(server.port)
    with pytest.raises(OSError):  # and nothing serves there, now or once startup ends
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
