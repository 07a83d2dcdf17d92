"""What the service tests share besides fixtures (a module name no other test folder uses)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contextwright.server import ServerConfig, hash_key

KEYS = {"acme": "acme-key-1", "ac": "ac-key-1"}
"""Two tenants whose names are prefixes of each other, and their API keys."""


def write_keys(path: Path, tenants: dict[str, list[str]], extra: str = "") -> Path:
    lines = []
    for name, keys in tenants.items():
        digests = ", ".join(f'"{hash_key(key)}"' for key in keys)
        lines.append(f"[tenants.{name}]\nkeys = [{digests}]\n{extra}")
    path.write_text("\n".join(lines), "utf-8")
    return path


@dataclass
class Running:
    """A served app: its URL and the config it runs with."""

    url: str
    config: ServerConfig
