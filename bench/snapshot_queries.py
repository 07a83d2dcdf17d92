"""What reading snapshots back costs, per sink, as a store fills: the queries the CLI runs.

A redacted snapshot of a ``tool_heavy`` build of a 200-message session (``bench/synthetic.py``)
is stored ``--count`` times under new ids, one second apart, spread over ``--sessions`` manager
sessions. Then, per sink, the median of ``--repeats`` runs of each query:

- ``newest 20``: ``snapshots list`` (the newest 20, no filter);
- ``one session``: every snapshot of one session (``snapshots list --session S`` without a
  limit; a ``count / sessions`` share of the store);
- ``one session, newest 5``;
- ``one plan, newest 20``: a filter read from the stored rows.

Run: ``.venv/bin/python bench/snapshot_queries.py [--count 5000] [--sessions 50]
[--sinks jsonl,sqlite,redis,postgres] [--repeats 5] [--json]``. Redis and PostgreSQL are the
local servers (``--redis-url``, ``--postgres-dsn``); each run uses its own key prefix / schema
and removes it afterwards.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextwright import BuildPlan, Request
from contextwright.observe import Snapshot, SnapshotQuery, SnapshotSink
from contextwright.observe.replay import snapshot_of
from snapshot_overhead import opened_sink
from synthetic import make_history, make_tools

BATCH = 500


def stored_series(count: int, sessions: int) -> list[Snapshot]:
    """``count`` copies of one real snapshot, each with its own id, time and session."""
    request = Request(user_input="Where is my order?", system="You are a support agent.",
                      history=make_history(200), tools=make_tools())
    base = snapshot_of(BuildPlan.named("tool_heavy"), request, redact=True)
    return [replace(base, id=f"{index:08d}", created_at=1_000.0 + index,
                    plan="chat" if index % 10 == 0 else base.plan,
                    session={"user_id": f"user-{index % sessions}",
                             "session_id": f"session-{index % sessions}"})
            for index in range(count)]


QUERIES: tuple[tuple[str, SnapshotQuery], ...] = (
    ("newest 20", SnapshotQuery(limit=20)),
    ("one session", SnapshotQuery(session_id="session-7")),
    ("one session, newest 5", SnapshotQuery(session_id="session-7", limit=5)),
    ("one plan, newest 20", SnapshotQuery(plan="chat", limit=20)),
)


def bench_sink(sink: SnapshotSink, series: list[Snapshot], repeats: int) -> dict[str, Any]:
    for start in range(0, len(series), BATCH):
        sink.write(series[start:start + BATCH])
    row: dict[str, Any] = {}
    for name, query in QUERIES:
        samples, found = [], 0
        for _ in range(repeats):
            began = time.perf_counter()
            found = len(sink.read(query))
            samples.append(time.perf_counter() - began)
        row[name] = {"ms": round(statistics.median(samples) * 1000, 2), "found": found}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--sinks", default="jsonl,sqlite,redis,postgres")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    series = stored_series(args.count, args.sessions)
    size = len(series[0].to_json())
    results: dict[str, Any] = {"count": args.count, "sessions": args.sessions,
                               "snapshot_bytes": size, "sinks": {}}
    with tempfile.TemporaryDirectory() as folder:
        for name in args.sinks.split(","):
            with opened_sink(name, args, Path(folder)) as sink:
                results["sinks"][name] = bench_sink(sink, series, args.repeats)
                sink.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.count:,} snapshots of {size:,} bytes, {args.sessions} sessions; median ms")
    print(f"| sink | {' | '.join(name for name, _ in QUERIES)} |")
    print(f"|---|{'---|' * len(QUERIES)}")
    for name, row in results["sinks"].items():
        cells = " | ".join(f"{row[q]['ms']} ({row[q]['found']})" for q, _ in QUERIES)
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()
