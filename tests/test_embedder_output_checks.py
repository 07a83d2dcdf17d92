"""What an embedder returns is checked before it is cached: a NaN vector made every similarity
NaN, so its passage passed no threshold and was silently never found again (for ever, once in
the SQLite cache), and a wrong shape failed later with a bare numpy error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextwright.errors import ContextwrightError
from contextwright.retrieval import CachedEmbedder, Retriever, SourceDocument
from contextwright.retrieval._numpy import np
from contextwright.retrieval.cache import EmbeddingCache

DOCUMENT = SourceDocument(id="a", text="Refunds are issued within 14 days.")


class Fake:
    """Unit vectors along one axis (every text alike), or a broken answer."""

    name, dim = "fake", 4

    def __init__(self, answer: str = "good") -> None:
        self.answer = answer

    def embed_passages(self, texts: list[str]) -> Any:
        vectors = np.zeros((len(texts), 4), dtype=np.float32)
        vectors[:, 0] = 1.0
        if self.answer == "nan":
            vectors[:] = np.nan
        elif self.answer == "short":
            vectors = vectors[:, :3]
        elif self.answer == "fewer":
            vectors = vectors[1:]
        return vectors

    def embed_queries(self, texts: list[str]) -> Any:
        return Fake().embed_passages(texts)


@pytest.mark.parametrize(("answer", "says"), [("nan", "not finite"), ("short", "shape"),
                                              ("fewer", "shape")])
def test_a_broken_answer_is_refused_by_name(answer: str, says: str) -> None:
    retriever = Retriever(embedder=Fake(answer))
    with pytest.raises(ContextwrightError, match=says):
        retriever.add([DOCUMENT])
    assert retriever.document_count == 0


def test_a_nan_answer_never_reaches_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    with pytest.raises(ContextwrightError):
        Retriever(embedder=CachedEmbedder(Fake("nan"), EmbeddingCache(path))).add([DOCUMENT])
    retriever = Retriever(embedder=CachedEmbedder(Fake(), EmbeddingCache(path)))
    retriever.add([DOCUMENT])
    found = retriever.search("refunds issued within days")
    assert [passage.doc_id for passage in found] == ["a"]
