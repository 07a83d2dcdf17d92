"""``ServerConfig`` and ``Limits`` refuse what no worker could run with, when they are made.

Paths given as ``Path`` are kept as text, so the config still reaches the worker processes
of ``serve`` as JSON; a setting of the wrong type is an ``InvalidInputError`` naming it, not
a ``TypeError`` in every call or in ``to_json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from server_helpers import KEYS

from contextwright.client import Client
from contextwright.errors import InvalidInputError
from contextwright.server import BackgroundServer, Limits, ServerConfig, create_app


def test_paths_given_as_paths_reach_the_workers(tmp_path: Path, keys_file: Path) -> None:
    modes = Path(__file__).parent / "missing-modes.yaml"
    config = ServerConfig(store=f"sqlite:///{tmp_path / 's.db'}", keys=keys_file,  # type: ignore[arg-type]
                          modes=modes)  # type: ignore[arg-type]
    assert config.keys == str(keys_file) and config.modes == str(modes)
    assert ServerConfig.from_json(config.to_json()) == config
    served = ServerConfig(store=f"sqlite:///{tmp_path / 's.db'}", keys=keys_file)  # type: ignore[arg-type]
    with BackgroundServer(create_app(served)) as server, \
            Client(server.url, api_key=KEYS["acme"]) as client:
        assert client.prepare("u", "s", "Hello").user_seq == 1


@pytest.mark.parametrize("setting", [
    {"keys_check_every": "1"}, {"keys_check_every": float("nan")}, {"keys_check_every": -1.0},
    {"limits": {"max_body_bytes": 10}}, {"keys": 5}, {"store": None},
], ids=["check-every-text", "check-every-nan", "check-every-negative", "limits-dict",
        "keys-number", "store-none"])
def test_a_setting_no_worker_could_use_is_refused(setting: dict[str, Any]) -> None:
    given = {"store": "sqlite:///s.db", "keys": "keys.toml", **setting}
    with pytest.raises(InvalidInputError, match=next(iter(setting))):
        ServerConfig(**given)


def test_a_build_timeout_of_true_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="build_timeout"):
        Limits(build_timeout=True)
