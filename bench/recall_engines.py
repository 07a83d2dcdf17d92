"""The two BM25 engines side by side: ``recall.bm25.TurnPostings`` and ``retrieval.Bm25Index``.

Why recall keeps its own engine is said in ``recall.bm25``'s docstring; this times the two.
On 2026-12-07 (a slow, noisy machine): ``TurnPostings.top`` 0.24 ms against ``Bm25Index`` 0.56 ms
at 3,763 turns, 2.33 against 1.82 ms at 37,546 turns (the recall engine used to walk its
postings in Python: 1.11 and 18 ms).

Turns are those of the synthetic session (``bench/synthetic.py``; ``--messages``), analysed
once; queries are the user messages of the turns that would follow. Each engine answers them:
``TurnPostings.top`` the best 8 (what the recaller asks), ``Bm25Index.scores`` every turn's score
plus a top-8 selection (what fusion with dense similarity needs). Also the cost of indexing one
more turn, and of importing numpy.

Run: ``.venv/bin/python bench/recall_engines.py [--messages 100000] [--queries 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextwright.analysis import analyzer
from contextwright.recall import turn_index
from contextwright.recall.bm25 import TurnPostings
from contextwright.retrieval._numpy import np
from contextwright.retrieval.lexical import Bm25Index
from synthetic import make_history, next_message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    terms = analyzer("recall")
    texts = [turn.text for turn in turn_index(make_history(args.messages)).turns]
    counts = [terms.term_counts(text) for text in texts]
    postings, numpy_index = TurnPostings(), Bm25Index(k1=1.2)
    for count in counts:
        postings.add(count)
        numpy_index.add(list(count.elements()))
    asked = (next_message(args.messages + i) for i in range(args.queries * 20))
    users = [str(m["content"]) for m in asked if m.get("role") == "user"][: args.queries]
    queries = [sorted(terms.term_set(text)) for text in users]
    pure = _median_ms(lambda q: postings.top(q, limit=8, min_score=1.0, k1=1.2, b=0.75), queries)
    dense = _median_ms(lambda q: np.argpartition(-numpy_index.scores(q), 8)[:8], queries)
    print(f"{len(texts):,} turns, {len(queries)} queries (next user messages)")
    print(f"TurnPostings.top(limit=8):          {pure:.2f} ms (median)")
    print(f"Bm25Index.scores + top 8 (numpy):   {dense:.2f} ms (median)")
    print(f"TurnPostings.add one turn:          {_add_us(TurnPostings(), counts):.1f} µs")
    print(f"import numpy (fresh interpreter):   {_numpy_import_ms():.0f} ms")


def _median_ms(run: object, queries: list[list[str]]) -> float:
    assert callable(run)
    for query in queries[:5]:
        run(query)  # warm up: first calls pay for imports and allocator growth
    timings = []
    for query in queries:
        start = time.perf_counter()
        run(query)
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def _add_us(index: TurnPostings, counts: list[object]) -> float:
    start = time.perf_counter()
    for count in counts:
        index.add(count)  # type: ignore[arg-type]
    return (time.perf_counter() - start) / len(counts) * 1e6


def _numpy_import_ms() -> float:
    code = "import time; t = time.perf_counter(); import numpy; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return float(out.stdout) * 1000


if __name__ == "__main__":
    main()
