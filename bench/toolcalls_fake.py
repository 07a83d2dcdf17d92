"""The tool-call evaluation against the tests' fake model: checks the harness, not a model.

Starts the deterministic reader of ``tests/fakes/toolcall_model.py`` on 127.0.0.1 (a
chat-completions server with an 8,192-token window that follows a few written rules) and runs
``contextwright eval toolcalls`` on the 30 built-in tasks through the real ``openai`` SDK. The
numbers say how those rules meet each configuration's context; they are NOT the accuracy of
any language model. Run from the repo root::

    .venv/bin/python bench/toolcalls_fake.py [--budget 5120] [--plan chat] [--families]

``--families`` adds the correct count per task family and configuration.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from contextwright.evaluate.toolcalls import (
    DEFAULT_BUDGET,
    ToolcallRun,
    builtin_tasks,
    format_markdown,
    make_client,
    make_configs,
    run_toolcalls,
)
from fakes.openai_server import FakeOpenAIServer
from fakes.toolcall_model import WINDOW, ReadingModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET)
    parser.add_argument("--plan", action="append", default=[])
    parser.add_argument("--families", action="store_true")
    args = parser.parse_args()
    tasks = builtin_tasks()
    configs = make_configs(["a", "b", "c"], args.plan)
    with FakeOpenAIServer(responder=ReadingModel()) as server:
        client = make_client(server.base_url, "not-needed", max_retries=0)
        run = run_toolcalls(tasks, configs, client=client, model="fake-reader",
                            budget=args.budget)
    print(f"fake reader (window {WINDOW:,} tokens) — not a language model\n")
    print(format_markdown(run))
    if args.families:
        print()
        print(_families(run, [c.key for c in configs]))


def _families(run: ToolcallRun, keys: list[str]) -> str:
    correct = Counter((o.family, o.config) for o in run.outcomes if o.verdict == "correct")
    totals = Counter((o.family, o.config) for o in run.outcomes)
    families = list(dict.fromkeys(o.family for o in run.outcomes))
    lines = ["| family | " + " | ".join(keys) + " |", "|" + " --- |" * (len(keys) + 1)]
    for family in families:
        cells = [f"{correct[family, k]}/{totals[family, k]}" for k in keys]
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
