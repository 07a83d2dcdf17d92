"""RetrievalSource: each index's own alpha, the fill tail's threshold, the request's copy of a
corpus document, and the reasons given for the request documents it leaves out."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import Request
from contextwright.errors import InvalidInputError, PlanError
from contextwright.retrieval import Retriever, SourceDocument
from contextwright.retrieval._numpy import np
from contextwright.sources.retrieval import RetrievalSource, read_options

POLICY = "Refunds are issued within {n} days of receiving the returned item."
QUESTION = "How many days until refunds are issued?"


class CountingEmbedder:
    """Unit vectors that depend on nothing but the batch size; counts query embeddings."""

    name, dim = "counting", 8

    def __init__(self) -> None:
        self.queries = 0

    def embed_passages(self, texts: list[str]) -> Any:
        vectors = np.random.default_rng(len(texts)).normal(size=(len(texts), 8))
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

    def embed_queries(self, texts: list[str]) -> Any:
        self.queries += 1
        return self.embed_passages(texts)


def reasons(source: RetrievalSource, request: Request, options: dict[str, Any] | None = None
            ) -> dict[str, str]:
    return {item.key: item.metadata["omitted"] for item in source.build(request, options or {})
            if "omitted" in item.metadata}


def test_a_corpus_is_searched_with_its_own_alpha() -> None:
    embedder = CountingEmbedder()
    corpus = Retriever(embedder=embedder, alpha=1.0)  # lexical only: no query to embed
    corpus.add([SourceDocument(id="a", text=POLICY.format(n=14))])
    items = list(RetrievalSource(corpus).build(Request(user_input="refund days"), {}))
    assert items and items[0].metadata["origin"] == "corpus"
    assert embedder.queries == 0
    list(RetrievalSource(corpus).build(Request(user_input="refund days"), {"alpha": 0.5}))
    assert embedder.queries == 1  # a plan's alpha still applies to every index


@pytest.mark.parametrize("alpha", [1.5, -0.1, float("nan"), True])
def test_a_source_alpha_outside_0_to_1_is_refused_when_made(alpha: float) -> None:
    with pytest.raises(InvalidInputError, match="alpha"):
        RetrievalSource(alpha=alpha)


def test_filled_passages_meet_the_fill_threshold() -> None:
    topics = ["refund window", "shipping speed", "warranty repairs", "gift cards",
              "store hours", "loyalty points", "price matching", "order tracking"]
    documents = [{"id": f"faq-{n}", "source": f"faq-{n}.md",
                  "text": f"FAQ about {t}: our shop answers questions on {t} here. "
                          f"Ask the counter about {t} if anything is unclear."}
                 for n, t in enumerate(topics)]
    request = Request(user_input="Which FAQ explains the shop questions about the refund window?",
                      documents=documents)
    settings = read_options({"fill_budget": True, "similarity_threshold": 0.0,
                             "rerank_top_k": 1, "fill_threshold": 0.9})
    passages = RetrievalSource().passages(request, settings)
    assert [p.doc_id for p in passages] == ["faq-0"]


def test_a_request_document_overrides_the_corpus_copy_of_the_same_id() -> None:
    corpus = Retriever()
    corpus.add([SourceDocument(id="refund_policy", title="refund_policy.md",
                               text=POLICY.format(n=30))])
    request = Request(user_input=QUESTION, documents=[
        {"id": "refund_policy", "source": "refund_policy.md", "text": POLICY.format(n=14)}])
    shown = [(i.metadata["origin"], i.metadata["outdated"], str(i.message.content))
             for i in RetrievalSource(corpus).build(request, {})]
    assert shown == [("request", False, POLICY.format(n=14))]
    kept = [(i.metadata["origin"], i.metadata["outdated"])
            for i in RetrievalSource(corpus).build(request, {"keep_outdated": True})]
    assert kept == [("request", False), ("corpus", True)]


def test_an_older_version_by_title_is_reported_as_such() -> None:
    request = Request(user_input=QUESTION, documents=[
        {"id": "policy-2023", "source": "refund_policy.md", "text": POLICY.format(n=30),
         "version": 1},
        {"id": "policy-2024", "source": "refund_policy.md", "text": POLICY.format(n=14),
         "version": 2}])
    assert reasons(RetrievalSource(), request) == {
        "rag.documents[0]": "an older version of documents[1] (same title)"}


def test_a_document_whose_passage_repeats_a_shown_one_is_reported_as_such() -> None:
    request = Request(user_input=QUESTION, documents=[
        {"id": "faq", "source": "faq.md", "text": POLICY.format(n=14)},
        {"id": "terms", "source": "terms.md",
         "text": POLICY.format(n=14) + "\nSee also the warranty section."}])
    assert reasons(RetrievalSource(), request, {"chunk_size": 16}) == {
        "rag.documents[1]": "its passage repeats one of documents[0]"}


@pytest.mark.parametrize("ids", [("a-copy", "b-copy"), ("z-copy", "a-copy")])
def test_a_repeated_text_names_the_document_shown(ids: tuple[str, str]) -> None:
    request = Request(user_input=QUESTION, documents=[
        {"id": ids[0], "text": POLICY.format(n=14)}, {"id": ids[1], "text": POLICY.format(n=14)}])
    items = list(RetrievalSource().build(request, {}))
    shown = next(i.metadata["document"] for i in items if "document" in i.metadata)
    hidden = 1 - ids.index(shown)
    assert {i.key: i.metadata["omitted"] for i in items if "omitted" in i.metadata} == {
        f"rag.documents[{hidden}]": f"its text repeats that of documents[{1 - hidden}]"}


def test_a_request_document_the_corpus_supersedes_is_reported_as_such() -> None:
    corpus = Retriever()
    corpus.add([SourceDocument(id="policy", title="refund_policy.md", text=POLICY.format(n=14),
                               version=3)])
    request = Request(user_input=QUESTION, documents=[
        {"id": "policy", "source": "refund_policy.md", "text": POLICY.format(n=30),
         "version": 1}])
    assert reasons(RetrievalSource(corpus), request) == {
        "rag.documents[0]": "superseded by a newer version in the corpus"}


def test_a_request_passage_repeating_the_corpus_is_reported_as_such() -> None:
    corpus = Retriever()
    corpus.add([SourceDocument(id="corpus-faq", title="faq.md", text=POLICY.format(n=14))])
    request = Request(user_input=QUESTION, documents=[
        {"id": "mine", "source": "terms.md", "text": POLICY.format(n=14)}])
    assert reasons(RetrievalSource(corpus), request) == {
        "rag.documents[0]": "its passage repeats one shown from the corpus"}


def test_max_passage_tokens_of_zero_is_refused_as_the_plans_fault() -> None:
    with pytest.raises(PlanError, match="max_passage_tokens must be at least 1"):
        read_options({"max_passage_tokens": 0})
