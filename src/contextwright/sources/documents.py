"""Retrieved documents (L4), each shown as the result of a ``retrieve_documents`` call.

Documents are untrusted data: rendering them as a tool result keeps them out of the system and
user roles in every format. Best-scored first (the given order when there are no scores); a
document id seen twice keeps its newest version. Long documents are cut around the query.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from contextwright.core.items import ContextItem, Layer, Message, ToolCall, check_text
from contextwright.core.request import Document, Request

RETRIEVAL_TOOL = "retrieve_documents"


def _newest_versions(documents: Iterator[tuple[int, Document]]) -> list[tuple[int, Document]]:
    newest: dict[str, tuple[int, Document]] = {}
    for index, doc in documents:
        seen = newest.get(doc.id)
        if seen is None or (doc.timestamp or "") > (seen[1].timestamp or ""):
            newest[doc.id] = (index, doc)
    return list(newest.values())


class DocumentSource:
    """Documents from ``request.documents``, best first, one call/result pair each."""

    namespace = "rag"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """Two items per document (the synthetic call and its result), best document first."""
        docs = _newest_versions(iter(enumerate(request.documents)))
        docs.sort(key=lambda entry: (-(entry[1].score or 0.0), entry[0]))
        for rank, (index, doc) in enumerate(docs):
            text = check_text(doc.text, f"documents[{index}].text")
            for field in ("id", "source", "timestamp"):
                value = getattr(doc, field)
                if value is not None:
                    check_text(value, f"documents[{index}].{field}")
            call_id = "doc_" + hashlib.blake2b(doc.id.encode("utf-8", "surrogatepass"),
                                               digest_size=6).hexdigest()
            arguments = json.dumps({"id": doc.id}, ensure_ascii=False)
            call = Message(role="assistant", tool_calls=(
                ToolCall(id=call_id, name=RETRIEVAL_TOOL, arguments=arguments),))
            result = Message(role="tool", content=text, tool_call_id=call_id, name=RETRIEVAL_TOOL)
            metadata = {"document": doc.id, "score": doc.score, "timestamp": doc.timestamp}
            group = f"d{rank}"
            yield ContextItem(key=f"rag.{rank}.call", message=call, layer=Layer.EVIDENCE,
                              group=group, order=2 * rank, metadata=metadata)
            yield ContextItem(key=f"rag.{rank}.text", message=result, layer=Layer.EVIDENCE,
                              group=group, order=2 * rank + 1, untrusted=True, truncatable=True,
                              label=doc.source or doc.id, metadata=metadata)
