"""The service's configuration: where sessions live, who may call, and the limits of one call.

Small keyword-only objects, passed explicitly. ``contextwright serve`` builds them from its options
and hands them to each worker process as JSON in ``CONTEXTWRIGHT_SERVER_CONFIG``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from contextwright.checks import seconds, whole_number
from contextwright.errors import InvalidInputError

CONFIG_VARIABLE = "CONTEXTWRIGHT_SERVER_CONFIG"
"""Environment variable carrying the ``ServerConfig`` (JSON) to worker processes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one call may ask of the service."""

    max_body_bytes: int = 4 << 20
    """Largest request body; a larger one is refused with 413 before it is parsed."""
    max_messages: int = 1000
    """Most messages one call may carry (history + turn, or what ``record`` appends); the
    same bound holds for tools and documents."""
    requests_per_minute: int = 0
    """Each tenant's sustained request rate (0: unlimited); a tenant's own value in the keys
    file wins."""
    burst: int | None = None
    """Requests a tenant may make at once after a quiet spell (default: a tenth of a minute's
    worth, at least 1)."""
    build_timeout: float = 30.0
    """Seconds a ``build`` or ``prepare`` may take before the call is answered with 503 (the
    build itself runs to its end; a ``prepare`` retried with its idempotency key stores
    nothing twice)."""

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_messages"):
            whole_number(getattr(self, name), name, minimum=1)
        whole_number(self.requests_per_minute, "requests_per_minute")
        if self.burst is not None:
            whole_number(self.burst, "burst", minimum=1)
        seconds(self.build_timeout, "build_timeout")

    def burst_for(self, requests_per_minute: int) -> int:
        """The burst allowed at ``requests_per_minute``."""
        return self.burst if self.burst is not None else max(1, requests_per_minute // 10)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Everything a worker needs to serve."""

    store: str
    """Store URL (``open_store``): ``redis://…``, ``postgresql://…``, ``sqlite:///…``."""
    keys: str
    """Path of the keys file (TOML, see ``server.tenants``)."""
    modes: str | None = None
    """Modes config file for sessions (default: the shipped modes)."""
    rate_store: str | None = None
    """Redis URL holding the rate limits (default: the store's, when it is Redis). Without
    one the limit is kept per worker process."""
    limits: Limits = field(default_factory=Limits)
    """What one call may ask."""
    threads: int = 16
    """Worker threads per process for builds and store calls."""
    keys_check_every: float = 1.0
    """Seconds between two looks at the keys file for a new version."""
    snapshots: str | None = None
    """Snapshot sink URL (``observe.open_sink``: ``sqlite:///…``, ``redis://…``,
    ``postgresql://…``): every session build is recorded there, and ``/metrics`` serves the
    builds' Prometheus metrics (None: no snapshots, no ``/metrics``)."""

    def __post_init__(self) -> None:
        # A path given as a Path is the same file: kept as text, so the config still goes to
        # the worker processes as JSON (``to_json``), as ``serve`` sends it.
        for name in ("store", "keys", "modes", "rate_store", "snapshots"):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
            elif not isinstance(value, str) and (value is not None or name in ("store", "keys")):
                raise InvalidInputError(f"{name} must be text (a URL or a path)")
        if not isinstance(self.limits, Limits):
            raise InvalidInputError("limits must be a Limits")
        # A pool without threads could run no call: refused when the service is configured,
        # not by the thread pool when the first worker starts.
        whole_number(self.threads, "threads", minimum=1)
        seconds(self.keys_check_every, "keys_check_every", zero=True)

    def to_json(self) -> str:
        """The config as JSON (for worker processes)."""
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> ServerConfig:
        """Inverse of ``to_json``."""
        data: dict[str, Any] = json.loads(text)
        return ServerConfig(**{**data, "limits": Limits(**data.get("limits", {}))})

    def rate_store_url(self) -> str | None:
        """Where the rate limits are kept: ``rate_store``, else the store's Redis, else none."""
        if self.rate_store is not None:
            return self.rate_store
        scheme = self.store.partition("://")[0]
        return self.store if scheme in ("redis", "rediss", "unix") else None
