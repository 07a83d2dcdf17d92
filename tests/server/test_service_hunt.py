"""An app made around a manager of one's own reads sessions from that manager's store.

``create_app(config, manager=...)`` used to open ``config.store`` as well and read sessions
(``GET``) and probe readiness there, while every ``prepare`` and ``record`` went to the
manager's store: every session the service stored was a 404.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS

from contextwright.client import Client
from contextwright.errors import InvalidInputError
from contextwright.manager import ContextManager
from contextwright.server import BackgroundServer, ServerConfig, create_app
from contextwright.session.memory import MemoryStore
from contextwright.session.sqlite import SqliteStore


def test_the_service_reads_sessions_where_the_given_manager_stores_them(
        tmp_path: Path, keys_file: Path) -> None:
    store = SqliteStore(tmp_path / "managers.db")
    manager = ContextManager(store, background=False)
    config = ServerConfig(store=f"sqlite:///{tmp_path / 'other.db'}", keys=str(keys_file))
    try:
        with BackgroundServer(create_app(config, manager=manager)) as server, \
                Client(server.url, api_key=KEYS["acme"]) as client:
            client.prepare("nora", "trip", "What is the weather in Paris?")
            client.record("nora", "trip", assistant="18 °C and clear.")
            view = client.session("nora", "trip", last=2)
            assert view is not None and view.message_count == 2
            assert httpx.get(server.url + "/readyz").status_code == 200
        assert not (tmp_path / "other.db").exists()  # config.store was never opened
    finally:
        manager.close()
        store.close()


def test_a_store_given_beside_a_manager_must_be_the_managers(keys_file: Path) -> None:
    config = ServerConfig(store="memory://", keys=str(keys_file))
    manager = ContextManager(MemoryStore(), background=False)
    with pytest.raises(InvalidInputError, match="differ"):
        create_app(config, manager=manager, store=MemoryStore())
    create_app(config, manager=manager, store=manager.store)  # type: ignore[arg-type]
    manager.close()


@pytest.mark.parametrize("setting", [{"modes": "modes.yaml"}, {"snapshots": "sqlite:///s.db"}],
                         ids=["modes", "snapshots"])
def test_manager_settings_beside_a_given_manager_are_refused_not_ignored(
        keys_file: Path, setting: dict[str, str]) -> None:
    config = ServerConfig(store="memory://", keys=str(keys_file), **setting)  # type: ignore[arg-type]
    manager = ContextManager(MemoryStore(), background=False)
    with pytest.raises(InvalidInputError, match="with a manager of your own"):
        create_app(config, manager=manager)
    manager.close()
