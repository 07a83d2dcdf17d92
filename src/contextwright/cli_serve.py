"""``contextwright serve`` and ``contextwright api-key``: run the HTTP service, make its keys.

The service needs the ``server`` extra (FastAPI, uvicorn), imported only when these commands run.
Options may also come from ``CONTEXTWRIGHT_…`` environment variables (named in ``--help``).
A bad option, keys file, modes file, store or rate store is one line on stderr and exit code 2,
before any worker starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from contextwright.cli_common import fail, library_errors

if TYPE_CHECKING:
    from contextwright.server.config import ServerConfig
    from contextwright.server.tenants import KeysFile

StoreOption = Annotated[str, typer.Option(
    "--store", envvar="CONTEXTWRIGHT_STORE",
    help="Store URL: redis://…, postgresql://…, sqlite:///file.db")]
KeysOption = Annotated[Path, typer.Option(
    "--keys", envvar="CONTEXTWRIGHT_KEYS",
    help="Keys file (TOML): [tenants.<name>] keys = [\"sha256:<hex>\"]. Reloaded on change.")]


def serve(
    store: StoreOption,
    keys: KeysOption,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    workers: Annotated[int, typer.Option(help="Worker processes (they share the store).")] = 1,
    modes: Annotated[str | None, typer.Option(help="Modes config file for sessions.")] = None,
    rate: Annotated[int, typer.Option(
        help="Requests per minute per tenant (0: unlimited; the keys file may set a "
             "tenant's own).")] = 0,
    burst: Annotated[int | None, typer.Option(
        help="Requests a tenant may make at once (default: a tenth of --rate).")] = None,
    rate_store: Annotated[str | None, typer.Option(
        envvar="CONTEXTWRIGHT_RATE_STORE",
        help="Redis URL for the rate limits (default: the store's, when it is Redis).")] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body (413).")] = 4 << 20,
    max_messages: Annotated[int, typer.Option(help="Most messages in one call.")] = 1000,
    build_timeout: Annotated[float, typer.Option(help="Seconds a build may take (503).")] = 30.0,
    threads: Annotated[int, typer.Option(help="Build and store threads per worker.")] = 16,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    snapshots: Annotated[str | None, typer.Option(
        help="Snapshot sink URL (sqlite:///…, redis://…, postgresql://…): record every "
             "session build there and serve its metrics at /metrics.")] = None,
) -> None:
    """Serve the builder and sessions over HTTP (OpenAPI at /docs)."""
    try:
        from contextwright.server import Limits, ServerConfig
        from contextwright.server import serve as run
        from contextwright.server.tenants import KeysFile
    except ImportError:
        fail("the service needs the server extra: pip install 'contextwright[server]'")
    if workers < 1:
        fail("--workers must be 1 or more")
    if threads < 1:
        fail("--threads must be 1 or more")
    _check_listener(port, log_level)
    with library_errors():
        limits = Limits(max_body_bytes=max_body_bytes, max_messages=max_messages,
                        requests_per_minute=rate, burst=burst, build_timeout=build_timeout)
        config = ServerConfig(store=store, keys=str(keys.resolve()),
                              modes=str(Path(modes).resolve()) if modes else None,
                              rate_store=rate_store, limits=limits, threads=threads,
                              snapshots=snapshots)
        # A bad keys file, store or modes file fails here, once, not in every worker; the
        # files are read before the stores are opened, so a bad one leaves no new database.
        _check_shared_rate(config, KeysFile(config.keys), workers)
        if config.modes is not None:
            _check_modes(config.modes)
        _check_store(config.store, workers)
        _check_rate_store(config)
        if snapshots is not None:
            _check_sink(snapshots)
    run(config, host=host, port=port, workers=workers, log_level=log_level)


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
"""The log levels uvicorn knows (it would raise a ``KeyError`` in each worker on another)."""
HIGHEST_PORT = 65535


def _check_listener(port: int, log_level: str) -> None:
    # Port 0 is the operating system's choice of a free port (uvicorn logs which).
    if not 0 <= port <= HIGHEST_PORT:
        fail(f"--port must be 0 to {HIGHEST_PORT}")
    if log_level not in LOG_LEVELS:
        fail(f"--log-level must be one of {', '.join(LOG_LEVELS)}")


def _check_shared_rate(config: ServerConfig, keys: KeysFile, workers: int) -> None:
    rated = bool(config.limits.requests_per_minute) or any(
        tenant.requests_per_minute for tenant in keys.tenants())
    if workers > 1 and rated and config.rate_store_url() is None:
        fail("with --workers above 1 a rate limit must live in Redis: give --rate-store "
             "redis://… (or a Redis --store), or each worker would allow the full rate")


def _check_store(url: str, workers: int) -> None:
    from contextwright.session.memory import MemoryStore
    from contextwright.session.store import open_store

    store = open_store(url)
    in_memory = isinstance(store, MemoryStore)
    store.close()
    if not in_memory:
        return
    # Each worker process would hold sessions of its own: a call that reaches another worker
    # than the one before finds its session missing or its history cut.
    if workers > 1:
        fail("a memory:// store lives in one worker process: with --workers above 1 give a "
             "shared store (redis://…, postgresql://…, sqlite:///file.db)")
    typer.echo("warning: a memory:// store keeps sessions in this process only; they are lost "
               "when it stops", err=True)


def _check_rate_store(config: ServerConfig) -> None:
    # Each worker connects to the rate limiter's Redis as it starts: a malformed or unreachable
    # one is one error here rather than a traceback in every worker.
    from contextwright.server.ratelimit import RedisRateLimiter

    url = config.rate_store_url()
    if url is not None:
        RedisRateLimiter.from_url(url).close()


def _check_modes(path: str) -> None:
    from contextwright.modes.config import ModesConfig

    ModesConfig.load(path)


def _check_sink(url: str) -> None:
    from contextwright.observe.sinks import open_sink

    open_sink(url).close()


def api_key(
    tenant: Annotated[str, typer.Argument(help="The tenant the key is for.")],
) -> None:
    """Make a new random API key; print it and the keys-file line that admits it."""
    from contextwright.server.tenants import TENANT_NAME, hash_key, new_key

    if not TENANT_NAME.fullmatch(tenant):
        fail("tenant names are 1-64 of a-z, 0-9, _ and - (starting with a letter or digit)")
    key = new_key()
    typer.echo(f"key (give it to the tenant; it is not stored): {key}")
    typer.echo(f"keys file:\n[tenants.{tenant}]\nkeys = [\"{hash_key(key)}\"]")
