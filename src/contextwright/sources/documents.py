"""Retrieved documents (L4), each shown as the result of a ``retrieve_documents`` call.

Documents are untrusted data: rendering them as a tool result keeps them out of the system and
user roles in every format. Best-scored first (the given order when there are no scores); a
document id seen twice keeps its newest version (``core.versions``: the retriever's rule). Long
documents are cut around the query.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from contextwright.core.items import ContextItem, Layer, Message, ToolCall, check_text
from contextwright.core.request import Request
from contextwright.core.versions import VersionKey, version_key

RETRIEVAL_TOOL = "retrieve_documents"


def newest_per_id(versions: Iterable[tuple[str, int | None, str | None]]) -> list[int]:
    """Positions of one version per document id: the newest (``version_key``), the first on ties.

    ``versions`` are the request's documents as (id, version, timestamp), in order; a timestamp
    that is not ISO 8601 is an ``InvalidInputError`` naming its document. The positions follow
    the order in which the ids first appear.
    """
    newest: dict[str, tuple[int, VersionKey]] = {}
    for index, (doc_id, version, timestamp) in enumerate(versions):
        order = version_key(version, timestamp, f"documents[{index}].timestamp")
        seen = newest.get(doc_id)
        if seen is None or order > seen[1]:
            newest[doc_id] = (index, order)
    return [index for index, _ in newest.values()]


class DocumentSource:
    """Documents from ``request.documents``, best first, one call/result pair each."""

    namespace = "rag"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """Two items per document (the synthetic call and its result), best document first."""
        kept = newest_per_id((doc.id, doc.version, doc.timestamp) for doc in request.documents)
        docs = [(index, request.documents[index]) for index in kept]
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
