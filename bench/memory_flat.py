"""A long-running server's memory over many builds: is it flat once the caches are full?

One process serves a pool of concurrent sessions, as a service sees them: each build picks a
session at random, appends the user's message, builds, and stores the reply. Sessions end after
a random number of turns (a builder session's history is dropped, a manager session is erased)
and new ones of another size take their place, so the process meets far more distinct messages
than its caches may keep. Two sessions in three call ``ContextBuilder.build`` with one of the
shipped plans (tools for ``tool_heavy``, documents for ``rag_qa`` and ``doc_analysis``; budget
4,096), the others ``ContextManager.prepare`` / ``record`` on a ``MemoryStore`` (default modes).
Histories are ``bench/synthetic.py`` (English and Chinese, tool pairs with long JSON results),
20 to 3,000 messages at the start (three in four under 120), growing by a round a turn.

Every ``--every`` builds (after ``gc.collect()``): RSS, the number of objects the collector
tracks, and what the byte-bounded caches hold (``cache_stats``). With ``--tracemalloc`` the
traced peak too (tracing makes the run several times slower). The growth between the first
tenth of the run and its end is the answer: flat means RSS grew less than 5% over that span.

Run: ``make bench-memory`` or ``.venv/bin/python bench/memory_flat.py [--builds 100000]
[--every 10000] [--sessions 64] [--cache-mb N] [--index-mb N] [--tracemalloc] [--trim]
[--json]``. ``--trim`` also reads RSS after glibc's ``malloc_trim``: RSS alone keeps the C heap's
high-water mark, so a rise it shows may be a larger peak met, not more held.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import random
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextwright import (
    BuildPlan,
    ContextBuilder,
    ContextManager,
    Document,
    MemoryStore,
    Request,
    SessionKey,
    cache_stats,
    set_cache_limits,
)
from synthetic import make_history, make_tools, next_message

PLANS = ("chat", "tool_heavy", "rag_qa", "simple_qa", "doc_analysis")
BUDGET = 4096
FLAT_GROWTH = 0.05
"""RSS may grow this share between the first tenth of the run and its end and be called flat."""

REPLIES = ("Done — anything else?", "好的，已经为您处理。", "Your order is on its way.",
           "I checked: the flight leaves at 09:05 from gate 12.")


@dataclass
class Session:
    number: int
    kind: str
    """``builder`` or ``manager``."""
    plan: str
    turns_left: int
    history: list[dict[str, Any]] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)


def _size(rng: random.Random) -> int:
    """Starting messages: most sessions are short, a few are long."""
    roll = rng.random()
    if roll < 0.75:
        return rng.randint(20, 120)
    if roll < 0.97:
        return rng.randint(120, 1_000)
    return rng.randint(1_000, 3_000)


def _documents(rng: random.Random, number: int) -> list[Document]:
    return [Document(id=f"s{number}-d{i}", text=" ".join(
        f"Section {i} of policy {number}: item {rng.randint(1, 10**6)} applies within "
        f"{rng.randint(1, 60)} days. 第{i}节规定{rng.randint(1, 99)}天内有效。"
        for _ in range(rng.randint(5, 40)))) for i in range(rng.randint(2, 12))]


class Server:
    """The sessions of one process and the objects a service keeps for its lifetime."""

    def __init__(self, sessions: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.builder = ContextBuilder(tokenizer="o200k_base")
        self.plans = {name: BuildPlan.named(name).with_budget(available_override=BUDGET)
                      for name in PLANS}
        self.tools = make_tools()
        self.store = MemoryStore()
        self.manager = ContextManager(store=self.store, background=True)
        self.started = 0
        self.pool = [self._new_session() for _ in range(sessions)]

    def _new_session(self) -> Session:
        self.started += 1
        number, rng = self.started, self.rng
        session = Session(number=number, kind=rng.choice(("builder", "builder", "manager")),
                          plan=rng.choice(PLANS), turns_left=rng.randint(10, 100))
        history = make_history(_size(rng), seed=number)
        if session.kind == "manager":
            self.store.append(self._key(session), [m for m in history if m["role"] != "system"])
        else:
            session.history = history
            if session.plan in ("rag_qa", "doc_analysis"):
                session.documents = _documents(rng, number)
        return session

    def _key(self, session: Session) -> SessionKey:
        return SessionKey(user_id=f"user{session.number % 97}", session_id=f"s{session.number}")

    def serve_one(self) -> None:
        """One request: a random session's next turn; the session ends when its turns run out."""
        at = self.rng.randrange(len(self.pool))
        session = self.pool[at]
        if session.kind == "manager":
            self._manager_turn(session)
        else:
            self._builder_turn(session)
        session.turns_left -= 1
        if session.turns_left <= 0:
            if session.kind == "manager":
                key = self._key(session)
                self.manager.erase_session(key.user_id, key.session_id)
            self.pool[at] = self._new_session()

    def _builder_turn(self, session: Session) -> None:
        history = session.history
        user_input = next_message(2 * len(history), seed=session.number)["content"]
        request = Request(user_input=user_input, system="You are a helpful travel assistant.",
                          history=history, documents=session.documents,
                          tools=self.tools if session.plan == "tool_heavy" else [])
        self.builder.build(self.plans[session.plan], request).to_messages("openai")
        history.append({"role": "user", "content": user_input})
        history.append({"role": "assistant", "content": self.rng.choice(REPLIES)})

    def _manager_turn(self, session: Session) -> None:
        key = self._key(session)
        text = next_message(self.rng.randrange(10**6) * 2, seed=session.number)["content"]
        prepared = self.manager.prepare(key.user_id, key.session_id, text)
        prepared.to_messages("openai")
        self.manager.record(key.user_id, key.session_id, assistant=self.rng.choice(REPLIES))

    def close(self) -> None:
        self.manager.flush()
        self.manager.close()


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def trimmed_rss_bytes() -> int | None:
    """RSS after glibc's ``malloc_trim(0)`` hands freed heap pages back (None: no glibc).

    RSS alone keeps the high-water mark of the C heap: pages of objects freed long ago stay
    counted while any object on them lives. After a trim, what is left is closer to what the
    process holds.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    libc.malloc_trim(0)
    return rss_bytes()


def sample(builds: int, started: float, traced: bool, trim: bool = False) -> dict[str, Any]:
    gc.collect()
    stats = cache_stats()
    rss = rss_bytes()
    trimmed = trimmed_rss_bytes() if trim else None
    return {
        "builds": builds, "seconds": round(time.perf_counter() - started, 1),
        "rss_mb": round(rss / 2**20, 1),
        "rss_trimmed_mb": None if trimmed is None else round(trimmed / 2**20, 1),
        "gc_objects": len(gc.get_objects()),
        "cache_mb": round(sum(s.bytes or 0 for s in stats.values()) / 2**20, 1),
        "cache_entries": sum(s.entries for s in stats.values() if s.bytes is not None),
        "other_cache_entries": sum(s.entries for s in stats.values() if s.bytes is None),
        "traced_peak_mb": round(tracemalloc.get_traced_memory()[1] / 2**20, 1) if traced
        else None,
    }


def run(builds: int, every: int, sessions: int, seed: int, traced: bool,
        trim: bool = False) -> dict[str, Any]:
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    server = Server(sessions, seed)
    samples = [sample(0, started, traced, trim)]
    for done in range(1, builds + 1):
        server.serve_one()
        if done % every == 0 or done == builds:
            samples.append(sample(done, started, traced, trim))
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
    server.close()
    first = next((s for s in samples if s["builds"] >= builds // 10 and s["builds"]), samples[-1])
    last = samples[-1]
    growth = (last["rss_mb"] - first["rss_mb"]) / first["rss_mb"]
    trimmed = (None if first["rss_trimmed_mb"] is None else round(
        last["rss_trimmed_mb"] / first["rss_trimmed_mb"] - 1, 4))
    return {"builds": builds, "sessions_started": server.started, "samples": samples,
            "from": first["builds"], "rss_growth": round(growth, 4),
            "rss_trimmed_growth": trimmed,
            "gc_objects_growth": round(last["gc_objects"] / first["gc_objects"] - 1, 4),
            "flat": growth < FLAT_GROWTH}


def print_table(result: dict[str, Any]) -> None:
    print(f"{result['builds']:,} builds, {result['sessions_started']:,} sessions")
    traced = result["samples"][0]["traced_peak_mb"] is not None
    trimmed = result["rss_trimmed_growth"] is not None
    print("| builds | seconds | RSS MB |" + (" RSS after malloc_trim MB |" if trimmed else "")
          + " gc objects | byte-bounded caches MB (approx.) | their entries | entries of the "
          "other caches |" + (" traced peak MB |" if traced else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if trimmed else "")
          + ("---|" if traced else ""))
    for s in result["samples"]:
        cells = [f"{s['builds']:,}", f"{s['seconds']}", f"{s['rss_mb']}"]
        if trimmed:
            cells.append(f"{s['rss_trimmed_mb']}")
        cells += [f"{s['gc_objects']:,}", f"{s['cache_mb']}", f"{s['cache_entries']:,}",
                  f"{s['other_cache_entries']:,}"]
        if s["traced_peak_mb"] is not None:
            cells.append(f"{s['traced_peak_mb']}")
        print("| " + " | ".join(cells) + " |")
    verdict = "flat" if result["flat"] else "NOT flat"
    print(f"RSS growth from build {result['from']:,} to {result['builds']:,}: "
          f"{result['rss_growth']:+.1%} ({verdict}; flat = under {FLAT_GROWTH:.0%}); "
          f"gc objects {result['gc_objects_growth']:+.1%}" + (
              f"; RSS after malloc_trim {result['rss_trimmed_growth']:+.1%}" if trimmed
              else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000, help="sample every N builds")
    parser.add_argument("--sessions", type=int, default=64, help="concurrent sessions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-mb", type=float, default=None,
                        help="the caches' byte budget (default: the library's)")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace the peak")
    parser.add_argument("--trim", action="store_true",
                        help="also read RSS after glibc's malloc_trim (which then lowers the "
                             "next plain readings too)")
    parser.add_argument("--index-mb", type=float, default=None,
                        help="the recall indexes' byte budget (default: the library's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.builds < 1 or args.every < 1 or args.sessions < 1:
        parser.error("--builds, --every and --sessions must be at least 1")
    if args.cache_mb is not None:
        set_cache_limits(int(args.cache_mb * 2**20))
    if args.index_mb is not None:
        set_cache_limits(index_bytes=int(args.index_mb * 2**20))
    result = run(args.builds, args.every, args.sessions, args.seed, args.tracemalloc,
                 args.trim)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
