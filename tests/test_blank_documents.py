"""A request document whose text is empty or only whitespace is left out and reported as such:
DocumentSource had shown it as an empty fenced block (tokens that say nothing), and
RetrievalSource reported it as "not retrieved for this input"."""

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
