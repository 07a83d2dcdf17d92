"""Steady builds of two source trees, compared output for output.

Runs the same sequence of builds (shipped plans, with and without ``previous=``, synthetic
histories of several sizes from ``bench/synthetic.py``, one message appended between builds,
now and then a tool round appended, a message replaced and one edited in place) once with each
tree's ``src`` on ``sys.path``, and compares every build's ``to_messages("openai")``, report
decisions and ``total_tokens`` exactly. A speed-up of steady builds must change none of them.

Run: ``.venv/bin/python bench/steady_equivalence.py BASE_SRC NEW_SRC [--sizes 300,3000]
[--builds 14]``; exit status 1 and the first differences when the trees disagree.
(``--dump SRC`` writes one tree's results as JSON lines on stdout: what the comparison runs.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
PLANS = ("tool_heavy", "chat", "simple_qa", "rag_qa", "doc_analysis")
INPUTS = ("What is the weather in Shanghai and my last order?", "帮我查一下订单的物流状态。")


def _tool_round(at: int) -> list[dict[str, Any]]:
    """A user message, a call, its JSON result and a reply: appending it ages older results."""
    call_id = f"call_eq_{at}"
    result = {"order_id": f"ORD-{at:06d}", "status": "shipped", "total": f"{at % 97}.50 EUR",
              "eta": f"2024-0{1 + at % 9}-1{at % 10}", "carrier": "DHL", "tracking": f"JD{at}X"}
    return [
        {"role": "user", "content": f"Where is order ORD-{at:06d}?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": "get_order", "arguments": json.dumps({"order_id": at})}}]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
        {"role": "assistant", "content": f"Order ORD-{at:06d} ships with DHL, tracking JD{at}X."},
    ]


def _grow(history: list[dict[str, Any]], step: int, next_message: Any) -> None:
    """The change between two builds: mostly one message appended, sometimes more or an edit."""
    if step % 5 == 3:
        history.extend(_tool_round(len(history)))
        return
    if step % 7 == 4 and len(history) > 60:
        at = len(history) - 40  # replaced by a new object (a caller rewriting its list)
        history[at] = {**history[at], "content": f"{history[at].get('content') or ''} ID-{step}X"}
    if step % 7 == 6 and len(history) > 150:
        at = len(history) - 120  # edited in place: the same dict, other content
        if history[at].get("role") in ("user", "assistant") and not history[at].get("tool_calls"):
            history[at]["content"] = f"changed to code QZ-{step}77 on 2024-05-0{step % 9 + 1}"
    history.append(next_message(len(history)))


def dump(sizes: list[int], builds: int) -> None:
    """Print one JSON line per build: the scenario, the messages' hash, decisions, total."""
    sys.path.insert(0, str(BENCH))
    from contextwright import BuildPlan, ContextBuilder, Request
    from synthetic import make_history, make_tools, next_message

    tools = make_tools()
    for size in sizes:
        for plan_name in PLANS:
            for stable in (False, True):
                history = make_history(size)
                builder = ContextBuilder(tokenizer="o200k_base")
                plan = BuildPlan.named(plan_name).with_budget(available_override=8192)
                last = None
                for step in range(builds):
                    request = Request(user_input=INPUTS[(step // 6) % 2],
                                      system="You are a helpful assistant.", history=history,
                                      tools=tools)
                    ctx = (builder.build(plan, request, previous=last, cache=True) if stable
                           else builder.build(plan, request))
                    last = ctx
                    text = json.dumps(ctx.to_messages("openai"), sort_keys=True,
                                      ensure_ascii=False)
                    print(json.dumps({
                        "case": f"{plan_name} size={size} stable={stable} build={step}",
                        "messages": hashlib.sha256(text.encode()).hexdigest(),
                        "decisions": [repr(d) for d in ctx.report.decisions],
                        "total_tokens": ctx.total_tokens}, ensure_ascii=False), flush=True)
                    _grow(history, step, next_message)


def _run(src: str, sizes: str, builds: int) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": src, "PYTHONHASHSEED": "0"}
    out = subprocess.run([sys.executable, __file__, "--dump", src, "--sizes", sizes,
                          "--builds", str(builds)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="BASE_SRC NEW_SRC")
    parser.add_argument("--dump", metavar="SRC", default=None)
    parser.add_argument("--sizes", default="300,3000")
    parser.add_argument("--builds", type=int, default=14)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.dump:
        dump(sizes, args.builds)
        return 0
    if len(args.trees) != 2:
        parser.error("give two source trees")
    base, new = (_run(tree, args.sizes, args.builds) for tree in args.trees)
    differences = [(a, b) for a, b in zip(base, new, strict=False) if a != b]
    if len(base) != len(new):
        print(f"build counts differ: {len(base)} vs {len(new)}")
    for a, b in differences[:5]:
        print(f"differs: {a['case']}")
        for field in ("messages", "total_tokens"):
            if a[field] != b[field]:
                print(f"  {field}: {a[field]} vs {b[field]}")
        extra = set(a["decisions"]) ^ set(b["decisions"])
        for line in sorted(extra)[:6]:
            print(f"  decision only in {'base' if line in a['decisions'] else 'new'}: {line}")
    print(f"{len(base)} builds compared, {len(differences)} differ")
    return 1 if differences or len(base) != len(new) else 0


if __name__ == "__main__":
    sys.exit(main())
