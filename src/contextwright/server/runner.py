"""Running the app: ``serve`` (uvicorn, one or many worker processes) and ``BackgroundServer``.

``serve`` hands the config to every worker through ``CONTEXTWRIGHT_SERVER_CONFIG`` and lets
uvicorn's supervisor run ``app_from_environment`` in each (it restarts a worker that dies).
``BackgroundServer`` runs one app on a thread of this process on a free loopback port: for
tests, notebooks and embedding the service in a program that does other things.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from types import TracebackType

import uvicorn
from fastapi import FastAPI

from contextwright.errors import StoreUnavailable
from contextwright.server.config import CONFIG_VARIABLE, ServerConfig


def serve(config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8080,
          workers: int = 1, log_level: str = "info") -> None:
    """Serve until interrupted; ``workers`` processes share the port (and the store)."""
    os.environ[CONFIG_VARIABLE] = config.to_json()
    uvicorn.run("contextwright.server.app:app_from_environment", factory=True, host=host,
                port=port, workers=workers, log_level=log_level, access_log=False,
                timeout_graceful_shutdown=10)


class BackgroundServer:
    """``app`` served by uvicorn on a thread, on ``host`` and a free port (``url``).

    Use as a context manager; leaving it stops the server and runs the app's shutdown.
    """

    def __init__(self, app: FastAPI, *, host: str = "127.0.0.1",
                 start_timeout: float = 20.0) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))
        self.host, self.port = host, int(self._socket.getsockname()[1])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                                     access_log=False, lifespan="on"))
        self._thread = threading.Thread(target=self._serve, name="cw-background-server",
                                        daemon=True)
        self._start_timeout = start_timeout

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://{self.host}:{self.port}"

    def _serve(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except SystemExit:  # uvicorn's word for a failed startup: ``start`` reports it
            pass

    def start(self) -> BackgroundServer:
        """Start serving; returns once the server accepts connections.

        A server that did not start in time is stopped before the error is raised: the
        caller gets no server to stop (``with`` does not run ``__exit__``), so one left
        starting would keep the port and serve on, unseen.
        """
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise StoreUnavailable("the server did not start (see its log)")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the app's shutdown to finish."""
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
