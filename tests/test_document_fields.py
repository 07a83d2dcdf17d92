"""Both document sources refuse a request document whose fields have the wrong types, naming
the field, before they compare versions: a version written as text or a timestamp that is not
text had picked the wrong version silently, or failed the source with an untyped error that
left every document out."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.request import Document
from contextwright.errors import InvalidInputError
from contextwright.sources.documents import DocumentSource
from contextwright.sources.retrieval import RetrievalSource

SOURCES = [DocumentSource, RetrievalSource]


def build(source: Any, documents: list[Document]) -> None:
    builder = ContextBuilder(sources=[source()])
    builder.build(BuildPlan.named("rag_qa"), Request(user_input="refund days",
                                                      documents=documents))


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("fields", "named"), [
    ({"version": "10"}, "documents[0].version"),
    ({"version": -1}, "documents[0].version"),
    ({"version": 2.5}, "documents[0].version"),
    ({"version": True}, "documents[0].version"),
    ({"timestamp": datetime.datetime(2024, 1, 1)}, "documents[0].timestamp"),
    ({"timestamp": 20240101}, "documents[0].timestamp"),
])
def test_a_malformed_field_is_refused_by_name(source: Any, fields: dict[str, Any],
                                              named: str) -> None:
    documents = [Document(id="a", text="Refunds take 14 days.", **fields),
                 Document(id="a", text="Refunds take 30 days.", version=3)]
    with pytest.raises(InvalidInputError, match=named.replace("[", r"\[")):
        build(source, documents)


@pytest.mark.parametrize("source", SOURCES)
def test_a_text_version_never_picks_the_version_shown(source: Any) -> None:
    # As text, "9" sorts after "10": the older policy had been shown as the current one.
    documents = [Document(id="a", text="Refunds take 14 days.", version="10"),  # type: ignore[arg-type]
                 Document(id="a", text="Refunds take 30 days.", version="9")]  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="version"):
        build(source, documents)


@pytest.mark.parametrize("source", SOURCES)
def test_well_formed_documents_still_build(source: Any) -> None:
    documents = [Document(id="a", text="Refunds take 14 days.", version=1,
                          timestamp="2024-01-01T00:00:00Z", source="policy.md")]
    build(source, documents)
