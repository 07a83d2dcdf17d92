"""Tenants and their API keys: the keys file, hashed keys, and reloading it while serving.

The keys file is TOML with one table per tenant::

    [tenants.acme]
    keys = ["sha256:<hex digest of the key>"]
    requests_per_minute = 600   # optional; the server's default otherwise

Only digests are stored, so the file can be read by operators without revealing a key. A key is
rotated without downtime by adding the new digest, moving clients over and removing the old one:
the server notices the file changed (it looks at most once a second) and reloads it. A file that
no longer parses is refused and the keys already loaded stay in force (logged as an error), so a
typo during a rotation does not lock every tenant out. This module reads files; it knows no HTTP.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextwright.checks import whole_number
from contextwright.core.parsing import MalformedDocument, parse_document
from contextwright.errors import InvalidInputError

logger = logging.getLogger("contextwright.server")

TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""Tenant names: lower-case letters, digits, ``_`` and ``-``; never ``/``, which ends the
tenant's part of a scoped user id (``scoped_user``)."""
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
MAX_STORED_ID = 512
"""Most characters of a stored user id (the store's limit, ``session.store.validate_id``)."""
MAX_KEYS_FILE_BYTES = 1 << 20
"""Largest keys file read."""


def hash_key(key: str) -> str:
    """The digest of an API key as the keys file holds it: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random API key (256 bits, URL-safe)."""
    return "cw_" + secrets.token_urlsafe(32)


def scoped_user(tenant: str, user_id: str) -> str:
    """The user id a tenant's ``user_id`` is stored under: ``<tenant>/<user_id>``.

    Tenant names hold no ``/``, so the first ``/`` always ends the tenant: two tenants, or two
    users whose ids are prefixes of each other, can never map to the same stored id. The
    stored id holds at most ``MAX_STORED_ID`` characters, so a tenant's user ids hold that
    less the tenant's name and ``/``; a longer one is refused here, with that length, rather
    than by the store with a length the caller never sent.
    """
    limit = user_id_limit(tenant)
    if len(user_id) > limit:
        raise InvalidInputError(
            f"user_id is longer than {limit} characters, this tenant's limit (its users are "
            f"stored as <tenant>/<user_id>, at most {MAX_STORED_ID} characters in all)")
    return f"{tenant}/{user_id}"


def user_id_limit(tenant: str) -> int:
    """The most characters a user id of ``tenant`` may hold over the service."""
    return MAX_STORED_ID - len(tenant) - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """One tenant of the service."""

    name: str
    """The table name in the keys file; scopes every stored id of the tenant."""
    requests_per_minute: int | None = None
    """The tenant's own rate limit (``None``: the server's default; 0: unlimited)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyTable:
    """Digest → tenant, as one version of the keys file says."""

    tenants: Mapping[str, Tenant]
    """Tenants by key digest."""

    def tenant_for(self, key: str) -> Tenant | None:
        """The tenant ``key`` belongs to, if any."""
        return self.tenants.get(hash_key(key))


def parse_keys(text: bytes | str, origin: str = "keys file") -> KeyTable:
    """Read a keys file; ``InvalidInputError`` names the table or field that is wrong."""
    try:
        data = parse_document(text, "toml")
    except MalformedDocument as exc:
        raise InvalidInputError(f"{origin} is not valid TOML: {exc}") from None
    tenants = data.get("tenants") if isinstance(data, dict) else None
    unknown = sorted(set(data) - {"tenants"}) if isinstance(data, dict) else []
    if unknown:
        raise InvalidInputError(f"{origin}: unknown top-level keys {unknown}")
    if not isinstance(tenants, dict) or not tenants:
        raise InvalidInputError(f"{origin} needs at least one [tenants.<name>] table")
    by_digest: dict[str, Tenant] = {}
    for name, table in tenants.items():
        tenant, digests = _tenant(name, table, origin)
        for digest in digests:
            if digest in by_digest:
                raise InvalidInputError(
                    f"{origin}: a key digest of tenant {name} is also listed under "
                    f"{by_digest[digest].name}")
            by_digest[digest] = tenant
    return KeyTable(tenants=by_digest)


def _tenant(name: str, table: Any, origin: str) -> tuple[Tenant, list[str]]:
    if not TENANT_NAME.fullmatch(name):
        raise InvalidInputError(f"{origin}: tenant names are 1-64 of a-z, 0-9, _ and - "
                                "(starting with a letter or digit)")
    where = f"{origin}: [tenants.{name}]"
    if not isinstance(table, dict):
        raise InvalidInputError(f"{where} must be a table")
    unknown = sorted(set(table) - {"keys", "requests_per_minute"})
    if unknown:
        raise InvalidInputError(f"{where} has unknown fields {unknown}")
    keys = table.get("keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise InvalidInputError(f"{where}.keys must be a list of \"sha256:<hex>\" strings")
    for index, digest in enumerate(keys):
        if not _DIGEST.fullmatch(digest):
            raise InvalidInputError(f"{where}.keys[{index}] is not \"sha256:\" and 64 lower-case "
                                    "hex digits (store digests, never keys)")
    rate = table.get("requests_per_minute")
    if rate is not None:
        whole_number(rate, f"{where}.requests_per_minute")
    return Tenant(name=name, requests_per_minute=rate), list(keys)


class _Unset:
    """No version of the keys file refused since the last one loaded."""


_UNSET = _Unset()


class KeysFile:
    """The keys file as the server uses it: loaded once, reloaded when it changes on disk.

    Thread-safe. ``check_every`` bounds how often the file's size and mtime are looked at.
    """

    def __init__(self, path: str | Path, *, check_every: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._check_every = check_every
        self._clock = clock
        self._lock = threading.Lock()
        self._signature = self._stat()
        self._table = parse_keys(self._read(), f"keys file {self.path.name}")
        self._checked = clock()
        self._refused: tuple[int, int, int] | _Unset | None = _UNSET
        """The version last refused (``None``: the file could not be read), not read again."""

    def tenant_for(self, key: str) -> Tenant | None:
        """The tenant of ``key`` under the newest valid version of the file."""
        self._reload_if_changed()
        return self._table.tenant_for(key)

    def tenants(self) -> list[Tenant]:
        """Every tenant of the loaded version, by name."""
        unique = {tenant.name: tenant for tenant in self._table.tenants.values()}
        return [unique[name] for name in sorted(unique)]

    def _reload_if_changed(self) -> None:
        now = self._clock()
        with self._lock:
            if now - self._checked < self._check_every:
                return
            self._checked = now
            signature: tuple[int, int, int] | None = None
            try:
                signature = self._stat()
                if signature in (self._signature, self._refused):
                    return
                table = parse_keys(self._read(), f"keys file {self.path.name}")
            except InvalidInputError as exc:
                self._refuse(signature, exc)
                return
            self._signature, self._table, self._refused = signature, table, _UNSET
            logger.info("keys file reloaded: %d keys", len(table.tenants))

    def _refuse(self, signature: tuple[int, int, int] | None, error: InvalidInputError) -> None:
        """Keep the loaded keys; say so once per version refused, not at every look."""
        if signature != self._refused:
            logger.error("keys file not reloaded, the loaded keys stay in force: %s", error)
        self._refused = signature

    def _stat(self) -> tuple[int, int, int]:
        try:
            info = os.stat(self.path)
        except OSError as exc:
            raise InvalidInputError(f"cannot read keys file {self.path.name}: "
                                    f"{exc.strerror}") from None
        return info.st_mtime_ns, info.st_size, info.st_ino

    def _read(self) -> bytes:
        try:
            with self.path.open("rb") as handle:
                data = handle.read(MAX_KEYS_FILE_BYTES + 1)
        except OSError as exc:
            raise InvalidInputError(f"cannot read keys file {self.path.name}: "
                                    f"{exc.strerror}") from None
        if len(data) > MAX_KEYS_FILE_BYTES:
            raise InvalidInputError(f"keys file {self.path.name} is larger than "
                                    f"{MAX_KEYS_FILE_BYTES} bytes")
        return data
