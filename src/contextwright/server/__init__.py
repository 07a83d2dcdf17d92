"""The HTTP service: the builder and sessions for a fleet of agents, in any language.

Stateless workers (FastAPI + uvicorn, the ``server`` extra) over the Redis, PostgreSQL or SQLite
stores; tenants by hashed API keys, every store key scoped by tenant; payload, message, rate and
time limits; RFC 9457 problem details. ``contextwright serve`` runs it; ``contextwright.client``
calls it with the method names of ``ContextManager``.
"""

from contextwright.server.app import app_from_environment, create_app
from contextwright.server.config import Limits, ServerConfig
from contextwright.server.runner import BackgroundServer, serve
from contextwright.server.tenants import hash_key, new_key

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
