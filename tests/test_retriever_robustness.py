"""Robustness of the retriever, the lexical index and hybrid turn recall.

Each test's docstring names the failure it guards against.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from contextwright.errors import ContextwrightError, InvalidInputError
from contextwright.retrieval import (
    HybridTurnRecaller,
    RecallTurn,
    Retriever,
    SearchSettings,
    SourceDocument,
    search_tokens,
)


class FlakyEmbedder:
    """Bag-of-words hashed into 64 dims; ``fail`` makes passage embedding raise."""

    name = "flaky-fake"
    dim = 64

    def __init__(self) -> None:
        self.fail = False

    def _vector(self, text: str) -> Any:
        vector = np.zeros(self.dim, dtype=np.float32)
        for token in search_tokens(text):
            vector[int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def embed_queries(self, texts: Sequence[str]) -> Any:
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        if self.fail:
            raise RuntimeError("model crashed")
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)


# --------------------------------------------------------------------------- retriever



def test_a_rejected_update_does_not_delete_the_indexed_version() -> None:
    """An update refused for a bad timestamp marks the old version dead before validating, so
    the document disappears; the indexed version should stay searchable."""
    retriever = Retriever()
    retriever.add([SourceDocument(id="policy", text="The refund window is 30 days.")])
    with pytest.raises(InvalidInputError):
        retriever.add([SourceDocument(id="policy", text="The refund window is 14 days.",
                                      timestamp="last tuesday")])
    retriever.add([SourceDocument(id="other", text="Shipping takes five days.")])
    assert retriever.document_count == 2
    found = retriever.search("refund window", similarity_threshold=0.1)
    assert [p.text for p in found] == ["The refund window is 30 days."]


def test_a_failed_batch_leaves_no_stale_search_cache() -> None:
    """A batch that fails half way has indexed its first documents but not cleared the cached
    eligible rows, so a search serves the replaced version's rows sliced out of the new text
    (text != document.text[start:end]); the index should stay consistent."""
    retriever = Retriever()
    old = "Old policy: the refund window is 30 days for all orders placed online."
    retriever.add([SourceDocument(id="policy", text=old)])
    assert retriever.search("refund window", similarity_threshold=0.1)  # fills the cache
    new = "New: refunds within 14 days."
    with pytest.raises(InvalidInputError):
        retriever.add([SourceDocument(id="policy", text=new),
                       SourceDocument(id="bad", text="x", timestamp="yesterday")])
    for passage in retriever.search("refund window", similarity_threshold=0.1):
        assert passage.end - passage.start == len(passage.text)  # text is document[start:end]


def test_an_embedder_failure_during_add_does_not_break_later_searches() -> None:
    """``Retriever.add`` appends BM25 rows before embedding, so an embedder error leaves the
    vector matrix short by those rows and every later dense search raises IndexError; a failed
    add should leave the index usable (and consistent)."""
    embedder = FlakyEmbedder()
    retriever = Retriever(embedder=embedder)
    embedder.fail = True
    with pytest.raises(RuntimeError):
        retriever.add([SourceDocument(id="fruit", text="Bananas are yellow fruit.")])
    embedder.fail = False
    retriever.add([SourceDocument(id="refund", text="The refund window is 30 days.")])
    found = retriever.search("refund window", similarity_threshold=0.0)
    assert "refund" in [p.doc_id for p in found]


def test_replaced_documents_do_not_skew_bm25_statistics() -> None:
    """Replaced versions' rows stay in the BM25 index (df, N, mean length), so a document
    re-indexed many times loses its terms' idf and drops under the threshold; search results
    should match a fresh index over the same live documents."""
    def docs(revision: int) -> list[SourceDocument]:
        return [SourceDocument(id="refund",
                               text=f"Refunds are accepted within 30 days. Rev {revision}."),
                SourceDocument(id="ship", text="Shipping takes five business days.")]

    fresh = Retriever()
    fresh.add(docs(30))
    updated = Retriever()
    for revision in range(31):
        updated.add(docs(revision))
    query = "refunds shipping"  # search_tokens does not stem: "refund" never matches "Refunds"
    assert ({p.doc_id for p in updated.search(query)}
            == {p.doc_id for p in fresh.search(query)} == {"refund", "ship"})


def test_search_refuses_an_alpha_outside_zero_and_one() -> None:
    """``Retriever.__init__`` refuses alpha outside [0, 1] but ``search`` takes any, and with an
    embedder a negative alpha yields "calibrated" similarities above 1; it should raise
    InvalidInputError like the constructor."""
    retriever = Retriever(embedder=FlakyEmbedder())
    retriever.add([SourceDocument(id="d", text="Bananas are yellow fruit.")])
    with pytest.raises(InvalidInputError):
        retriever.search("bananas yellow", alpha=-1.0, similarity_threshold=0.0)


def test_hybrid_recaller_survives_an_embedder_failure() -> None:
    """``HybridTurnRecaller._sync`` records the BM25 rows before embedding, so after one
    embedder error those turns are never embedded and every later rank raises IndexError."""
    embedder = FlakyEmbedder()
    recaller = HybridTurnRecaller(embedder)
    turns = [RecallTurn(index=0, text="hello there", key="k0"),
             RecallTurn(index=2, text="my order ORD-1 is late", key="k1")]
    embedder.fail = True
    with pytest.raises(RuntimeError):
        recaller.rank("order late", turns, limit=5)
    embedder.fail = False
    ranked = recaller.rank("order late", turns, limit=5)
    assert ranked and ranked[0][0] == 1


def test_recall_is_not_skewed_by_another_session_with_the_same_first_turn() -> None:
    """Sessions are keyed by their first turn, so two histories that open with the same
    greeting share one BM25 index and one session's turns change the other's ranking; a
    history's ranking should not depend on which other histories were ranked before."""
    def turns(texts: list[str]) -> list[RecallTurn]:
        return [RecallTurn(index=2 * i, text=t, key=f"h{i}") for i, t in enumerate(texts)]

    greeting = "Hi! How can I help you today?"
    alice = turns([greeting, "I want a refund for my kettle", "Please change the shipping address"])
    bob = turns([greeting] + [f"refund question number {i} about refund" for i in range(30)])
    query = "refund shipping"
    alone = HybridTurnRecaller().rank(query, alice, limit=5)
    shared = HybridTurnRecaller()
    shared.rank(query, bob, limit=5)
    assert [p for p, _ in shared.rank(query, alice, limit=5)] == [p for p, _ in alone]



def test_a_recaller_cache_size_of_zero_does_not_crash() -> None:
    """With ``max_sessions=0`` the new entry is evicted and then ``move_to_end`` raised a bare
    KeyError; zero should mean "no caching" (or be refused with a typed error)."""
    try:
        HybridTurnRecaller(max_sessions=0).rank(
            "x", [RecallTurn(index=0, text="x y", key="a")], limit=1)
    except ContextwrightError:
        pass


@pytest.mark.parametrize("settings", [
    {"top_k": -1}, {"rerank_top_k": -2}, {"top_k": 2.5}, {"similarity_threshold": float("nan")},
    {"similarity_threshold": -0.1}, {"similarity_threshold": 1.2},
])
def test_search_settings_out_of_range_are_refused(settings: dict[str, Any]) -> None:
    """A negative count was read as 0 and a NaN threshold dropped every passage, silently."""
    with pytest.raises(InvalidInputError):
        SearchSettings(**settings)
