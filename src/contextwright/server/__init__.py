"""The HTTP service: the builder and sessions for a fleet of agents, in any language.

Stateless workers (FastAPI + uvicorn, the ``server`` extra) over the Redis, PostgreSQL or SQLite
stores; tenants by hashed API keys, every store key scoped by tenant; payload, message, rate and
time limits; RFC 9457 problem details. ``contextwright serve`` runs it; ``contextwright.client``
calls it with the method names of ``ContextManager``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextwright.server.app import app_from_environment, create_app
    from contextwright.server.config import Limits, ServerConfig
    from contextwright.server.runner import BackgroundServer, serve
    from contextwright.server.tenants import hash_key, new_key

# Imported on first use: making or hashing a key (``contextwright api-key``) needs nothing from
# the ``server`` extra, and a submodule such as ``server.tenants`` loads without FastAPI.
_HOMES = {
    "app_from_environment": "app", "create_app": "app", "Limits": "config",
    "ServerConfig": "config", "BackgroundServer": "runner", "serve": "runner",
    "hash_key": "tenants", "new_key": "tenants",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{home}")
    except ModuleNotFoundError as exc:
        if exc.name in ("fastapi", "uvicorn", "starlette"):
            raise ModuleNotFoundError(
                f"the HTTP service needs {exc.name}: pip install 'contextwright[server]'",
                name=exc.name) from exc
        raise
    return getattr(module, name)


__all__ = [
    "BackgroundServer",
    "Limits",
    "ServerConfig",
    "app_from_environment",
    "create_app",
    "hash_key",
    "new_key",
    "serve",
]
