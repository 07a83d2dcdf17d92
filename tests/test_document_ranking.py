"""Documents as given: which are kept when they do not all fit, and in what order they show."""

from __future__ import annotations

import subprocess
import sys

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.plan import plan_from_mapping
from contextwright.errors import PlanError
from contextwright.sources.documents import DocumentSource, relevance_order

TOPICS = ["shipping speed", "warranty repairs", "gift cards", "store hours", "loyalty points",
          "refund window", "price matching", "order tracking"]
QUESTION = "How long is the refund window for returned shoes?"


def shop_documents(**scores: float) -> list[dict[str, object]]:
    """One FAQ per topic, each about 40 tokens; ``scores`` by document id."""
    documents: list[dict[str, object]] = []
    for n, topic in enumerate(TOPICS):
        doc: dict[str, object] = {
            "id": f"faq-{n}", "source": f"faq-{n}.md",
            "text": f"FAQ about {topic}. Our counter staff explain {topic} to every customer "
                    f"who asks, and the printed leaflet on {topic} sits next to the till."}
        if doc["id"] in scores:
            doc["score"] = scores[str(doc["id"])]
        documents.append(doc)
    return documents


def plan(budget: int, **options: object) -> BuildPlan:
    return (BuildPlan.builder("docs").add("user").add("rag", max_tokens=budget, options=options)
            .budget(available_override=4000).build())


def shown(budget: int, documents: list[dict[str, object]], **options: object) -> list[str]:
    """Document ids in the rendered order."""
    ctx = ContextBuilder().build(plan(budget, **options),
                                 Request(user_input=QUESTION, documents=documents))
    return [label.split(".md")[0] for label, section in zip(ctx.labels, ctx.sections, strict=True)
            if section == "rag" and label is not None]


def test_when_everything_fits_the_documents_show_exactly_as_given() -> None:
    assert shown(4000, shop_documents()) == [f"faq-{n}" for n in range(len(TOPICS))]


def test_without_scores_the_documents_the_question_is_about_are_the_ones_kept() -> None:
    kept = shown(120, shop_documents())
    assert "faq-5" in kept, "the refund FAQ answers the question, wherever it sits in the list"
    assert len(kept) < len(TOPICS)


def test_kept_documents_without_scores_keep_their_given_order() -> None:
    documents = shop_documents()
    documents[1]["text"] = f"{documents[1]['text']} Refund questions go to the returns desk."
    kept = shown(150, documents)
    assert {"faq-1", "faq-5"} <= set(kept)
    assert kept == sorted(kept, key=lambda doc_id: int(doc_id.split("-")[1]))


def test_rank_given_keeps_the_first_documents_as_before() -> None:
    kept = shown(120, shop_documents(), rank="given")
    assert kept == [f"faq-{n}" for n in range(len(kept))]
    assert "faq-5" not in kept


def test_scores_decide_over_relevance_and_the_best_scored_shows_first() -> None:
    kept = shown(120, shop_documents(**{"faq-2": 0.9, "faq-7": 0.8}))
    assert kept[:2] == ["faq-2", "faq-7"]
    assert "faq-5" not in kept, "given scores are the caller's ranking: they are not overruled"


def test_a_question_with_no_shared_word_leaves_the_given_order() -> None:
    assert relevance_order(["alpha beta", "gamma delta", "epsilon"], "zzz qqq") == [0, 1, 2]


def test_an_unknown_rank_is_a_plan_error() -> None:
    request = Request(user_input=QUESTION, documents=shop_documents())
    with pytest.raises(PlanError, match="rank must be one of relevance, given"):
        list(DocumentSource().build(request, {"rank": "best"}))


def test_the_relevance_order_is_the_same_in_every_process() -> None:
    code = ("from contextwright.sources.documents import relevance_order;"
            "print(relevance_order(['refund window shoes', 'shoes shop', 'window cleaning',"
            " 'refund'], 'refund window for shoes'))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": str(seed)}).stdout
            for seed in (1, 2, 3)}
    assert runs == {"[0, 3, 1, 2]\n"}


def test_a_mistyped_rank_is_refused_when_the_plan_loads() -> None:
    with pytest.raises(PlanError, match="rank"):
        plan_from_mapping({"name": "docs", "sources": [
            {"source": "user"}, {"source": "rag", "options": {"rank": "best"}}]})


def _rag_decisions(ctx: object) -> dict[str, tuple[str, int]]:
    return {d.key: (d.action, d.tokens_after) for d in ctx.report.decisions  # type: ignore[attr-defined]
            if d.source == "rag"}


def test_a_huge_top_ranked_document_leaves_room_for_the_small_ones_that_answer() -> None:
    manual = ("The refund window for returned shoes is described in the manual below. " * 3
              + "\n\n") * 2000  # ~100,000 tokens, every paragraph about refunds and shoes
    documents = [{"id": "manual", "text": manual}, *shop_documents()]
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        plan(1200), Request(user_input=QUESTION, documents=documents))
    decisions = _rag_decisions(ctx)
    action, kept_tokens = decisions["rag.documents[0]"]  # the manual, ranked first
    assert action == "truncated"
    assert not any(action == "dropped" for action, _ in decisions.values()), decisions
    text = ctx.to_text()
    assert all(f"FAQ about {topic}" in text for topic in TOPICS), "every short FAQ still fits"
    # What the short FAQs left over went back to the manual: it is over half of the grant.
    assert 600 < kept_tokens
    rag = next(row for row in ctx.report.sources if row.source == "rag")
    assert 1100 < rag.tokens <= 1200, "the grant is used, and not overrun"


def test_max_item_share_sets_how_much_one_document_may_take_first() -> None:
    manual = ("Refund window details for returned shoes, section after section. " * 3
              + "\n\n") * 500
    documents = [{"id": "manual", "text": manual}, *shop_documents()]
    request = Request(user_input=QUESTION, documents=documents)

    def faqs_shown(share: float) -> int:
        text = ContextBuilder(tokenizer="o200k_base").build(
            plan(400, max_item_share=share), request).to_text()
        return sum(f"FAQ about {topic}" in text for topic in TOPICS)

    # A share of 1: the manual may take the whole grant, and does; the FAQs are left out.
    assert faqs_shown(1.0) == 0
    # A quarter: the manual is cut to it first, and the FAQs that fit in the rest come next.
    assert faqs_shown(0.25) >= 4


def test_what_is_left_goes_back_to_the_best_large_document_before_a_worse_one() -> None:
    paragraph = "Refund policy details for returned shoes, section after section. " * 3
    documents = [
        {"id": "best", "text": (paragraph + "\n\n") * 120, "score": 0.9},
        {"id": "short-1", "text": "Refunds take five days.", "score": 0.5},
        {"id": "short-2", "text": "Shoes must be unworn.", "score": 0.4},
        {"id": "worst", "text": (paragraph + "\n\n") * 80, "score": 0.1},
    ]
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        plan(1000), Request(user_input=QUESTION, documents=documents))
    decisions = _rag_decisions(ctx)
    best = decisions["rag.documents[0]"]
    assert best[0] == "truncated" and best[1] > 700, decisions
    assert "Refunds take five days." in ctx.to_text() and "Shoes must be unworn." in ctx.to_text()
    assert decisions["rag.documents[3]"][0] == "dropped"  # the worst large one


def test_a_document_is_named_by_its_place_in_the_request_whatever_its_rank() -> None:
    # Two calls that leave out different documents must say which: by rank ("rag.2.text") both
    # would name the third best, and a diff of the two calls showed no change.
    documents = [{"id": f"faq-{topic}", "text": f"FAQ about {topic}. " * 40}
                 for topic in ("shipping", "refunds", "sizes")]
    builder = ContextBuilder(tokenizer="o200k_base")

    def cut_or_left_out(question: str) -> set[tuple[str, str]]:
        ctx = builder.build(plan(260), Request(user_input=question, documents=documents))
        return {(d.key, d.action) for d in ctx.report.decisions if d.source == "rag"}

    # The best one is whole; the second is cut to what is left; the third does not fit.
    assert cut_or_left_out("How do refunds work?") == {
        ("rag.documents[0]", "truncated"), ("rag.documents[2]", "dropped")}
    assert cut_or_left_out("How long does shipping take?") == {
        ("rag.documents[1]", "truncated"), ("rag.documents[2]", "dropped")}
