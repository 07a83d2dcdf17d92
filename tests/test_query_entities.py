"""Robustness of query entities and the embedding cache.

Each test's docstring names the failure it guards against.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np
import pytest

from contextwright.errors import ContextwrightError
from contextwright.retrieval import (
    EmbeddingCache,
    query_entities,
)

# --------------------------------------------------------------------------- retriever



def test_query_entities_do_not_treat_apostrophes_as_quotes() -> None:
    """``_QUOTED`` treats the apostrophes of "What's Alice's" as quote marks, so spans like
    "s alice" become entities and dilute the entity bonus; an in-word apostrophe is no quote."""
    entities = query_entities("What's Alice's order 12345?")
    assert "s alice" not in entities
    entities = query_entities("Don't cancel order ORD-77, it's urgent")
    assert not any("cancel order" in entity for entity in entities)



@pytest.mark.parametrize(("query", "names"), [
    ("What's Alice's order 12345?", {"alice", "12345"}),
    ("Don't cancel order ORD-77, it's urgent", {"ord-77", "77"}),
    ("Is The Beatles' album older than Abbey Road?", {"the beatles", "abbey road"}),
    ("Did The Who play before It's Alive?", {"the who", "alive"}),
    ("When did Melanie paint a sunrise?", {"melanie"}),
])
def test_capitalised_names_lose_leading_question_words_and_possessives(
        query: str, names: set[str]) -> None:
    """A sentence's first word is capitalised for grammar ("What's", "Don't", "Is The"); it
    is not part of the name, and neither is a possessive: no chunk contains "what's alice's"."""
    assert query_entities(query) == names



def test_a_truncated_cache_vector_is_a_typed_error(tmp_path: Any) -> None:
    """``_from_disk`` checks for truncated vectors, but a blob whose size is not a multiple of
    4 bytes makes ``np.frombuffer`` raise a bare ValueError first."""
    path = tmp_path / "cache.db"
    cache = EmbeddingCache(path)
    cache.put("m", ["k"], np.ones((1, 4), dtype=np.float32))
    cache.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE embeddings SET vector = substr(vector, 1, 7)")
    db.commit()
    db.close()
    with pytest.raises(ContextwrightError):
        EmbeddingCache(path).get("m", ["k"])
