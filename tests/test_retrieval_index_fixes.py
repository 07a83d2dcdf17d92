"""The retriever's index: document fields checked before indexing, duplicates of outdated text,
the embedding cache across dimensions, and similarities exactly within [0, 1]."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from contextwright.errors import InvalidInputError
from contextwright.retrieval import (
    CachedEmbedder,
    EmbeddingCache,
    Retriever,
    SearchSettings,
    SourceDocument,
)
from contextwright.retrieval._numpy import np

POLICY = "Refunds are issued within {n} days of receiving the returned item."


@pytest.mark.parametrize(("field", "value"), [
    ("version", "2"), ("version", 2.0), ("version", True), ("version", -1),
    ("timestamp", 20240101), ("text", None), ("title", 7), ("id", 3)])
def test_a_field_of_the_wrong_type_is_refused_and_the_index_left_as_it_was(
        field: str, value: object) -> None:
    retriever = Retriever()
    retriever.add([SourceDocument(id="a", title="policy.md", text=POLICY.format(n=30),
                                  version=1)])
    fields: dict[str, Any] = {"id": "b", "title": "policy.md", "text": "Refunds take 10 days.",
                              "version": 2}
    fields[field] = value
    with pytest.raises(InvalidInputError, match=rf"documents\[0\]\.{field} must be"):
        retriever.add([SourceDocument(**fields)])
    assert [p.doc_id for p in retriever.search("refund days")] == ["a"]  # searches still work
    assert retriever.add([SourceDocument(id="b", title="policy.md", text="Refunds take 10 days.",
                                         version=2)]) > 0  # the corrected document goes in
    assert [p.doc_id for p in retriever.search("refund days")] == ["b"]


def test_with_outdated_kept_shared_text_is_shown_as_current_not_outdated() -> None:
    # Two versions with the same paragraph: the copy shown is the current version's.
    retriever = Retriever()
    retriever.add([
        SourceDocument(id="policy-2023", title="refund_policy.md", text=POLICY.format(n=14),
                       version=1),
        SourceDocument(id="policy-2024", title="refund_policy.md", text=POLICY.format(n=14),
                       version=2)])
    for keep in (False, True):
        found = retriever.search("How many days until refunds are issued?", keep_outdated=keep)
        assert [(p.doc_id, p.outdated) for p in found] == [("policy-2024", False)]


def test_search_traced_says_which_document_is_newer_and_which_passage_was_repeated() -> None:
    retriever = Retriever()
    retriever.add([
        SourceDocument(id="old", title="policy.md", text=POLICY.format(n=30), version=1),
        SourceDocument(id="new", title="policy.md", text=POLICY.format(n=21), version=2),
        SourceDocument(id="faq", title="faq.md", text=POLICY.format(n=14)),
        SourceDocument(id="faq-copy", title="faq.md", text=POLICY.format(n=14))])
    trace = retriever.search_traced("refunds days", SearchSettings(similarity_threshold=0.1))
    assert trace.outdated == {"old": "new"}
    assert trace.repeats == {"faq-copy": "faq"}
    assert sorted(p.doc_id for p in trace.passages) == ["faq", "new"]


class _Fixed:
    """An embedder of a given dimension, under one name whatever the dimension."""

    name = "my-embedder"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed_passages(self, texts: list[str]) -> Any:
        vectors = np.ones((len(texts), self.dim), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    embed_queries = embed_passages


def test_a_cached_vector_of_another_dimension_is_embedded_again(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    documents = [SourceDocument(id="a", text=POLICY.format(n=14))]
    Retriever(embedder=CachedEmbedder(_Fixed(4), EmbeddingCache(path))).add(documents)
    wider = Retriever(embedder=CachedEmbedder(_Fixed(8), EmbeddingCache(path)))
    assert wider.add(documents) == 1
    assert wider.search("refunds days", similarity_threshold=0.0)[0].dense == pytest.approx(1.0)
    shared = EmbeddingCache()  # in memory: the same rule
    CachedEmbedder(_Fixed(4), shared).embed_passages(["x"])
    assert CachedEmbedder(_Fixed(8), shared).embed_passages(["x"]).shape == (1, 8)


def test_a_passage_holding_every_query_term_has_similarity_exactly_one() -> None:
    words = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
             "november oscar papa").split()
    rng = random.Random(3)
    retriever = Retriever()
    retriever.add([SourceDocument(id=f"d{i}", text=" ".join(rng.sample(words, 8)))
                   for i in range(40)])
    full = 0
    for _ in range(300):
        query = " ".join(rng.sample(words, rng.randint(1, 4)))
        found = retriever.search(query, similarity_threshold=0.0, rerank_top_k=50, top_k=50)
        for passage in found:
            assert 0.0 <= passage.similarity <= 1.0
            if set(query.split()) <= set(passage.text.split()):
                full += 1
                assert passage.similarity == 1.0
                kept = retriever.search(query, similarity_threshold=1.0, rerank_top_k=50,
                                        top_k=50)
                assert passage.doc_id in {p.doc_id for p in kept}
    assert full > 50
