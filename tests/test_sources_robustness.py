"""Robustness of the retrieval, documents and tools sources.

Each test's docstring names the failure it guards against.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from contextwright import ContextBuilder
from contextwright.core.plan import plan_from_mapping
from contextwright.core.request import Request
from contextwright.core.versions import version_key
from contextwright.errors import ContextwrightError, InvalidInputError, PlanError
from contextwright.retrieval import (
    Retriever,
    SourceDocument,
)
from contextwright.sources.documents import DocumentSource, newest_per_id
from contextwright.sources.options import DocumentOptions
from contextwright.sources.retrieval import RetrievalSource, read_options
from contextwright.sources.tools import ToolDefinitionSource

# --------------------------------------------------------------------------- retriever



def test_a_source_cache_size_of_zero_does_not_crash() -> None:
    """With ``max_indexes=0`` the new entry is evicted and then ``move_to_end`` raised a bare
    KeyError; zero should mean "no caching" (or be refused with a typed error)."""
    try:
        list(RetrievalSource(max_indexes=0).build(
            Request(user_input="refund", documents=[{"id": "a", "text": "Refund in 15 days."}]),
            {"similarity_threshold": 0.1}))
    except ContextwrightError:
        pass


def test_a_source_cache_size_of_zero_keeps_no_index_and_a_negative_one_is_refused() -> None:
    request = Request(user_input="refund", documents=[{"id": "a", "text": "Refund in 15 days."}])
    source = RetrievalSource(max_indexes=0)
    first = list(source.build(request, {"similarity_threshold": 0.1}))
    assert [i.message for i in first] == [
        i.message for i in source.build(request, {"similarity_threshold": 0.1})]
    assert first and not source._indexes
    with pytest.raises(InvalidInputError, match="max_indexes"):
        RetrievalSource(max_indexes=-1)


# --------------------------------------------------------------------------- retrieval source


def test_same_id_documents_keep_the_newest_timestamp_not_the_greatest_string() -> None:
    """``_newest_by_id`` compares ISO timestamps as strings, so 09:00-05:00 (14:00 UTC) loses to
    10:00+00:00 and an older version is shown; times should be compared as instants."""
    request = Request(user_input="What is the refund window?", documents=[
        {"id": "policy", "text": "Refund window: 30 days.",
         "timestamp": "2024-03-01T10:00:00+00:00"},
        {"id": "policy", "text": "Refund window: 14 days.",
         "timestamp": "2024-03-01T09:00:00-05:00"},
    ])
    passages = RetrievalSource().passages(request, read_options({"similarity_threshold": 0.1}, 0.5))
    assert [p.text for p in passages] == ["Refund window: 14 days."]


# Each option a ``rag`` plan may give (``DocumentOptions``), with a valid value other than its
# default: the built-in DocumentSource's ``rank`` and the options every source takes included.
PLAN_RAG_OPTIONS: list[dict[str, Any]] = [
    {"top_k": 4}, {"rerank_top_k": 2}, {"chunk_size": 64}, {"max_passage_tokens": 50},
    {"fill_limit": 10}, {"similarity_threshold": 0.2}, {"fill_threshold": 0.05},
    {"alpha": 0.7}, {"alpha": None}, {"dense": False}, {"keep_outdated": True},
    {"fill_budget": True}, {"rank": "given"}, {"contiguous": True}, {"max_item_share": 0.5},
    {"partial_rounds": False}, {"digest_share": 0.1},
]


def test_every_plan_rag_option_is_covered() -> None:
    """The list above must name every option the plan check accepts."""
    named = {name for options in PLAN_RAG_OPTIONS for name in options}
    assert named == set(DocumentOptions.model_fields)


@pytest.mark.parametrize("options", PLAN_RAG_OPTIONS, ids=lambda o: "-".join(map(str, o)))
def test_retrieval_source_accepts_every_option_the_plan_check_accepts(
        options: dict[str, Any]) -> None:
    """A plan is checked against ``DocumentOptions`` ("one plan serves with either" source), but
    RetrievalSource refused ``rank`` and the options every source takes: the optional rag source
    then failed and the build went on with no documents, the only sign a warning."""
    plan = plan_from_mapping({"name": "p", "sources": [
        {"source": "system"}, {"source": "user"}, {"source": "rag", "options": options}]})
    request = Request(user_input="refund days", documents=[
        {"id": "refund", "text": "Refunds are accepted within 30 days.", "source": "policy.md"}])
    ctx = ContextBuilder(sources=[RetrievalSource()]).build(plan, request)
    row = next(r for r in ctx.report.sources if r.source == "rag")
    assert row.error is None and not ctx.report.warnings
    assert "30 days" in json.dumps(ctx.to_messages("openai"))


def test_a_cached_index_follows_the_documents_versions() -> None:
    """The index cache was keyed by id, text, title and time but not version: the same texts
    with their versions swapped reused the old index, showing the formerly newest text under
    the new version's label."""
    source = RetrievalSource()

    def shown(old: int, new: int) -> list[str]:
        request = Request(user_input="refund window", documents=[
            {"id": "a", "text": "Refund window is 30 days.", "source": "policy.md",
             "version": old},
            {"id": "b", "text": "Refund window is 14 days.", "source": "policy.md",
             "version": new}])
        settings = read_options({"similarity_threshold": 0.0}, 0.5)
        return [p.text for p in source.passages(request, settings)]

    assert shown(1, 2) == ["Refund window is 14 days."]
    assert shown(2, 1) == ["Refund window is 30 days."]


def test_passages_of_the_corpus_and_the_request_get_distinct_call_ids() -> None:
    """A request document and a corpus document with the same id are two passages with two
    keys (the corpus copy, which the request's overrides, is shown only when outdated versions
    are kept)."""
    corpus = Retriever()
    corpus.add([SourceDocument(id="policy", title="policy.md",
                               text="Refunds are possible for 15 days.")])
    request = Request(user_input="refund days", documents=[
        {"id": "policy", "text": "Refunds are possible for 30 days now.", "source": "policy.md"}])
    items = list(RetrievalSource(corpus).build(request, {"similarity_threshold": 0.2,
                                                         "keep_outdated": True}))
    assert len(items) == 2
    assert len({i.key for i in items}) == 2
    assert sorted(i.metadata["origin"] for i in items) == ["corpus", "request"]


def test_an_older_corpus_version_does_not_appear_beside_the_newer_request_version() -> None:
    """Supersession is applied inside each index only, so the corpus's 2024 version of
    ``policy`` is shown unmarked next to the request's 2025 version of the same id and title
    (the stale refund policy the model once believed); the older one should be left out or
    marked outdated."""
    corpus = Retriever()
    corpus.add([SourceDocument(id="policy", title="policy.md", timestamp="2024-01-01",
                               text="Refunds are possible for 15 days.")])
    request = Request(user_input="refund days", documents=[
        {"id": "policy", "text": "Refunds are possible for 30 days now.", "source": "policy.md",
         "timestamp": "2025-01-01"}])
    passages = RetrievalSource(corpus).passages(
        request, read_options({"similarity_threshold": 0.2}, 0.5))
    stale = [p for p in passages if "15 days" in p.text]
    assert all(p.outdated for p in stale), [p.label for p in passages]


def test_a_kept_older_corpus_version_is_marked_outdated_and_ranked_last() -> None:
    corpus = Retriever()
    corpus.add([SourceDocument(id="kb-policy", title="policy.md", timestamp="2024-01-01",
                               text="Refunds are possible for 15 days.")])
    request = Request(user_input="refund days", documents=[
        {"id": "policy", "text": "Refund requests: 30 days.", "source": "policy.md",
         "timestamp": "2025-01-01"}])
    passages = RetrievalSource(corpus).passages(
        request, read_options({"similarity_threshold": 0.2, "keep_outdated": True}, 0.5))
    assert [(p.doc_id, p.outdated) for p in passages] == [
        ("policy", False), ("kb-policy", True)]
    assert passages[1].label.endswith("OUTDATED")


def test_a_newer_corpus_version_supersedes_an_older_request_version() -> None:
    corpus = Retriever()
    corpus.add([SourceDocument(id="policy", title="policy.md", timestamp="2025-01-01",
                               text="Refunds are possible for 30 days now.")])
    request = Request(user_input="refund days", documents=[
        {"id": "policy", "text": "Refunds are possible for 15 days.", "source": "policy.md",
         "timestamp": "2024-01-01T00:00:00+01:00"}])
    passages = RetrievalSource(corpus).passages(
        request, read_options({"similarity_threshold": 0.2}, 0.5))
    assert [p.text for p in passages] == ["Refunds are possible for 30 days now."]


def test_document_source_keeps_the_newest_instant_not_the_greatest_string() -> None:
    """``DocumentSource`` had the same string comparison as ``_newest_by_id``."""
    request = Request(user_input="What is the refund window?", documents=[
        {"id": "policy", "text": "Refund window: 30 days.",
         "timestamp": "2024-03-01T10:00:00+00:00"},
        {"id": "policy", "text": "Refund window: 14 days.",
         "timestamp": "2024-03-01T09:00:00-05:00"},
        {"id": "faq", "text": "Dated FAQ.", "timestamp": "2020-01-01"},
        {"id": "faq", "text": "Undated FAQ."},
    ])
    texts = [i.message.content for i in DocumentSource().build(request, {})
             if i.untrusted]
    assert texts == ["Refund window: 14 days.", "Dated FAQ."]


def test_document_source_refuses_a_timestamp_that_is_not_iso_without_echoing_it() -> None:
    request = Request(user_input="q", documents=[
        {"id": "a", "text": "x", "timestamp": "secret-value"}])
    with pytest.raises(InvalidInputError, match=r"documents\[0\]\.timestamp") as info:
        list(DocumentSource().build(request, {}))
    assert "secret-value" not in str(info.value)


@pytest.mark.parametrize("value", [
    None, "2024-03-01", "2024-03-01T09:00:00", "2024-03-01T09:00:00Z",
    "2024-03-01T09:00:00-05:00", "2024-03-01T09:00:00.123456+05:30", "not a time"])
def test_document_source_reads_times_as_the_retriever_does(value: str | None) -> None:
    """Both sources and the retriever order versions by one rule (``core.versions``)."""
    def outcome(order: Any) -> Any:
        try:
            return order(value)
        except InvalidInputError as error:
            return str(error)

    def as_documents(timestamp: str | None) -> Any:
        return newest_per_id([("a", None, timestamp), ("a", None, "2024-03-01T09:00:00+00:00")])

    def as_retriever(timestamp: str | None) -> Any:
        older = version_key(None, timestamp, "documents[0].timestamp")
        newer = version_key(None, "2024-03-01T09:00:00+00:00", "documents[1].timestamp")
        return [1] if newer > older else [0]

    assert outcome(as_documents) == outcome(as_retriever)


def test_importing_the_library_loads_neither_numpy_nor_retrieval() -> None:
    """Importing is cheap: numpy loads on the first ranking, retrieval only when used.

    ``DocumentSource`` is always loaded and ranks with the recall engine, which takes numpy
    when it first scores; a process that only imports (a CLI's startup) does not pay for it.
    """
    code = ("import sys\n"
            "import contextwright\n"
            "from contextwright.sources.documents import DocumentSource\n"
            "from contextwright.recall import bm25\n"
            "assert 'contextwright.retrieval' not in sys.modules\n"
            "assert 'numpy' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("options", [
    {"chunk_size": 4}, {"top_k": float("inf")}, {"top_k": float("nan")},
    {"similarity_threshold": float("nan")},
], ids=["chunk_size-4", "top_k-inf", "top_k-nan", "threshold-nan"])
def test_bad_numeric_rag_options_are_plan_errors(options: dict[str, Any]) -> None:
    """``read_options`` promises a PlanError naming a bad option, but chunk_size < 8 passes (and
    later surfaces as InvalidInputError, blaming the request), inf/NaN integers raise
    OverflowError/ValueError and a NaN threshold silently drops every passage."""
    with pytest.raises(PlanError):
        read_options(options, 0.5)


# --------------------------------------------------------------------------- tools source


def test_always_include_given_as_one_name_is_honoured_or_refused() -> None:
    """``set(options.get("always_include", ()))`` turns a single name (``always_include:
    save_memo`` in YAML) into a set of characters, so the tool is silently not included."""
    def tool(name: str, description: str) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "description": description}}

    request = Request(user_input="weather in Paris",
                      tools=[tool("get_weather", "Weather of a city."),
                             tool("save_memo", "Save a note.")])
    try:
        items = list(ToolDefinitionSource().build(
            request, {"select": "relevant", "always_include": "save_memo"}))
    except PlanError:
        return
    offered = [i.key for i in items if "omitted" not in i.metadata]
    assert "tools.save_memo" in offered


@pytest.mark.parametrize("options", [
    {"always_include": 3}, {"always": ["save_memo", None]}, {"max_tools": "three"},
    {"max_tools": -1}, {"max_tools": 1.5}, {"recent_messages": "all"},
    {"recent_messages": -5}, {"description_budget": float("inf")}, {"description_budget": True},
], ids=["always_include-int", "always-none-item", "max_tools-str", "max_tools-negative",
        "max_tools-fraction", "recent_messages-str", "recent_messages-negative",
        "description_budget-inf", "description_budget-bool"])
def test_bad_tool_options_are_plan_errors_naming_the_option(options: dict[str, Any]) -> None:
    request = Request(user_input="weather", tools=[
        {"type": "function", "function": {"name": "get_weather", "description": "Weather."}}])
    with pytest.raises(PlanError, match=next(iter(options))):
        list(ToolDefinitionSource().build(request, options))


# --------------------------------------------------------------------------- tool results


@pytest.mark.parametrize("options", [
    {"similarity_threshold": 1.5}, {"fill_threshold": 2.0},
])
def test_thresholds_above_one_are_plan_errors(options: dict[str, Any]) -> None:
    """A calibrated similarity never passes 1: such a threshold would silently keep nothing."""
    with pytest.raises(PlanError, match="between 0 and 1"):
        read_options(options, 0.5)


@pytest.mark.parametrize(("options", "message"), [
    ({"select": "relevent"}, "select must be"),
    ({"compact_descriptions": "false"}, "compact_descriptions must be"),
])
def test_misspelt_tools_options_are_plan_errors(options: dict[str, Any], message: str) -> None:
    """A misspelt select silently offered every tool; the string "false" turned compaction on."""
    with pytest.raises(PlanError, match=message):
        list(ToolDefinitionSource().build(Request(user_input="weather?"), options))


def test_a_passage_in_both_the_request_and_the_corpus_is_shown_once() -> None:
    """The same text from the request's documents and from the corpus was shown twice."""
    text = "Refunds are accepted within 15 days of delivery for unopened items."
    corpus = Retriever()
    corpus.add([SourceDocument(id="policy-corpus", title="Refund policy", text=text)])
    source = RetrievalSource(corpus)
    request = Request(user_input="refund within how many days?",
                      documents=[{"id": "policy-given", "text": text}])
    items = list(source.build(request, {"similarity_threshold": 0.1}))
    results = [item for item in items if item.untrusted]
    assert len(results) == 1


def test_request_documents_carry_a_version_number_compared_before_the_time() -> None:
    """Request documents had no version: a versioned corpus copy beat any request version."""
    newer = {"id": "policy", "source": "refund-policy.md", "version": 3,
             "timestamp": "2024-01-01", "text": "Refunds within 30 days (policy v3)."}
    older = {"id": "policy", "source": "refund-policy.md", "version": 2,
             "timestamp": "2025-06-01", "text": "Refunds within 15 days (policy v2)."}
    request = Request(user_input="refund within how many days?", documents=[newer, older])
    shown = [item.message.content for item in DocumentSource().build(request, {})
             if item.untrusted]
    assert len(shown) == 1 and "v3" in str(shown[0])
    corpus = Retriever()
    corpus.add([SourceDocument(id="policy", title="refund-policy.md", version=2,
                               text="Refunds within 15 days (policy v2).")])
    items = list(RetrievalSource(corpus).build(
        Request(user_input="refund within how many days?", documents=[newer]),
        {"similarity_threshold": 0.1}))
    texts = " ".join(str(item.message.content) for item in items if item.untrusted)
    assert "v3" in texts and "v2" not in texts


@pytest.mark.parametrize("version", [-1, 1.5, "3", True])
def test_a_bad_document_version_is_refused(version: object) -> None:
    with pytest.raises(InvalidInputError, match=r"documents\[0\]"):
        Request(user_input="q", documents=[{"id": "a", "text": "t", "version": version}])
