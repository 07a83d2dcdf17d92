"""Passages that tie keep the same order whatever requests a RetrievalSource has seen before:
its cached index had been built in the order of the first request's documents, and rows break
ties, so the same request kept one passage from a fresh source and another from a warm one."""

from __future__ import annotations

from contextwright import Request
from contextwright.core.request import Document
from contextwright.sources.retrieval import RetrievalSource

A = Document(id="a", text="Refund policy: alpha rules apply.")
B = Document(id="b", text="Refund policy: gamma rules apply.")
ONE = {"top_k": 1, "rerank_top_k": 1}


def shown(source: RetrievalSource, documents: list[Document]) -> list[str]:
    request = Request(user_input="refund policy rules", documents=documents)
    return [item.metadata["document"] for item in source.build(request, ONE)
            if "omitted" not in item.metadata]


def test_a_tie_is_broken_the_same_way_by_a_fresh_and_a_warm_source() -> None:
    warm = RetrievalSource()
    shown(warm, [A, B])  # caches the index of {a, b}
    assert shown(warm, [B, A]) == shown(RetrievalSource(), [B, A])
    assert shown(RetrievalSource(), [A, B]) == shown(RetrievalSource(), [B, A])
