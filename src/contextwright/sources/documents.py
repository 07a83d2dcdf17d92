"""Retrieved documents (L4), each one fenced data item.

Documents are untrusted data: each is fenced and labelled, and each provider rendering gives it the
form that provider has for documents (Anthropic ``search_result`` blocks; elsewhere a fenced message
in the assistant's voice, as a retrieval step would have put it, so no document text is ever in the
user's or the system's role), never a tool call the request did not define. A document id seen
twice keeps its newest version (``core.versions``: the retriever's rule), and a text given twice
(whitespace aside) is shown once, as its best-ranked copy. Long documents are cut
around the query.

Which documents are kept when not all fit: with scores, the best-scored first, rendered best
first. Without any score, the ones most relevant to the user's input (BM25 over the request's
documents, the lexical recaller's index and terms), rendered in the given order, so a build where
everything fits shows the documents exactly as given. Plan option ``rank``: ``relevance`` (the
default, as just described) or ``given`` (keep the first documents as given).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from contextwright.analysis import analyzer
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.core.request import Request, check_document, check_score
from contextwright.core.source import AddedSource, SourceTraits
from contextwright.core.versions import VersionKey, version_key
from contextwright.errors import PlanError
from contextwright.recall.bm25 import TurnPostings
from contextwright.sources.options import DocumentOptions

_TERMS = analyzer("recall")
"""Documents are ranked as recall ranks turns: ids whole, words stemmed."""
RANKS = ("relevance", "given")
"""Values of the ``rank`` option."""
K1, B = 1.2, 0.75
"""BM25 constants (those of the lexical recaller)."""


def document_message(text: str) -> Message:
    """The message that carries one document's (or passage's) text.

    Its item is untrusted and has a ``document`` in its metadata: that is how the renderings
    know it (``FinalContext.documents``), never by anything a caller's message could say.
    """
    return Message(role="assistant", content=text)


BLANK = "its text is empty"
"""Why a document whose text is empty or only whitespace is left out: shown, it would be a
fenced block with nothing in it, tokens that say nothing."""


def is_blank(text: str) -> bool:
    """Whether a document's text holds nothing to show."""
    return not text.strip()


def same_text_key(text: str) -> bytes:
    """What tells two documents' texts apart: a digest of the whitespace-normalised text.

    A retriever that returns one passage twice (two queries, two ids) would otherwise have it
    shown twice, paying its tokens twice; the retrieval source compares texts the same way.
    """
    normalised = " ".join(text.split()).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(normalised, digest_size=16).digest()


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


def superseded(request: Request, kept: Iterable[int], namespace: str
               ) -> Iterator[ContextItem]:
    """What a source says of the documents a newer version of the same id replaced.

    One item per such document, carrying the reason in ``metadata["omitted"]``: the build
    reports it as dropped, so a document given twice is never left out unreported.
    """
    newest = {request.documents[index].id: index for index in kept}
    for index, doc in enumerate(request.documents):
        if newest.get(doc.id, index) != index:
            # Named by position: a reason is kept in clear by a redacting recorder, an id not.
            yield omitted_document(namespace, index, "an older version of the document at "
                                   f"documents[{newest[doc.id]}] (same id)")


def omitted_document(namespace: str, index: int, reason: str) -> ContextItem:
    """The item that says ``request.documents[index]`` was left out, and why."""
    return ContextItem(key=f"{namespace}.documents[{index}]",
                       message=Message(role="system", content=""), layer=Layer.EVIDENCE,
                       order=index, metadata={"omitted": reason})


class DocumentSource:
    """Documents from ``request.documents``, best first, one fenced item each."""

    namespace = "rag"
    volatile = True
    """Documents follow the input, so a stable-prefix build renders them after the stable part."""
    traits = SourceTraits(
        fenced=True, volatile=True, request_part="documents", max_item_share=0.5,
        labels={"en": "Documents", "zh": "参考资料"},
        added=AddedSource(weight=0.25, before=("user",), rank=3))
    options_model = DocumentOptions

    def offered_units(self, request: Request) -> int:
        """How many units it offers for ``request``: one per document id."""
        return len({doc.id for doc in request.documents})

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One item per document, in keep order (see the module docstring)."""
        rank_by = options.get("rank", "relevance")
        if rank_by not in RANKS:
            raise PlanError(f"rag: rank must be one of {', '.join(RANKS)}, not {rank_by!r}")
        for index, doc in enumerate(request.documents):
            check_document(doc, index)
        kept = newest_per_id((doc.id, doc.version, doc.timestamp) for doc in request.documents)
        yield from superseded(request, kept, self.namespace)
        for index in kept:
            if is_blank(request.documents[index].text):
                yield omitted_document(self.namespace, index, BLANK)
        docs = [(index, request.documents[index]) for index in kept
                if not is_blank(request.documents[index].text)]
        scores = {index: check_score(doc.score, f"documents[{index}].score")
                  for index, doc in docs}
        scored = any(score is not None for score in scores.values())
        if scored:
            docs.sort(key=lambda entry: (-(scores[entry[0]] or 0.0), entry[0]))
        first_of: dict[bytes, int] = {}
        distinct = []
        for index, doc in docs:  # best first: the best-ranked copy of a text is the one shown
            first = first_of.setdefault(same_text_key(doc.text), index)
            if first == index:
                distinct.append((index, doc))
            else:
                yield omitted_document(self.namespace, index,
                                       f"its text repeats that of documents[{first}]")
        docs = distinct
        shown_at = {index: place for place, (index, _) in enumerate(docs)}
        if not scored and rank_by == "relevance" and len(docs) > 1:
            docs = [docs[at] for at in relevance_order([doc.text for _, doc in docs],
                                                       request.user_input)]
        for index, doc in docs:  # best first; keyed by place in the request, as reports name it
            metadata = {"document": doc.id, "score": doc.score, "timestamp": doc.timestamp}
            yield ContextItem(key=f"rag.documents[{index}]",
                              message=document_message(doc.text),
                              layer=Layer.EVIDENCE, order=shown_at[index], untrusted=True,
                              truncatable=True, label=doc.source or doc.id, metadata=metadata)


def relevance_order(texts: list[str], query: str) -> list[int]:
    """Positions of ``texts``, most relevant to ``query`` first (BM25; ties keep the order).

    Texts that share no term with the query follow in their order, so a query with no usable
    term leaves the order as it is.
    """
    index = TurnPostings()
    for text in texts:
        index.add(_TERMS.term_counts(text))
    # sorted: scores add up in the same order in every process
    ranked = index.top(sorted(_TERMS.term_set(query)), limit=len(texts), min_score=0.0, k1=K1, b=B)
    return [position for position, _ in ranked]
