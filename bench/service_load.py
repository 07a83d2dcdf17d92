"""HTTP service load: prepare + record turns through ``contextwright serve`` on loopback.

For Redis and PostgreSQL, and 1, 2 and 4 worker processes (``serve --workers N``), 64
concurrent clients (one event loop in this process) run agent turns, each a
``prepare`` with the user's message and a ``record`` of the answer, spread over 10,000 sessions
that already hold three rounds each. Reported: turns per second, p50 / p99 latency of
``prepare`` and ``record``, and the error rate (the clients do not retry, so every failure
counts). Then the service's overhead: the median ``prepare`` of one client against one worker,
divided by the median in-process ``ContextManager.prepare`` on the same store.

Bounded: at most ``--turns`` turns and ``--seconds`` seconds per configuration; loopback only;
each store runs in a throw-away namespace (random Redis prefix, random PostgreSQL schema).
The load generator shares the machine's cores with the workers. By default it speaks
HTTP/1.1 itself over keep-alive connections (a few dozen lines below), because ``httpx`` costs
more CPU per call than the service does and would measure itself; ``--client httpx`` runs the
same load through ``contextwright.client.AsyncClient`` instead.

Run: ``.venv/bin/python bench/service_load.py [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from contextwright import ContextManager
from contextwright.client import AsyncClient
from contextwright.server import hash_key
from contextwright.session import SessionKey, open_store

REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
KEY = "bench-key"
TENANT = "bench"
ROUNDS = 3
"""Rounds (user + assistant) each session holds before the load starts."""


@dataclass
class Result:
    store: str
    workers: int
    clients: int
    turns: int
    seconds: float
    turns_per_second: float
    prepare_p50_ms: float
    prepare_p99_ms: float
    record_p50_ms: float
    record_p99_ms: float
    errors: int
    error_rate: float
    load_average: float
    """The machine's 1-minute load average when the row ended (other jobs included)."""


def question(n: int) -> str:
    return f"Where is my order KST{n % 997:03d}? It was due on day {n % 28 + 1}."


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


@contextmanager
def namespace(store: str) -> Iterator[str]:
    """A store URL in a fresh namespace, removed afterwards."""
    if store == "redis":
        import redis

        prefix = f"cwbench-{uuid.uuid4().hex[:12]}"
        yield f"{REDIS_URL}?prefix={prefix}"
        client = redis.Redis.from_url(REDIS_URL)
        for name in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(name)
        client.close()
    else:
        import psycopg

        schema = f"cwbench_{uuid.uuid4().hex[:12]}"
        yield f"{POSTGRES_DSN}?schema={schema}"
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def populate(url: str, sessions: int) -> None:
    """Give every session ``ROUNDS`` rounds, written straight to the store (tenant-scoped)."""
    store = open_store(url)
    try:
        for index in range(sessions):
            key = SessionKey(user_id=f"{TENANT}/u{index % 1000}", session_id=f"s{index}")
            batch: list[dict[str, Any]] = []
            for turn in range(ROUNDS):
                batch += [{"role": "user", "content": question(index * 7 + turn)},
                          {"role": "assistant", "content": "It ships tomorrow from Lisbon."}]
            store.append(key, batch)
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(url: str, keys: Path, workers: int) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-c", "from contextwright.cli import main; main()", "serve",
               "--store", url, "--keys", str(keys), "--port", str(port), "--workers",
               str(workers), "--log-level", "warning"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, process, workers)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def wait_ready(base: str, process: subprocess.Popen[bytes], workers: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = process.stderr.read().decode() if process.stderr else ""
            raise SystemExit(f"serve exited: {log[-2000:]}")
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    # Every worker imports the library on its own; give the last ones time to come up.
    time.sleep(1.0 * workers)


class RawConnection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads JSON answers."""

    def __init__(self, base: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        payload = json.dumps(body).encode()
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
            .encode() + payload)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        answer = json.loads(await self.reader.readexactly(length))
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {answer.get('type')}")
        return dict(answer)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class RawClient:
    """``prepare`` and ``record`` over ``RawConnection``s (one per concurrent client)."""

    def __init__(self, base: str) -> None:
        self.connection = RawConnection(base)

    async def prepare(self, user: str, session: str, text: str) -> None:
        await self.connection.post(f"/v1/sessions/{user}/{session}/prepare",
                                   {"text": text, "idempotency_key": uuid.uuid4().hex})

    async def record(self, user: str, session: str, *, assistant: str) -> None:
        await self.connection.post(f"/v1/sessions/{user}/{session}/record",
                                   {"assistant": assistant,
                                    "idempotency_key": uuid.uuid4().hex})


async def load(base: str, sessions: int, clients: int, turns: int, seconds: float,
               start: int, kind: str = "raw") -> tuple[int, float, list[float], list[float], int]:
    prepare_ms: list[float] = []
    record_ms: list[float] = []
    errors = 0
    done = 0
    counter = iter(range(turns))
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with AsyncClient(base, api_key=KEY, retries=0, timeout=30.0, limits=limits) as shared:

        async def one_client() -> None:
            nonlocal errors, done
            raw = RawClient(base) if kind == "raw" else None
            client: Any = raw if raw is not None else shared
            for n in counter:
                if time.monotonic() > deadline:
                    return
                index = (start + n * 7919) % sessions  # spread turns over all sessions
                user, session = f"u{index % 1000}", f"s{index}"
                try:
                    began = time.perf_counter()
                    await client.prepare(user, session, question(n))
                    middle = time.perf_counter()
                    await client.record(user, session, assistant="Thanks, noted.")
                    ended = time.perf_counter()
                except Exception:
                    errors += 1
                    if raw is not None:  # the connection may be broken: start a new one
                        await raw.connection.close()
                        raw = RawClient(base)
                        client = raw
                    continue
                prepare_ms.append((middle - began) * 1000)
                record_ms.append((ended - middle) * 1000)
                done += 1
            if raw is not None:
                await raw.connection.close()

        began = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    return done, elapsed, prepare_ms, record_ms, errors


def in_process_prepare_ms(url: str, sessions: int, count: int) -> float:
    """Median ``ContextManager.prepare`` on the same store, in this process."""
    store = open_store(url)
    manager = ContextManager(store)
    timings = []
    try:
        for n in range(count):
            index = (n * 104_729) % sessions
            began = time.perf_counter()
            manager.prepare(f"{TENANT}/u{index % 1000}", f"s{index}", question(n))
            timings.append((time.perf_counter() - began) * 1000)
            manager.record(f"{TENANT}/u{index % 1000}", f"s{index}", assistant="ok")
    finally:
        manager.close()
        store.close()
    return statistics.median(timings)


async def one_client_prepare_ms(base: str, sessions: int, count: int, kind: str) -> float:
    """Median ``prepare`` of one client against one worker (nothing else running)."""
    timings = []
    async with AsyncClient(base, api_key=KEY, retries=0) as shared:
        raw = RawClient(base)
        client: Any = raw if kind == "raw" else shared
        for n in range(count):
            index = (n * 104_729 + 17 + (kind == "raw")) % sessions
            user, session = f"u{index % 1000}", f"s{index}"
            began = time.perf_counter()
            await client.prepare(user, session, question(n))
            timings.append((time.perf_counter() - began) * 1000)
            await client.record(user, session, assistant="ok")
        await raw.connection.close()
    return statistics.median(timings)


def run_store(store: str, args: argparse.Namespace, keys: Path) -> dict[str, Any]:
    results: list[Result] = []
    with namespace(store) as url:
        began = time.perf_counter()
        populate(url, args.sessions)
        print(f"{store}: {args.sessions} sessions of {ROUNDS} rounds written in "
              f"{time.perf_counter() - began:.1f} s", flush=True)
        for offset, workers in enumerate(args.workers):
            with serving(url, keys, workers) as base:
                done, elapsed, prep, rec, errors = asyncio.run(load(
                    base, args.sessions, args.clients, args.turns, args.seconds,
                    start=offset * args.turns, kind=args.client))
            attempts = done + errors
            result = Result(
                store=store, workers=workers, clients=args.clients, turns=done,
                seconds=round(elapsed, 2), turns_per_second=round(done / elapsed, 1),
                prepare_p50_ms=round(percentile(prep, 0.5), 1),
                prepare_p99_ms=round(percentile(prep, 0.99), 1),
                record_p50_ms=round(percentile(rec, 0.5), 1),
                record_p99_ms=round(percentile(rec, 0.99), 1),
                errors=errors, error_rate=round(errors / attempts, 4) if attempts else 0.0,
                load_average=round(os.getloadavg()[0], 2))
            results.append(result)
            print(json.dumps(asdict(result)), flush=True)
        local = in_process_prepare_ms(url, args.sessions, args.overhead_calls)
        with serving(url, keys, 1) as base:
            remote = {kind: asyncio.run(one_client_prepare_ms(base, args.sessions,
                                                              args.overhead_calls, kind))
                      for kind in ("raw", "httpx")}
    overhead = {"store": store, "in_process_prepare_p50_ms": round(local, 2),
                "service_prepare_p50_ms": round(remote["raw"], 2),
                "ratio": round(remote["raw"] / local, 2),
                "async_client_prepare_p50_ms": round(remote["httpx"], 2),
                "async_client_ratio": round(remote["httpx"] / local, 2)}
    print(json.dumps(overhead), flush=True)
    return {"load": [asdict(r) for r in results], "overhead": overhead}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stores", default="redis,postgres")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=3000,
                        help="most turns (prepare + record) per configuration")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="most seconds of load per configuration")
    parser.add_argument("--overhead-calls", type=int, default=300)
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw",
                        help="load generator: minimal HTTP/1.1 (default) or AsyncClient")
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    args.workers = [int(w) for w in args.workers.split(",")]
    if args.quick:
        args.sessions, args.turns, args.seconds, args.overhead_calls = 500, 200, 10.0, 50
    with tempfile.TemporaryDirectory() as folder:
        keys = Path(folder) / "keys.toml"
        keys.write_text(f'[tenants.{TENANT}]\nkeys = ["{hash_key(KEY)}"]\n', "utf-8")
        report = {"cores": os.cpu_count(), "client": args.client,
                  "load_average_before": os.getloadavg()[0], **{
            store: run_store(store, args, keys) for store in args.stores.split(",")}}
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2), "utf-8")
    print_table(report)


def print_table(report: dict[str, Any]) -> None:
    print(f"\ncores: {report['cores']}, load generator: {report['client']}, load average "
          f"before: {report['load_average_before']:.2f}")
    print("| store | workers | turns/s | prepare p50 / p99 ms | record p50 / p99 ms | errors "
          "| load average |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for store in ("redis", "postgres"):
        for r in report.get(store, {}).get("load", []):
            print(f"| {store} | {r['workers']} | {r['turns_per_second']} | "
                  f"{r['prepare_p50_ms']} / {r['prepare_p99_ms']} | "
                  f"{r['record_p50_ms']} / {r['record_p99_ms']} | "
                  f"{r['errors']} ({r['error_rate']:.2%}) | {r['load_average']} |")
    for store in ("redis", "postgres"):
        if store in report:
            o = report[store]["overhead"]
            print(f"{store}: prepare p50 in process {o['in_process_prepare_p50_ms']} ms; over "
                  f"HTTP {o['service_prepare_p50_ms']} ms (x{o['ratio']}), through AsyncClient "
                  f"{o['async_client_prepare_p50_ms']} ms (x{o['async_client_ratio']})")


if __name__ == "__main__":
    main()
