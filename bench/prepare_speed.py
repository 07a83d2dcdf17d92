"""Steady-state ``ContextManager.prepare`` latency on a SQLite session, per mode (issue 3).

A session is filled with N messages (English and Chinese, ~60 tokens each), its old rounds are
summarised once, then each step is: prepare(text) — timed — and record(reply), with summary
updates running in the background as in production. Target: ≤ 3 ms median at 10,000 messages
and flat as the session grows (100,000 within 1.2× of 1,000).

    .venv/bin/python bench/prepare_speed.py [--sizes 1000,10000,100000] [--steps 200]
        [--synchronous NORMAL|FULL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from contextwright.manager import ContextManager
from contextwright.modes import RAG_ENHANCED, SLIDING_WINDOW, STRUCTURED, ModesConfig
from contextwright.session import SqliteStore
from contextwright.session.store import SessionKey

USER_LINES = [
    "Can you check order {n} for me? It was supposed to arrive on Tuesday at 12 Park Lane.",
    "帮我看一下订单 {n} 的物流，应该周二送到北京市朝阳区建国路88号。",
    "I also need the invoice for order {n}, addressed to the company, with the tax number.",
    "这个订单 {n} 能不能改成周末配送？平时家里没人，快递放门口不太放心。",
]
REPLY = ("Order {n} left the warehouse yesterday and is with the courier; tracking number "
         "SF{n}88, expected delivery Tuesday before 18:00. 预计周二18点前送达。")
TOOLS = [{"type": "function", "function": {
    "name": f"tool_{i}", "description": f"Tool number {i} that looks things up.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    for i in range(6)]
DOCS = [{"id": f"policy-{i}", "text": f"Refund policy section {i}: refunds within 15 days. " * 8}
        for i in range(5)]


def fill(store: SqliteStore, key: SessionKey, size: int) -> None:
    batch: list[dict[str, str]] = []
    for i in range(size // 2):
        batch.append({"role": "user", "content": USER_LINES[i % 4].format(n=100000 + i)})
        batch.append({"role": "assistant", "content": REPLY.format(n=100000 + i)})
        if len(batch) >= 2000:
            store.append(key, batch)
            batch = []
    if batch:
        store.append(key, batch)


def only(mode: str) -> ModesConfig:
    base = ModesConfig.default()
    return ModesConfig(modes=base.modes, rules=(), default_mode=mode)


def measure(mode: str, size: int, steps: int, folder: Path, synchronous: str) -> float:
    store = SqliteStore(folder / f"{mode}-{size}.db", synchronous=synchronous)
    key = SessionKey(user_id="bench", session_id=f"{mode}-{size}")
    fill(store, key, size)
    cm = ContextManager(store=store, modes=only(mode), background=True)
    extra = {"tools": TOOLS} if mode == STRUCTURED else {}
    extra_docs = {"documents": DOCS} if mode == RAG_ENHANCED else {}
    cm.prepare(key.user_id, key.session_id, "hello", **extra, **extra_docs)  # type: ignore[arg-type]
    cm.record(key.user_id, key.session_id, assistant="hi")
    cm.summarize_now(key.user_id, key.session_id)  # the old rounds, once
    timings = []
    for step in range(steps):
        text = USER_LINES[step % 4].format(n=900000 + step)
        start = time.perf_counter()
        cm.prepare(key.user_id, key.session_id, text, **extra, **extra_docs)  # type: ignore[arg-type]
        timings.append(time.perf_counter() - start)
        cm.record(key.user_id, key.session_id, assistant=REPLY.format(n=900000 + step))
    cm.flush()
    cm.close()
    store.close()
    return statistics.median(timings[steps // 5:]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--synchronous", default="NORMAL", choices=["NORMAL", "FULL"],
                        help="SQLite durability: NORMAL (default) or FULL (fsync per write)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("| mode | " + " | ".join(f"{s:,} msgs" for s in sizes) + " | largest / smallest |")
    print("| --- |" + " --- |" * (len(sizes) + 1))
    with tempfile.TemporaryDirectory() as tmp:
        for mode in (SLIDING_WINDOW, RAG_ENHANCED, STRUCTURED):
            medians = [measure(mode, size, args.steps, Path(tmp), args.synchronous)
                       for size in sizes]
            cells = " | ".join(f"{m:.2f} ms" for m in medians)
            print(f"| {mode} | {cells} | {medians[-1] / medians[0]:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
