"""Duplicate passages are dropped by digests computed at indexing, exactly as by their texts.

A search keys each candidate passage by a digest of its whitespace-normalised text (a one-chunk
passage's digest is computed when the chunk is indexed) and drops the worse of two equal ones.
These tests hold that to the plain rule, written here: take every candidate passage, best fused
score first, keep the first of each whitespace-normalised text, rerank — on corpora full of
copies, whitespace variants, titled copies (equal text, other scores) and merged runs.
"""

from __future__ import annotations

import random

import pytest

from contextwright.retrieval import RetrievedChunk, Retriever, SourceDocument
from contextwright.retrieval import retriever as retriever_module
from contextwright.retrieval.rerank import FusionReranker


def corpus(seed: int) -> list[SourceDocument]:
    rng = random.Random(seed)
    sentences = [f"Refund rule {n}: a refund needs receipt number {n % 7}." for n in range(30)]
    documents: list[SourceDocument] = []
    for n in range(40):
        text = ("\n\n" if rng.random() < 0.5 else " ").join(rng.sample(sentences,
                                                                      rng.randint(1, 8)))
        if documents and rng.random() < 0.4:  # a copy of an earlier document
            text = documents[rng.randrange(len(documents))].text
            text = text.replace(" ", "  ") if rng.random() < 0.5 else text
        # A title is indexed with the chunks: equal texts then score differently.
        title = f"refund receipt {n}" if rng.random() < 0.3 else None
        documents.append(SourceDocument(id=f"d{n}", title=title, text=text))
    return documents


QUERIES = ["refund receipt number 3", "refund rule 12", "receipt 5 refund needs", "rule 29",
           "a refund needs a receipt number"]


def every_candidate(retriever: Retriever, query: str, top_k: int,
                    monkeypatch: pytest.MonkeyPatch) -> list[RetrievedChunk]:
    """What the search would hand the reranker without dropping duplicates."""
    with monkeypatch.context() as patch:
        patch.setattr(retriever_module, "_distinct",
                      lambda runs: [(run.doc_id, run.hits) for run in runs])
        return retriever.search(query, top_k=top_k, rerank_top_k=1_000,
                                similarity_threshold=0.05)


def plain_distinct(passages: list[RetrievedChunk]) -> list[RetrievedChunk]:
    seen: set[str] = set()
    kept = []
    for passage in sorted(passages, key=lambda p: (-p.fused, p.doc_id, p.start)):
        text = " ".join(passage.text.split())
        if text not in seen:
            seen.add(text)
            kept.append(passage)
    return kept


@pytest.mark.parametrize("seed", range(6))
def test_search_drops_the_same_duplicates_as_comparing_texts(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = Retriever(chunk_size=24)
    retriever.add(corpus(seed))
    merged = dropped = False
    for query in QUERIES:
        for top_k in (8, 64):
            got = retriever.search(query, top_k=top_k, rerank_top_k=1_000,
                                   similarity_threshold=0.05)
            candidates = every_candidate(retriever, query, top_k, monkeypatch)
            expected = FusionReranker().rerank(query, plain_distinct(candidates), limit=1_000)
            assert got == expected
            merged |= any(len(p.chunks) > 1 for p in got)
            dropped |= len(got) < len(candidates)
    assert merged and dropped  # merged runs and duplicates were both met
