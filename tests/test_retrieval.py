"""Retrieval: chunking, lexical search, threshold, merge, supersede, bonuses, recall, the source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import InvalidInputError, PlanError
from contextwright.retrieval import (
    Bm25Index,
    HybridTurnRecaller,
    RankingWeights,
    RecallTurn,
    Retriever,
    SourceDocument,
    chunk_document,
    query_entities,
    search_tokens,
)
from contextwright.retrieval.rerank import FusionReranker
from contextwright.sources.retrieval import RetrievalSource
from contextwright.tokens import get_tokenizer

FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"
TOKENIZER = get_tokenizer("o200k_base")


def refund_documents() -> list[SourceDocument]:
    data = json.loads((FIXTURES / "refund_policy.json").read_text("utf-8"))
    return [SourceDocument(**doc) for doc in data]


def test_chunks_respect_the_size_and_paragraph_then_sentence_boundaries() -> None:
    paragraphs = ["Short opening paragraph.",
                  " ".join(f"Sentence number {i} talks about refunds." for i in range(40)),
                  "退货政策。" * 30]
    doc = SourceDocument(id="d", title="policy.md", text="\n\n".join(paragraphs))
    chunks = chunk_document(doc, TOKENIZER, chunk_size=60)
    assert all(chunk.tokens <= 60 for chunk in chunks)
    for chunk in chunks:
        assert doc.text[chunk.start : chunk.end] == chunk.text
        assert chunk.text.endswith((".", "。"))  # never cut inside a sentence here
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].paragraph_start == 0 and chunks[-1].paragraph_end == 2


def test_a_sentence_longer_than_a_chunk_is_cut_by_tokens() -> None:
    doc = SourceDocument(id="d", text="word " * 500)
    chunks = chunk_document(doc, TOKENIZER, chunk_size=50)
    assert len(chunks) >= 10 and all(chunk.tokens <= 50 for chunk in chunks)
    assert "".join(c.text for c in chunks).split() == doc.text.split()


def test_chunk_size_below_eight_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        chunk_document(SourceDocument(id="d", text="x"), TOKENIZER, chunk_size=2)


def test_search_tokens_split_chinese_into_bigrams_and_drop_english_stopwords() -> None:
    assert search_tokens("上海天气 The Weather of Shanghai") == [
        "上海", "海天", "天气", "weather", "shanghai"]
    assert search_tokens("退") == ["退"]


def test_query_entities_find_numbers_ids_names_and_chinese_terms() -> None:
    entities = query_entities("订单 ORD-12345 的鞋子，Alice Smith 说 15 天")
    assert {"ord-12345", "15", "alice smith", "鞋子"} <= entities
    assert "what" not in query_entities("What is the policy?")


def test_bm25_scores_match_bm25s() -> None:
    bm25s = pytest.importorskip("bm25s")
    corpus = ["the cat sat on the mat", "dogs and cats living together", "a quick brown fox",
              "cat cat cat", "上海的天气很好", "今天上海天气怎么样"]
    query = "cat on mat 上海天气"
    index = Bm25Index()
    for text in corpus:
        index.add(search_tokens(text))
    reference = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    reference.index([search_tokens(text) for text in corpus], show_progress=False)
    expected = reference.get_scores(search_tokens(query))
    assert index.scores(search_tokens(query)).tolist() == pytest.approx(list(expected), rel=1e-5)


def test_chinese_query_finds_the_chinese_document() -> None:
    retriever = Retriever()
    retriever.add([
        SourceDocument(id="weather", text="上海今天的天气：晴，气温 25 度。"),
        SourceDocument(id="refund", text="退货政策：购买后 15 天内可以退货。"),
        SourceDocument(id="en", text="The weather in Paris is rainy."),
    ])
    found = retriever.search("今天上海天气怎么样", similarity_threshold=0.3)
    assert [p.doc_id for p in found][:1] == ["weather"]


def test_threshold_leaves_out_unrelated_text() -> None:
    retriever = Retriever()
    retriever.add([SourceDocument(id="a", text="Refunds are accepted within 15 days."),
                   SourceDocument(id="b", text="Our office dog is called Rex.")])
    assert retriever.search("what is the capital of France", similarity_threshold=0.35) == []
    kept = retriever.search("refunds accepted days", similarity_threshold=0.35)
    assert [p.doc_id for p in kept] == ["a"]
    assert all(0.0 <= p.similarity <= 1.0 for p in kept)


def test_adjacent_chunks_of_one_document_merge_into_one_passage() -> None:
    text = "\n\n".join(f"Refund rule {i}: refunds need receipt number {i}." for i in range(6))
    retriever = Retriever(chunk_size=16)
    retriever.add([SourceDocument(id="policy", title="policy.md", text=text)])
    assert retriever.chunk_count >= 3
    found = retriever.search("refunds receipt number", top_k=8, rerank_top_k=3,
                             similarity_threshold=0.1)
    assert len(found) == 1
    passage = found[0]
    assert len(passage.chunks) >= 3 and passage.text == text[passage.start : passage.end]
    assert passage.label.startswith(f"policy.md §{passage.paragraph_start + 1}–")


def test_identical_text_in_two_documents_is_kept_once() -> None:
    retriever = Retriever()
    retriever.add([SourceDocument(id="a", text="Refunds within 15 days."),
                   SourceDocument(id="b", text="Refunds  within 15 days.")])
    assert len(retriever.search("refunds 15 days", similarity_threshold=0.1)) == 1


def test_refund_policy_incident_newer_version_wins() -> None:
    """The stale refund policy (7 days) must not be put first, where the model would believe it."""
    retriever = Retriever()
    retriever.add(refund_documents())
    found = retriever.search("我上周买的鞋子能退吗？退货政策是几天？")
    texts = " ".join(p.text for p in found)
    assert "15 天" in texts and "7 天" not in texts
    marked = retriever.search("我上周买的鞋子能退吗？退货政策是几天？", keep_outdated=True)
    old = [p for p in marked if "7 天" in p.text]
    assert old and all(p.outdated and "OUTDATED" in p.label for p in old)
    assert not marked[0].outdated and "15 天" in marked[0].text


def test_refund_policy_incident_in_a_built_context() -> None:
    request = Request(user_input="我上周买的鞋子能退吗？退货政策是几天？", documents=[
        {"id": d.id, "text": d.text, "source": d.title, "timestamp": d.timestamp}
        for d in refund_documents()])
    builder = ContextBuilder(sources=[RetrievalSource()])
    messages = builder.build(BuildPlan.named("rag_qa"), request).to_messages("openai")
    tool_text = " ".join(m["content"] for m in messages if m["content"].startswith("<<data "))
    assert "15 天" in tool_text and "7 天" not in tool_text
    assert "<<data" in tool_text and "退货政策.md §1" in tool_text


def test_same_id_added_again_replaces_the_old_text() -> None:
    retriever = Retriever()
    retriever.add([SourceDocument(id="p", text="Refunds within 7 days.")])
    retriever.add([SourceDocument(id="p", text="Refunds within 15 days.")])
    assert retriever.document_count == 1
    assert [p.text for p in retriever.search("refunds days", similarity_threshold=0.1)] == [
        "Refunds within 15 days."]


def test_entity_hits_add_to_the_rank() -> None:
    retriever = Retriever(reranker=FusionReranker(RankingWeights(entities=0.5)))
    retriever.add([SourceDocument(id="a", text="Order status: shipped. Order ORD-111."),
                   SourceDocument(id="b", text="Order status: shipped. Order ORD-222.")])
    found = retriever.search("order status ORD-222", similarity_threshold=0.1, rerank_top_k=2)
    assert [p.doc_id for p in found] == ["b", "a"]
    assert found[0].score > found[1].score


def test_recency_adds_to_the_rank() -> None:
    retriever = Retriever(supersede="id")
    retriever.add([
        SourceDocument(id="old", title="news", text="Shipping news: shipping is delayed.",
                       timestamp="2023-01-01"),
        SourceDocument(id="new", title="news", text="Shipping news: shipping is delayed!",
                       timestamp="2024-01-01T00:00:00Z"),
    ])
    found = retriever.search("shipping news", similarity_threshold=0.1, rerank_top_k=2)
    assert [p.doc_id for p in found] == ["new", "old"]
    assert found[0].score - found[1].score == pytest.approx(0.1 - 0.1 * 0.5 ** (365 / 180),
                                                            abs=1e-4)


def test_a_bad_timestamp_is_invalid_input_and_not_echoed() -> None:
    with pytest.raises(InvalidInputError) as info:
        Retriever().add([SourceDocument(id="a", text="x", timestamp="secret-value")])
    assert "secret-value" not in str(info.value)


def test_recall_ranks_relevant_turns_and_follows_an_appended_turn() -> None:
    recaller = HybridTurnRecaller(threshold=0.3)
    texts = ["I like pizza with olives", "My dog is called Rex", "The weather is nice today"]
    turns = [RecallTurn(index=2 * i, text=t, key=f"m{i}") for i, t in enumerate(texts)]
    assert recaller.rank("what is my dog called", turns, limit=2)[0][0] == 1
    turns.append(RecallTurn(index=6, text="We adopted a cat named Tom", key="m3"))
    ranked = recaller.rank("cat named Tom", turns, limit=2)
    assert ranked[0][0] == 3 and all(score > 0 for _, score in ranked)
    assert recaller.rank("what is my dog called", turns, limit=1)[0][0] == 1
    assert recaller.rank("quantum chromodynamics", turns, limit=3) == []


def test_recall_reindexes_when_the_history_is_not_an_extension() -> None:
    recaller = HybridTurnRecaller(threshold=0.2)
    first = [RecallTurn(index=0, text="alpha beta", key="a"),
             RecallTurn(index=1, text="gamma delta", key="b")]
    recaller.rank("gamma", first, limit=1)
    edited = [first[0], RecallTurn(index=1, text="epsilon zeta", key="c")]
    assert recaller.rank("epsilon", edited, limit=1) == [(1, 1.0)]
    assert recaller.rank("gamma", edited, limit=1) == []


def test_source_options_are_validated() -> None:
    request = Request(user_input="q", documents=[{"id": "a", "text": "q text"}])
    source = RetrievalSource()
    with pytest.raises(PlanError, match="top_k"):
        list(source.build(request, {"top_k": "many"}))
    with pytest.raises(PlanError, match="unknown option"):
        list(source.build(request, {"topk": 3}))


def test_source_reuses_its_index_across_builds() -> None:
    request = Request(user_input="refund days", documents=[
        {"id": "a", "text": "Refunds within 15 days.", "source": "policy.md"}])
    source = RetrievalSource()
    first = list(source.build(request, {}))
    second = list(source.build(request, {}))
    assert len(source._indexes) == 1
    assert [i.message for i in first] == [i.message for i in second]
    assert len(first) == 1
    assert first[0].label == "policy.md §1" and first[0].untrusted


def test_source_searches_a_prepared_corpus() -> None:
    retriever = Retriever()
    retriever.add(refund_documents())
    source = RetrievalSource(retriever)
    items = list(source.build(Request(user_input="退货政策是几天"), {"rerank_top_k": 1}))
    assert len(items) == 1 and "15 天" in items[0].message.content
    assert items[0].metadata["document"] == "refund-v2"


def test_long_passage_is_cut_around_the_query_keywords() -> None:
    filler = "\n".join(f"Line {i} is about shipping and packaging." for i in range(80))
    text = filler + "\nRefunds are accepted within 15 days of delivery.\n" + filler
    request = Request(user_input="refunds accepted days", documents=[{"id": "long", "text": text}])
    items = list(RetrievalSource().build(
        request, {"chunk_size": 2000, "max_passage_tokens": 60, "similarity_threshold": 0.1}))
    content = items[0].message.content
    assert "Refunds are accepted within 15 days" in content and "[…]" in content
    assert TOKENIZER.count(content) <= 60


def test_retriever_is_safe_to_index_and_search_from_many_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    retriever = Retriever()

    def work(n: int) -> int:
        retriever.add([SourceDocument(id=f"d{n}", text=f"Refund rule {n}: keep receipt {n}.")])
        return len(retriever.search(f"refund rule {n}", similarity_threshold=0.1))

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(found >= 1 for found in pool.map(work, range(40)))
    assert retriever.document_count == 40


def test_recall_never_mixes_two_histories_that_reuse_the_same_keys() -> None:
    recaller = HybridTurnRecaller(threshold=0.2)
    alice = [RecallTurn(index=0, text="hello", key="m1"),
             RecallTurn(index=1, text="my locker code is 4411", key="m2")]
    bob = [RecallTurn(index=0, text="hello", key="m1"),
           RecallTurn(index=1, text="I enjoy sailing on weekends", key="m2")]
    assert recaller.rank("locker code", alice, limit=1) == [(1, 1.0)]
    assert recaller.rank("locker code", bob, limit=1) == []
    assert recaller.rank("sailing weekends", bob, limit=1) == [(1, 1.0)]


def test_source_merges_a_prepared_corpus_with_the_request_documents() -> None:
    corpus = Retriever()
    corpus.add([SourceDocument(id="kb", title="kb.md", text="Shipping takes 2 days by courier.")])
    request = Request(user_input="shipping days refund days", documents=[
        {"id": "req", "text": "Refunds are possible for 15 days.", "source": "mail"}])
    items = list(RetrievalSource(corpus).build(request, {"similarity_threshold": 0.2}))
    labels = {item.label for item in items if item.label}
    assert labels == {"kb.md §1", "mail §1"}


def test_hybrid_recaller_plugs_into_the_history_source() -> None:
    from contextwright.sources.conversation import HistorySource

    history: list[dict[str, str]] = []
    for n in range(40):
        history += [{"role": "user", "content": f"Fun fact {n} about cooking pasta, please."},
                    {"role": "assistant", "content": f"Fact {n}: salt the water and stir it."}]
    history[6:6] = [{"role": "user", "content": "Where is my order ORD-7731, the blue kettle?"},
                    {"role": "assistant", "content": "Order ORD-7731 is in transit."}]
    plan = (BuildPlan.builder("recall").add("system")
            .add("history", max_tokens=400, options={"recall_share": 0.3}).add("user")
            .budget(window=100_000).build())
    builder = ContextBuilder(sources=[HistorySource(HybridTurnRecaller())])
    request = Request(user_input="Has the blue kettle order ORD-7731 shipped?", history=history)
    text = " ".join(str(m["content"]) for m in builder.build(plan, request).to_messages())
    assert "ORD-7731 is in transit" in text
    no_recall = (BuildPlan.builder("recent").add("system")
                 .add("history", max_tokens=400, options={"recall_share": 0}).add("user")
                 .budget(window=100_000).build())
    recent = builder.build(no_recall, request).to_messages()
    assert "ORD-7731 is in transit" not in " ".join(str(m["content"]) for m in recent)


@pytest.mark.parametrize("source", [None, "retrieval"])
def test_every_request_document_is_shown_or_reported(source: str | None) -> None:
    # A copy of another document's text, a document the search ranks out and an older
    # version of an id are left out, each with its reason in the report.
    documents = [{"id": "a", "text": "Refund policy: refunds within 30 days of delivery."},
                 {"id": "b", "text": "Refund policy: refunds within 30 days of delivery."},
                 {"id": "c", "text": "Shipping: orders ship in 2 days."},
                 {"id": "d", "text": "Old refund rule: 14 days.", "version": 1},
                 {"id": "d", "text": "Refund rule for gifts: 60 days.", "version": 2}]
    builder = ContextBuilder(tokenizer="o200k_base",
                             sources=[RetrievalSource()] if source else [])
    ctx = builder.build(BuildPlan.named("rag_qa"),
                        Request(user_input="what is the refund policy?", documents=documents))
    reported = {d.key: d for d in ctx.report.decisions if d.source == "rag"}
    older = reported["rag.documents[3]"]
    assert older.action == "dropped" and "older version of the document at documents[4]" in (
        older.reason)
    assert not any("'d'" in d.reason or "'a'" in d.reason for d in reported.values())  # no ids
    assert not any("Old refund rule" in str(m["content"]) for m in ctx.to_messages())
    if source:  # the search shows one passage per text, and only what it ranks high
        assert "repeats that of documents[0]" in reported["rag.documents[1]"].reason
        assert "not retrieved" in reported["rag.documents[2]"].reason
