"""A request document whose text is empty or only whitespace is left out and reported as such
(DocumentSource had shown it as an empty fenced block, tokens that say nothing, and
RetrievalSource reported it as "not retrieved for this input"), and DocumentSource shows a text
given twice once, as RetrievalSource does (it had been shown, and paid for, twice)."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.request import Document
from contextwright.sources.documents import DocumentSource
from contextwright.sources.retrieval import RetrievalSource


@pytest.mark.parametrize("source", [DocumentSource, RetrievalSource])
def test_a_blank_document_is_left_out_with_its_reason(source: Any) -> None:
    documents = [Document(id="a", text=""), Document(id="b", text="  \n\t "),
                 Document(id="c", text="Refunds take 14 days.")]
    context = ContextBuilder(sources=[source()]).build(
        BuildPlan.named("rag_qa"), Request(user_input="refund days", documents=documents))
    shown = [m["content"] for m in context.to_messages("openai") if m["role"] == "assistant"]
    assert len(shown) == 1 and "Refunds take 14 days." in shown[0]
    reasons = {d.key: d.reason for d in context.report.decisions if d.action == "dropped"}
    assert reasons == {"rag.documents[0]": "its text is empty",
                       "rag.documents[1]": "its text is empty"}


def test_a_text_given_twice_is_shown_once_as_its_best_copy() -> None:
    documents = [Document(id="a", text="Shipping takes 3 days.", score=0.2),
                 Document(id="b", text="Refunds take 14 days.", score=0.5),
                 Document(id="c", text="Refunds  take\n14 days.", score=0.9)]
    context = ContextBuilder(sources=[DocumentSource()]).build(
        BuildPlan.named("rag_qa"), Request(user_input="refund days", documents=documents))
    shown = [m["content"] for m in context.to_messages("openai") if m["role"] == "assistant"]
    assert len(shown) == 2 and sum("14" in text for text in shown) == 1
    assert "c>>" in shown[0].split("\n")[0]  # the best-scored copy, shown first
    reasons = {d.key: d.reason for d in context.report.decisions if d.action == "dropped"}
    assert reasons == {"rag.documents[1]": "its text repeats that of documents[2]"}
