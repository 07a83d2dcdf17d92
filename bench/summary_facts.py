"""How many exact facts survive incremental summaries, on τ-bench.

Each trajectory's history before its first write action is merged into a running summary five
rounds at a time with ``verified(ExtractiveSummarizer(), …)``, optionally capped at N tokens.
Reported: the share of the id-like facts first seen in user or tool messages
(``required_facts.jsonl``) that the final summary still contains, the summary's mean size next
to the history's, and the time per merge.

    .venv/bin/python bench/summary_facts.py --data ../shared/data/tau-bench-airline-dev
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from contextwright.compress.summarize import ExtractiveSummarizer, Summary, check_summary, verified
from contextwright.core.items import Message, parse_message
from contextwright.tokens import get_tokenizer


def batches_of_rounds(history: Sequence[Message], rounds: int = 5) -> Iterator[list[Message]]:
    grouped: list[list[Message]] = []
    for message in history:
        if message.role == "user" or not grouped:
            grouped.append([])
        grouped[-1].append(message)
    for start in range(0, len(grouped), rounds):
        yield [m for round_ in grouped[start:start + rounds] for m in round_]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("../shared/data/tau-bench-airline-dev"))
    parser.add_argument("--caps", default="none,300,200,100")
    args = parser.parse_args()
    tokenizer = get_tokenizer("o200k_base")
    trajectories = json.loads((args.data / "gpt-4o-airline-dev.json").read_text("utf-8"))
    rows = [json.loads(line) for line in
            (args.data / "required_facts.jsonl").read_text("utf-8").splitlines() if line]
    print("| cap (tokens) | facts kept | mean summary tokens | mean history tokens "
          "| ms per merge |")
    print("| --- | --- | --- | --- | --- |")
    for cap_text in args.caps.split(","):
        cap = None if cap_text == "none" else int(cap_text)
        kept = total = summary_tokens = history_tokens = merges = 0
        start = time.perf_counter()
        for row in rows:
            trajectory = trajectories[row["traj_index"]]["traj"]
            history = [parse_message(m, "trajectory") for m in trajectory[1:row["cut_index"]]]
            summary: Summary | None = None
            for batch in batches_of_rounds(history):
                summary = verified(ExtractiveSummarizer(), summary, batch, language="en",
                                   max_tokens=cap, tokenizer=tokenizer)
                merges += 1
            required = [f["value"] for f in row["facts"]
                        if f["id_like"] and f["first_msg_role"] in ("user", "tool")]
            assert summary is not None
            total += len(required)
            kept += len(required) - len(check_summary(summary, required))
            summary_tokens += tokenizer.count(summary.render("en"))
            history_tokens += sum(tokenizer.count(m.content) for m in history)
        elapsed = time.perf_counter() - start
        print(f"| {cap_text} | {kept}/{total} ({kept / total:.3f}) | "
              f"{summary_tokens / len(rows):.0f} | {history_tokens / len(rows):.0f} | "
              f"{1000 * elapsed / merges:.1f} |", flush=True)


if __name__ == "__main__":
    main()
