"""``contextwright serve`` with a store that lives in one process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.server import hash_key


def _keys(tmp_path: Path) -> Path:
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[tenants.acme]\nkeys = ["{hash_key("acme-key-1")}"]\n', "utf-8")
    return keys


def test_serve_refuses_a_memory_store_with_more_than_one_worker(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--store", "memory://", "--keys",
                                      str(_keys(tmp_path)), "--workers", "2"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: a memory:// store lives in one worker process")
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_serve_warns_that_a_memory_store_keeps_sessions_in_its_process_only(
        tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(Path(sys.executable).parent / "contextwright"), "serve", "--store", "memory://",
               "--keys", str(_keys(tmp_path)), "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert server.poll() is None
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert ("warning: a memory:// store keeps sessions in this process only; they are lost "
            "when it stops") in stderr


def test_serve_with_a_bad_modes_file_leaves_no_new_database(tmp_path: Path) -> None:
    modes = tmp_path / "modes.yaml"
    modes.write_text("modes: [not, a, mapping\n", "utf-8")
    database = tmp_path / "sessions.db"
    result = CliRunner().invoke(app, ["serve", "--store", f"sqlite:///{database}", "--keys",
                                      str(_keys(tmp_path)), "--modes", str(modes)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and "Traceback" not in result.output
    assert not database.exists()
