"""A keys file that cannot be used is said once per version, not at every look at it.

The service looks at the keys file up to once a second in every worker: a version it refuses
(broken TOML, or a file gone during a rotation) is logged when it is found and then left
alone until the file changes again, when the next version is read (and loaded if good).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from server_helpers import write_keys

from contextwright.server.tenants import KeysFile

REFUSED = "keys file not reloaded"


def _errors(caplog: pytest.LogCaptureFixture) -> int:
    return sum(REFUSED in record.getMessage() for record in caplog.records)


def _later(path: Path, seconds: int) -> None:
    """Move the file's mtime on, so a rewrite within one mtime tick still looks changed."""
    stamp = path.stat().st_mtime_ns + seconds * 1_000_000_000
    os.utime(path, ns=(stamp, stamp))


def test_a_refused_version_is_logged_once_and_the_next_one_is_read(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keys = write_keys(tmp_path / "keys.toml", {"acme": ["k1"]})
    loaded = KeysFile(keys, check_every=0.0)
    caplog.set_level("ERROR", logger="contextwright.server")
    keys.write_text("[tenants.acme\nkeys = [", "utf-8")
    _later(keys, 1)
    for _ in range(5):
        tenant = loaded.tenant_for("k1")
        assert tenant is not None and tenant.name == "acme"
    assert _errors(caplog) == 1

    keys.unlink()  # gone during a rotation: said once too
    for _ in range(5):
        assert loaded.tenant_for("k1") is not None
    assert _errors(caplog) == 2

    write_keys(keys, {"acme": ["k2"]})
    _later(keys, 2)
    tenant = loaded.tenant_for("k2")
    assert tenant is not None and tenant.name == "acme" and loaded.tenant_for("k1") is None
    assert _errors(caplog) == 2


def test_a_version_refused_again_after_a_good_one_is_logged_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keys = write_keys(tmp_path / "keys.toml", {"acme": ["k1"]})
    loaded = KeysFile(keys, check_every=0.0)
    caplog.set_level("ERROR", logger="contextwright.server")
    broken = "[tenants.acme\nkeys = ["
    keys.write_text(broken, "utf-8")
    _later(keys, 1)
    loaded.tenant_for("k1")
    write_keys(keys, {"acme": ["k2"]})
    _later(keys, 2)
    assert loaded.tenant_for("k2") is not None
    keys.write_text(broken, "utf-8")
    _later(keys, 3)
    loaded.tenant_for("k2")
    loaded.tenant_for("k2")
    assert _errors(caplog) == 2
