"""Build latency of contextwright next to LangChain ``trim_messages`` and LlamaIndex ``Memory``.

Histories of 100 / 1,000 / 10,000 / 100,000 messages (~60 o200k tokens each, English and
Chinese, tool-call pairs with long JSON results; ``bench/synthetic.py``), budget 8,192 tokens.

- cold: the first build over a history in a process whose caches are empty;
- steady state: append one message, rebuild (for contextwright: all sources, render to OpenAI
  messages with validation, report); median over the turns. The input stays the same, as in
  the calls of an agent loop's turn;
- a chat (``chat`` only): each build asks a new user message, which is then appended with a
  reply, so every build ranks the session's turns for a new input and shows turns it may never
  have shown.

contextwright runs two shipped plans: ``tool_heavy`` (tiered tool results and the digest of
omitted turns) and ``chat`` (relevance-selected history: lexical recall over the whole session,
``recall_share`` 0.6, ``recall_limit`` 64); the peers' ratios are to ``tool_heavy``.

Peers, same data, same process: LangChain ``trim_messages`` with an exact o200k counter that
counts like ``ChatOpenAI.get_num_tokens_from_messages`` and with ``count_tokens_approximately``;
LlamaIndex ``Memory`` (put one message, get). Their per-turn cost is what an application pays:
LangChain re-trims the whole list; LlamaIndex trims on put. LlamaIndex is loaded with at most the
last 2,000 messages (its loading is quadratic in the history: 10,000 messages take ~30 s) — its
per-turn cost depends on the active window, not on the archive.

Run: ``make bench-speed`` or ``.venv/bin/python bench/build_speed.py [--sizes 100,1000]
[--turns 100] [--json] [--no-peers] [--repeats 3] [--profile PLAN]``. Needs the ``bench``
extra. On a shared machine use ``--repeats``: contextwright's cases run that many times and the
medians are shown. ``--profile PLAN`` prints where PLAN's steady builds spend their time instead.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextwright import BuildPlan, ContextBuilder, FinalContext, Request, clear_caches
from peers import LangChainSession, LlamaIndexSession, peer_versions
from synthetic import make_history, make_tools, next_message

BUDGET = 8192
SYSTEM = "You are a travel and weather assistant. 你是出行与天气助手。Answer briefly."
USER_INPUT = "明天上海的天气怎么样？Should I book the 9am flight?"
LLAMAINDEX_MAX_LOAD = 2_000


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _turns_for(size: int, turns: int, slow: bool) -> int:
    """Fewer turns for slow peers on big histories (the run must end in minutes)."""
    if not slow:
        return turns
    return max(3, min(turns, 200_000 // max(size, 1)))


def bench_contextwright(history: list[dict[str, Any]], turns: int, plan_name: str = "tool_heavy",
                        stable: bool = False, chatting: bool = False) -> dict[str, float]:
    """Cold and steady builds of ``plan_name``; ``stable``: each build continues the last.

    A stable build is what ``ContextManager`` and an agent loop keeping the provider's prompt
    cache warm run: ``previous`` is the last call's context, so the build keeps its layout and
    appends (``cache=True`` from the first call).

    By default every build asks the same input and one message is appended between builds
    (the calls of an agent loop, whose input stays while its turn is open). ``chatting``: each
    build's input is a new user message, appended with a reply after the build (a chat: every
    call's recall is ranked for a new input, and the turns it recalls were often never shown).
    """
    builder = ContextBuilder(tokenizer="o200k_base")
    plan = BuildPlan.named(plan_name).with_budget(available_override=BUDGET)
    tools = make_tools()
    last: list[FinalContext] = []

    def build(user_input: str = USER_INPUT) -> int:
        request = Request(user_input=user_input, system=SYSTEM, history=history, tools=tools)
        if stable:
            ctx = builder.build(plan, request, previous=last[-1] if last else None, cache=True)
            last[:] = [ctx]
        else:
            ctx = builder.build(plan, request)
        ctx.to_messages("openai")
        return ctx.total_tokens

    clear_caches()
    gc.collect()  # the garbage of generating the data is not the build's
    start = time.perf_counter()
    build()
    cold = time.perf_counter() - start
    samples = []
    for _ in range(turns):
        user_input, after = _next_step(history, chatting)
        start = time.perf_counter()
        build(user_input)
        samples.append(time.perf_counter() - start)
        history.extend(after)
    return {"cold_ms": cold * 1000, "steady_ms": _median_ms(samples), "turns": turns}


def _next_step(history: list[dict[str, Any]], chatting: bool
               ) -> tuple[str, list[dict[str, Any]]]:
    """The next steady build's input, and what to append to the history after it.

    An agent loop's call: one message appended now, the same input. A chat's: a new user
    message as the input, appended with a reply after the build.
    """
    if chatting:
        at = len(history) + len(history) % 2  # even: a user message, then the reply
        asked = next_message(at)
        return str(asked["content"]), [asked, next_message(at + 1)]
    history.append(next_message(len(history)))
    return USER_INPUT, []


def profile_steady(size: int, turns: int, plan_name: str, top: int = 25,
                   stable: bool = False, chatting: bool = False) -> str:
    """Where ``turns`` steady builds of ``plan_name`` spend their time, as pstats text.

    The cold build runs first, unprofiled; the functions are listed by their own time and by
    their cumulative time (the profiler slows small calls down more than big ones, so shares
    are a guide, not a measurement).
    """
    history = make_history(size)
    builder = ContextBuilder(tokenizer="o200k_base")
    plan = BuildPlan.named(plan_name).with_budget(available_override=BUDGET)
    tools = make_tools()

    last: list[FinalContext] = []

    def build(user_input: str = USER_INPUT) -> None:
        request = Request(user_input=user_input, system=SYSTEM, history=history, tools=tools)
        if stable:
            last[:] = [builder.build(plan, request, previous=last[-1] if last else None,
                                     cache=True)]
        else:
            last[:] = [builder.build(plan, request)]
        last[-1].to_messages("openai")

    clear_caches()
    build()
    profiler = cProfile.Profile()
    for _ in range(turns):
        user_input, after = _next_step(history, chatting)
        profiler.enable()
        build(user_input)
        profiler.disable()
        history.extend(after)
    out = io.StringIO()
    kind = "stable (previous)" if stable else "steady"
    each = ", a new input each" if chatting else ""
    out.write(f"## {plan_name}, {size:,} messages, {turns} {kind} builds{each}\n")
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def _peer_turns(put: Callable[[dict[str, Any]], None], get: Callable[[], object],
                start_index: int, turns: int) -> float:
    samples = []
    for turn in range(turns):
        message = next_message(start_index + turn)
        start = time.perf_counter()
        put(message)
        get()
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def bench_langchain(history: list[dict[str, Any]], turns: int, counter: str
                    ) -> dict[str, float]:
    messages = [{"role": "system", "content": SYSTEM}, *history,
                {"role": "user", "content": USER_INPUT}]
    gc.collect()
    start = time.perf_counter()
    session = LangChainSession(messages, BUDGET, counter=counter)  # type: ignore[arg-type]
    session.get()
    cold = time.perf_counter() - start
    steady = _peer_turns(session.put, session.get, len(history), turns)
    return {"cold_ms": cold * 1000, "steady_ms": steady, "turns": turns}


def bench_llamaindex(history: list[dict[str, Any]], turns: int) -> dict[str, float]:
    loaded = history[-LLAMAINDEX_MAX_LOAD:]
    while loaded and loaded[0]["role"] == "tool":  # never start on an orphan result
        loaded = loaded[1:]
    messages = [{"role": "system", "content": SYSTEM}, *loaded]
    gc.collect()
    start = time.perf_counter()
    session = LlamaIndexSession(messages, BUDGET)
    session.get()
    cold = time.perf_counter() - start
    steady = _peer_turns(session.put, session.get, len(history), turns)
    return {"cold_ms": cold * 1000, "steady_ms": steady, "turns": turns,
            "loaded_messages": len(loaded)}


def bench_repeated(size: int, turns: int, plan_name: str, repeats: int,
                   stable: bool = False, chatting: bool = False) -> dict[str, float]:
    """``bench_contextwright`` ``repeats`` times (each on a fresh history): medians of the runs.

    The machine may be shared; one run's numbers move with whatever else is running.
    """
    runs = [bench_contextwright(make_history(size), turns, plan_name, stable, chatting)
            for _ in range(repeats)]
    return {"cold_ms": statistics.median(r["cold_ms"] for r in runs),
            "steady_ms": statistics.median(r["steady_ms"] for r in runs), "turns": turns,
            "repeats": repeats}


def run(sizes: list[int], turns: int, peers: bool = True, repeats: int = 1) -> dict[str, Any]:
    results: dict[str, Any] = {"budget": BUDGET, "versions": peer_versions(), "sizes": {}}
    for size in sizes:
        row: dict[str, Any] = {}
        row["contextwright"] = bench_repeated(size, turns, "tool_heavy", repeats)
        row["contextwright_chat"] = bench_repeated(size, turns, "chat", repeats)
        row["contextwright_stable"] = bench_repeated(size, turns, "tool_heavy", repeats, True)
        row["contextwright_chat_stable"] = bench_repeated(size, turns, "chat", repeats, True)
        row["contextwright_chatting"] = bench_repeated(size, turns, "chat", repeats,
                                                       chatting=True)
        results["sizes"][str(size)] = row
        if not peers:
            print(f"done {size}", file=sys.stderr)
            continue
        row["langchain_exact"] = bench_langchain(make_history(size),
                                                 _turns_for(size, turns, slow=True), "exact")
        row["langchain_approx"] = bench_langchain(make_history(size),
                                                  _turns_for(size, turns * 10, slow=True),
                                                  "approx")
        row["llamaindex_memory"] = bench_llamaindex(make_history(size), min(turns, 50))
        print(f"done {size}", file=sys.stderr)
    return results


def print_table(results: dict[str, Any]) -> None:
    first = next(iter(results["sizes"].values()), {})
    peers = [p for p in ("langchain_exact", "langchain_approx", "llamaindex_memory")
             if p in first]
    print(f"budget {results['budget']} tokens; " + ", ".join(
        f"{k} {v}" for k, v in results["versions"].items()))
    print("| " + " | ".join(["messages", "cw tool_heavy cold", "cw tool_heavy steady",
                              "cw chat (recall) cold", "cw chat (recall) steady",
                              "cw tool_heavy stable", "cw chat stable",
                              "cw chat, a new input each call",
                              *(f"{p} steady (× cw tool_heavy)" for p in peers)]) + " |")
    print("|---" * (8 + len(peers)) + "|")
    for size, row in results["sizes"].items():
        cw, chat = row["contextwright"], row["contextwright_chat"]
        cells = [f"{row[p]['steady_ms']:.2f} ms ({row[p]['steady_ms'] / cw['steady_ms']:.0f}×)"
                 for p in peers]
        print("| " + " | ".join([f"{int(size):,}", f"{cw['cold_ms']:.1f} ms",
                                  f"{cw['steady_ms']:.3f} ms", f"{chat['cold_ms']:.1f} ms",
                                  f"{chat['steady_ms']:.3f} ms",
                                  f"{row['contextwright_stable']['steady_ms']:.3f} ms",
                                  f"{row['contextwright_chat_stable']['steady_ms']:.3f} ms",
                                  f"{row['contextwright_chatting']['steady_ms']:.3f} ms",
                                  *cells]) + " |")
    sizes = list(results["sizes"])
    if "1000" in sizes and "100000" in sizes:
        flat = (results["sizes"]["100000"]["contextwright"]["steady_ms"]
                / results["sizes"]["1000"]["contextwright"]["steady_ms"])
        print(f"contextwright steady 100,000 / 1,000 messages: {flat:.2f}×")
        flat = (results["sizes"]["100000"]["contextwright_chat"]["steady_ms"]
                / results["sizes"]["1000"]["contextwright_chat"]["steady_ms"])
        print(f"contextwright chat (recall) steady 100,000 / 1,000 messages: {flat:.2f}×")
        flat = (results["sizes"]["100000"]["contextwright_chatting"]["steady_ms"]
                / results["sizes"]["1000"]["contextwright_chatting"]["steady_ms"])
        print(f"contextwright chat, a new input each call, 100,000 / 1,000 messages: {flat:.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-peers", action="store_true",
                        help="time contextwright only (no LangChain / LlamaIndex runs)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="run contextwright's cases this many times; report the medians")
    parser.add_argument("--profile", metavar="PLAN", default=None,
                        help="instead of timing: profile PLAN's steady builds at each size "
                             "and print where the time goes")
    parser.add_argument("--stable", action="store_true",
                        help="with --profile: builds that continue the previous one "
                             "(previous=, cache=True)")
    parser.add_argument("--chatting", action="store_true",
                        help="with --profile: each build asks a new input (a chat), which is "
                             "then appended with a reply")
    args = parser.parse_args()
    if args.profile:
        for size in (int(s) for s in args.sizes.split(",")):
            print(profile_steady(size, args.turns, args.profile, stable=args.stable,
                                chatting=args.chatting))
        return
    results = run([int(s) for s in args.sizes.split(",")], args.turns, peers=not args.no_peers,
                  repeats=args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_table(results)


if __name__ == "__main__":
    main()
