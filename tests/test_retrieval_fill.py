"""Retrieval that fills the budget: top passages first, then the rest down to ``fill_threshold``."""

from __future__ import annotations

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import PlanError
from contextwright.retrieval import Retriever, SourceDocument, chunk_document
from contextwright.retrieval.retriever import indexed_text
from contextwright.sources.retrieval import RetrievalSource, read_options
from contextwright.tokens import get_tokenizer

TOPICS = ["refund window", "shipping speed", "warranty repairs", "gift cards", "store hours",
          "loyalty points", "price matching", "order tracking"]


def shop_documents() -> list[dict[str, str]]:
    return [{"id": f"faq-{n}", "source": f"faq-{n}.md",
             "text": f"FAQ about {topic}: our shop answers questions on {topic} here. "
                     f"Ask the counter about {topic} if anything is unclear."}
            for n, topic in enumerate(TOPICS)]


def rag_plan(budget: int, **options: object) -> BuildPlan:
    return (BuildPlan.builder("rag").add("user").add("rag", options=options)
            .budget(available_override=budget).build())


def kept_documents(budget: int, **options: object) -> list[str]:
    request = Request(user_input="Which FAQ explains the shop questions about the refund window?",
                      documents=shop_documents())
    ctx = ContextBuilder(sources=[RetrievalSource()]).build(rag_plan(budget, **options), request)
    return [label.split(".md")[0] for label, section in zip(ctx.labels, ctx.sections, strict=True)
            if section == "rag" and label is not None]


def test_without_fill_only_the_top_passages_go_in_however_large_the_budget() -> None:
    assert len(kept_documents(5000, similarity_threshold=0.0, rerank_top_k=3)) == 3


def test_fill_budget_lets_the_budget_decide_how_many_passages_go_in() -> None:
    # Every FAQ shares a few weak words with the question ("shop", "questions"): they pass a
    # fill threshold of 0, not the top threshold.
    small = kept_documents(250, similarity_threshold=0.1, rerank_top_k=1, fill_budget=True,
                           fill_threshold=0.0)
    large = kept_documents(5000, similarity_threshold=0.1, rerank_top_k=1, fill_budget=True,
                           fill_threshold=0.0)
    assert 1 <= len(small) < len(large) == len(TOPICS)
    assert small[0] == large[0] == "faq-0"  # the best passage leads either way


def test_fill_threshold_still_keeps_unrelated_passages_out() -> None:
    request = Request(user_input="refund window rules", documents=[
        *shop_documents(), {"id": "poem", "text": "Roses are red and violets are blue."}])
    items = list(RetrievalSource().build(request, {"fill_budget": True, "fill_threshold": 0.1}))
    documents = {item.metadata["document"] for item in items if "omitted" not in item.metadata}
    assert "faq-0" in documents and "poem" not in documents
    left_out = {item.key: item.metadata["omitted"] for item in items
                if "omitted" in item.metadata}  # each says why
    assert "not retrieved" in left_out[f"rag.documents[{len(request.documents) - 1}]"]


def test_the_confident_top_passages_come_before_the_filling_ones() -> None:
    request = Request(user_input="shop refund window", documents=shop_documents())
    settings = read_options({"fill_budget": True, "similarity_threshold": 0.9,
                             "rerank_top_k": 1, "fill_threshold": 0.0}, 0.5)
    passages = RetrievalSource().passages(request, settings)
    assert passages[0].doc_id == "faq-0" and passages[0].similarity >= 0.9
    assert all(p.similarity < 0.9 for p in passages[1:]) and len(passages) == len(TOPICS)


@pytest.mark.parametrize(("name", "value"), [("fill_budget", "yes"), ("fill_threshold", -1)])
def test_bad_fill_options_are_plan_errors(name: str, value: object) -> None:
    with pytest.raises(PlanError, match=name):
        read_options({name: value}, 0.5)


def test_the_item_names_the_document_and_the_label_names_the_paragraphs() -> None:
    request = Request(user_input="refund window", documents=shop_documents()[:1])
    (passage,) = RetrievalSource().build(request, {})
    assert passage.metadata["document"] == "faq-0"
    assert passage.label == "faq-0.md §1"


def test_a_chunk_is_indexed_under_its_document_title() -> None:
    # The passage never names the university; only the title connects it to the question.
    retriever = Retriever()
    retriever.add([
        SourceDocument(id="ku", title="University of Kansas", text="It was founded in 1865."),
        SourceDocument(id="other", title="Some college", text="It was founded in 1901.")])
    found = retriever.search("When was the University of Kansas founded?",
                             similarity_threshold=0.0, rerank_top_k=2)
    assert found[0].doc_id == "ku"
    assert found[0].text == "It was founded in 1865."  # the title is not pasted into the text


def test_indexed_text_does_not_repeat_a_title_the_chunk_starts_with() -> None:
    doc = SourceDocument(id="d", title="Kansas", text="Kansas is a state.")
    first = chunk_document(doc, get_tokenizer("o200k_base"))[0]
    assert indexed_text(doc, first) == "Kansas is a state."
    titled = SourceDocument(id="d", title="Notes", text="Kansas is a state.")
    assert indexed_text(titled, first) == "Notes\n\nKansas is a state."


def test_shipped_rag_plans_fill_the_budget() -> None:
    for name in ("rag_qa", "doc_analysis"):
        spec = BuildPlan.named(name).spec("rag")
        assert spec is not None and spec.options.get("fill_budget") is True


def test_fill_limit_bounds_how_many_chunks_a_filling_search_takes() -> None:
    request = Request(user_input="shop questions", documents=shop_documents())
    settings = read_options({"fill_budget": True, "fill_threshold": 0.0, "fill_limit": 3,
                             "top_k": 1}, 0.5)
    assert len(RetrievalSource().passages(request, settings)) == 3
