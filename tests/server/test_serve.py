"""``contextwright serve`` as operators run it: real uvicorn worker processes on loopback.

The fault test kills one of two workers with SIGKILL during a bounded burst of writes; clients
retry with their idempotency keys, and afterwards every acknowledged write is stored exactly
once, in order, on Redis and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.client import Client
from contextwright.server.tenants import parse_keys

CLI = [sys.executable, "-c", "from contextwright.cli import main; main()"]
THREADS = 6
WRITES = 30
"""Writes per thread (one session each): 180 in all, a few seconds on loopback."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Serving:
    """A ``contextwright serve`` process tree and its URL."""

    def __init__(self, store: str, keys: Path, workers: int, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [*CLI, "serve", "--store", store, "--keys", str(keys), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(workers), "--log-level", "warning"],
            stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready(log)

    def _wait_ready(self, log: Path) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"serve exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        pytest.fail(f"serve did not become ready: {log.read_text(errors='replace')[-2000:]}")

    def workers(self) -> list[int]:
        """The pids of the worker processes uvicorn's supervisor runs."""
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [int(child) for child in children
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]

    def serving_now(self, pid: int) -> bool:
        """Whether worker ``pid`` holds an established connection: a request in flight."""
        inodes = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            if local_port == self.port and fields[3] == "01" and fields[9] in inodes:
                return True
        return False

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


@pytest.fixture
def serving(keys_file: Path, tmp_path: Path) -> Iterator[list[Serving]]:
    started: list[Serving] = []
    yield started
    for server in started:
        server.stop()


def _writer(url: str, thread: int, acknowledged: list[tuple[int, int, list[int]]],
            failures: list[BaseException]) -> None:
    # A connection per request, so the writes spread over both workers as they accept.
    transport = httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
    client = Client(url, api_key=KEYS["acme"], retries=30, backoff=0.05, max_retry_wait=1.0,
                    timeout=10.0, transport=transport)
    try:
        for index in range(WRITES):
            seqs = client.record("fleet", f"s{thread}", assistant=f"t{thread}-w{index}",
                                 idempotency_key=f"t{thread}-w{index}")
            acknowledged.append((thread, index, seqs))
    except BaseException as error:  # reported by the test, not lost in the thread
        failures.append(error)
    finally:
        client.close()


@pytest.mark.parametrize("store", ["redis", "postgres"])
def test_a_worker_killed_mid_burst_loses_and_duplicates_no_acknowledged_write(
        store: str, request: pytest.FixtureRequest, keys_file: Path, tmp_path: Path,
        serving: list[Serving], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="contextwright.client")
    url = str(request.getfixturevalue(f"{store}_url"))
    server = Serving(url, keys_file, workers=2, log=tmp_path / "serve.log")
    serving.append(server)
    deadline = time.monotonic() + 30
    while len(server.workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    victim = server.workers()[0]
    acknowledged: list[tuple[int, int, list[int]]] = []
    failures: list[BaseException] = []
    threads = [threading.Thread(target=_writer, args=(server.url, t, acknowledged, failures))
               for t in range(THREADS)]
    for thread in threads:
        thread.start()
    while len(acknowledged) < THREADS * WRITES // 3 and not failures:
        time.sleep(0.005)
    # Kill the victim while it holds a request (a connection per request), if it gets one soon.
    busy_until = time.monotonic() + 5
    while not server.serving_now(victim) and time.monotonic() < busy_until:
        time.sleep(0.001)
    os.kill(victim, signal.SIGKILL)
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    assert len(acknowledged) == THREADS * WRITES
    with Client(server.url, api_key=KEYS["acme"], retries=10) as client:
        for thread in range(THREADS):
            view = client.session("fleet", f"s{thread}", last=1000)
            assert view is not None
            contents = [entry.message["content"] for entry in view.messages]
            assert contents == [f"t{thread}-w{i}" for i in range(WRITES)]
            assert [entry.seq for entry in view.messages] == list(range(1, WRITES + 1))
    assert sorted(seqs[0] for t, _, seqs in acknowledged if t == 0) == list(
        range(1, WRITES + 1))
    assert victim not in server.workers()
    retried = [r for r in caplog.records if r.name == "contextwright.client"]
    print(f"{len(retried)} client retries after the kill")  # shown with -s


def test_serve_answers_probes_and_documents_its_api(
        redis_url: str, keys_file: Path, tmp_path: Path, serving: list[Serving]) -> None:
    server = Serving(redis_url, keys_file, workers=1, log=tmp_path / "serve.log")
    serving.append(server)
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    assert "swagger" in httpx.get(server.url + "/docs").text.lower()
    schema = httpx.get(server.url + "/openapi.json").json()
    prepare = schema["paths"]["/v1/sessions/{user_id}/{session_id}/prepare"]["post"]
    fields = prepare["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert {"text", "tools", "documents", "idempotency_key", "format"} <= set(fields)
    build = schema["paths"]["/v1/build"]["post"]["requestBody"]["content"]["application/json"]
    assert {"user_input", "history", "plan", "format"} <= set(build["schema"]["properties"])
    with Client(server.url, api_key=KEYS["acme"]) as client:
        assert client.prepare("u", "s", "hello").user_seq == 1


def test_serve_refuses_bad_setups_in_one_line(keys_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    bad_keys = tmp_path / "bad.toml"
    bad_keys.write_text("[tenants.acme]\nkeys = [\"not-a-digest\"]\n")
    bad_modes = tmp_path / "modes.yaml"
    bad_modes.write_text("modes: {bogus: 1}\n")
    sqlite = f"sqlite:///{tmp_path / 's.db'}"
    cases = [
        (["serve", "--store", sqlite, "--keys", str(bad_keys)], "keys[0]"),
        (["serve", "--store", sqlite, "--keys", str(tmp_path / "none.toml")], "cannot read"),
        (["serve", "--store", "ftp://x", "--keys", str(keys_file)], "unknown store URL"),
        (["serve", "--store", sqlite, "--keys", str(keys_file), "--workers", "2",
          "--rate", "60"], "must live in Redis"),
        (["serve", "--store", sqlite, "--keys", str(keys_file), "--modes",
          str(tmp_path / "none.yaml")], "cannot read modes config"),
        (["serve", "--store", sqlite, "--keys", str(keys_file), "--modes", str(bad_modes)],
         "modes.bogus"),
        (["serve", "--store", sqlite, "--keys", str(keys_file), "--log-level", "loud"],
         "--log-level must be one of"),
        (["serve", "--store", sqlite, "--keys", str(keys_file), "--port", "-1"],
         "--port must be 0 to 65535"),
        (["serve", "--store", sqlite, "--keys", str(keys_file), "--port", "99999"],
         "--port must be 0 to 65535"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_api_key_prints_a_key_and_the_line_that_admits_it() -> None:
    result = CliRunner().invoke(app, ["api-key", "acme"])
    assert result.exit_code == 0
    key = result.output.split("it is not stored): ")[1].split()[0]
    table = parse_keys(result.output.split("keys file:\n")[1])
    tenant = table.tenant_for(key)
    assert tenant is not None and tenant.name == "acme"
    assert key not in result.output.split("keys file:\n")[1]
