"""Retrieved documents (L4), each one fenced data item.

Documents are untrusted data: each is fenced and labelled, and each provider rendering gives it the
form that provider has for documents (Anthropic ``search_result`` blocks; elsewhere a fenced message
in the assistant's voice, as a retrieval step would have put it, so no document text is ever in the
user's or the system's role), never a tool call the request did not define. Best-scored first (the
given order when there are no scores); a document id seen twice keeps its newest version
(``core.versions``: the retriever's rule). Long documents are cut around the query.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from contextwright.core.items import ContextItem, Layer, Message, check_text
from contextwright.core.request import Request
from contextwright.core.source import AddedSource, SourceTraits
from contextwright.core.versions import VersionKey, version_key
from contextwright.sources.options import DocumentOptions


def document_message(text: str) -> Message:
    """The message that carries one document's (or passage's) text.

    Its item is untrusted and has a ``document`` in its metadata: that is how the renderings
    know it (``FinalContext.documents``), never by anything a caller's message could say.
    """
    return Message(role="assistant", content=text)


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
    """Documents from ``request.documents``, best first, one fenced item each."""

    namespace = "rag"
    volatile = True
    """Documents follow the input, so a stable-prefix build renders them after the stable part."""
    traits = SourceTraits(
        fenced=True, volatile=True, request_part="documents",
        labels={"en": "Documents", "zh": "参考资料"},
        added=AddedSource(weight=0.25, before=("user",), rank=3))
    options_model = DocumentOptions

    def offered_units(self, request: Request) -> int:
        """How many units it offers for ``request``: one per document id."""
        return len({doc.id for doc in request.documents})

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One item per document, best document first."""
        kept = newest_per_id((doc.id, doc.version, doc.timestamp) for doc in request.documents)
        docs = [(index, request.documents[index]) for index in kept]
        docs.sort(key=lambda entry: (-(entry[1].score or 0.0), entry[0]))
        for rank, (index, doc) in enumerate(docs):
            text = check_text(doc.text, f"documents[{index}].text")
            for field in ("id", "source", "timestamp"):
                value = getattr(doc, field)
                if value is not None:
                    check_text(value, f"documents[{index}].{field}")
            metadata = {"document": doc.id, "score": doc.score, "timestamp": doc.timestamp}
            yield ContextItem(key=f"rag.{rank}.text", message=document_message(text),
                              layer=Layer.EVIDENCE, order=rank, untrusted=True,
                              truncatable=True, label=doc.source or doc.id, metadata=metadata)
