"""Retrieved passages (L4): the request's documents, or a prepared corpus, searched for the input.

``RetrievalSource`` chunks and indexes ``request.documents`` (indexes are cached across builds,
keyed by chunk size and each document's id and content hash, and embeddings are cached by text,
so a document is chunked once per set and embedded once ever), or searches a ``Retriever`` given
to it (a corpus indexed ahead of time), or both. Each kept passage is shown the way
``DocumentSource`` shows a document: as the result of a ``retrieve_documents`` call, fenced as
untrusted data, labelled with its document and paragraphs (``refund_policy.md §2``); a passage
longer than ``max_passage_tokens`` is cut around the query's keywords first (seed 004 §3.3).

Plan options (all optional): ``top_k`` (8), ``similarity_threshold`` (0.35), ``rerank_top_k``
(3), ``chunk_size`` (200), ``alpha`` (0.5), ``dense`` (true: use the embedder when there is
one), ``keep_outdated`` (false: superseded versions are left out; true: kept, marked
``OUTDATED``, ranked last), ``max_passage_tokens`` (400), ``fill_budget`` (false: only the top
``rerank_top_k``; true: every further passage at or above ``fill_threshold`` (0.1) follows in
rank order and the source's grant decides how many go in, out of ``fill_limit`` (64) chunks —
the shipped ``rag_qa`` and ``doc_analysis`` plans set it). The call names the document (``{"id":
…}``); the result's label names the paragraphs, so a passage pays for its provenance once. A
document's ``score`` from the request is not used: passages are ranked by this source's own
fusion; its ``source`` is the title (the label, and what ties versions of one document) and its
``timestamp`` the version time.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from contextwright.core.cutting import cut_around_keywords
from contextwright.core.items import ContextItem, Layer, Message, ToolCall, check_text
from contextwright.core.request import Request
from contextwright.errors import PlanError
from contextwright.retrieval import (
    CachedEmbedder,
    Embedder,
    RetrievedChunk,
    Retriever,
    SearchSettings,
    SourceDocument,
)
from contextwright.retrieval.text import content_hash
from contextwright.sources.documents import RETRIEVAL_TOOL
from contextwright.tokens import CountingTokenizer, get_tokenizer


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalOptions:
    """The source's plan options, validated."""

    search: SearchSettings
    """What ``Retriever.search`` is given."""
    chunk_size: int
    """Tokens per chunk for request documents."""
    max_passage_tokens: int
    """A longer passage is cut around the query's keywords."""
    fill_threshold: float | None = None
    """With ``fill_budget``: passages at or above this similarity follow the top ones, and the
    budget decides how many go in; None: only the top ``rerank_top_k``."""
    fill_limit: int = 64
    """With ``fill_budget``: chunks retrieved (instead of ``top_k``). 64 chunks of 200 tokens
    are more than the whole default budget, and a bound keeps a build over a large corpus from
    merging and reranking thousands of weak matches it can never show."""


_INTS = {"top_k": 8, "rerank_top_k": 3, "chunk_size": 200, "max_passage_tokens": 400,
         "fill_limit": 64}
_FLOATS = {"similarity_threshold": 0.35, "fill_threshold": 0.1}
_FLAGS = {"dense": True, "keep_outdated": False, "fill_budget": False}
UNLIMITED = 1_000_000
"""``rerank_top_k`` of a filling search: more than any index holds."""


def read_options(options: Mapping[str, Any], default_alpha: float) -> RetrievalOptions:
    """Validate the plan's options; ``PlanError`` names a bad one."""
    unknown = set(options) - {*_INTS, *_FLOATS, "alpha", *_FLAGS}
    if unknown:
        raise PlanError(f"rag options: unknown option {sorted(unknown)[0]!r}")
    ints = {name: _number(options, name, default, int) for name, default in _INTS.items()}
    floats = {name: _number(options, name, default, float) for name, default in _FLOATS.items()}
    alpha = _number(options, "alpha", default_alpha, float)
    if not 0.0 <= alpha <= 1.0:
        raise PlanError("rag options: alpha must be between 0 and 1")
    flags = {name: options.get(name, default) for name, default in _FLAGS.items()}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise PlanError(f"rag options: {name} must be true or false")
    search = SearchSettings(top_k=ints["top_k"], similarity_threshold=floats[
        "similarity_threshold"], rerank_top_k=ints["rerank_top_k"], alpha=alpha,
        dense=flags["dense"], keep_outdated=flags["keep_outdated"])
    return RetrievalOptions(search=search, chunk_size=ints["chunk_size"],
                            max_passage_tokens=ints["max_passage_tokens"],
                            fill_threshold=floats["fill_threshold"] if flags["fill_budget"]
                            else None, fill_limit=ints["fill_limit"])


def _number(options: Mapping[str, Any], name: str, default: float, kind: type) -> Any:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PlanError(f"rag options: {name} must be a non-negative number")
    if kind is int and value != int(value):
        raise PlanError(f"rag options: {name} must be a whole number")
    return kind(value)


class RetrievalSource:
    """Passages retrieved for the user's input, best first, one call/result pair each.

    ``namespace`` defaults to ``rag``, so ``ContextBuilder(sources=[RetrievalSource()])``
    replaces the built-in ``DocumentSource``. Thread-safe.
    """

    def __init__(self, retriever: Retriever | None = None, *, embedder: Embedder | None = None,
                 tokenizer: str | CountingTokenizer = "o200k_base", alpha: float = 0.5,
                 namespace: str = "rag", max_indexes: int = 32) -> None:
        self.retriever = retriever
        if embedder is not None and not isinstance(embedder, CachedEmbedder):
            embedder = CachedEmbedder(embedder)  # shared by every cached index
        self.embedder = embedder
        self.tokenizer = get_tokenizer(tokenizer)
        self.alpha = alpha
        self.namespace = namespace
        self._indexes: OrderedDict[tuple[object, ...], Retriever] = OrderedDict()
        self._max_indexes = max_indexes
        self._lock = threading.Lock()

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """Two items per kept passage (the synthetic call and its result), best first."""
        settings = read_options(options, self.alpha)
        query = request.user_input
        passages = self.passages(request, settings)
        for rank, passage in enumerate(passages):
            yield from self._items(rank, passage, query, settings)

    def passages(self, request: Request, settings: RetrievalOptions) -> list[RetrievedChunk]:
        """The kept passages for ``request``, best first: from its documents and the corpus.

        The top ``rerank_top_k`` above ``similarity_threshold`` come first; with
        ``fill_budget``, every further passage at or above ``fill_threshold`` follows in rank
        order, and the builder keeps as many as the source's grant holds.
        """
        search = settings.search
        if settings.fill_threshold is not None:
            search = replace(search, top_k=max(search.top_k, settings.fill_limit),
                             rerank_top_k=UNLIMITED,
                             similarity_threshold=min(search.similarity_threshold,
                                                      settings.fill_threshold))
        found: list[RetrievedChunk] = []
        if request.documents:
            found += self._index_for(request, settings.chunk_size).search_with(
                request.user_input, search)
        if self.retriever is not None:
            found += self.retriever.search_with(request.user_input, search)
        if request.documents and self.retriever is not None:
            # Two indexes' fused scores are relative to each: merge on the calibrated one.
            found.sort(key=lambda p: (p.outdated, -p.similarity, p.doc_id, p.start))
        return _top_then_fill(found, settings)

    def _index_for(self, request: Request, chunk_size: int) -> Retriever:
        documents = [_source_document(index, doc) for index, doc in enumerate(request.documents)]
        key = (chunk_size, *sorted((d.id, content_hash(d.text), d.title or "", d.timestamp or "")
                                   for d in documents))
        with self._lock:
            retriever = self._indexes.get(key)
            if retriever is None:
                retriever = Retriever(embedder=self.embedder, tokenizer=self.tokenizer,
                                      chunk_size=chunk_size, alpha=self.alpha)
                retriever.add(_newest_by_id(documents))
                self._indexes[key] = retriever
                while len(self._indexes) > self._max_indexes:
                    self._indexes.popitem(last=False)
            self._indexes.move_to_end(key)
            return retriever

    def _items(self, rank: int, passage: RetrievedChunk, query: str,
               settings: RetrievalOptions) -> Iterator[ContextItem]:
        text = passage.text
        if self.tokenizer.count(text) > settings.max_passage_tokens:
            text = cut_around_keywords(text, query, settings.max_passage_tokens, self.tokenizer)
        call_id = "rag_" + hashlib.blake2b(
            f"{passage.doc_id}\x00{passage.start}".encode("utf-8", "surrogatepass"),
            digest_size=6).hexdigest()
        # The paragraphs are in the result's label (``policy.md §2``); saying them again in
        # the call would cost every passage tokens the budget could spend on text.
        arguments = json.dumps({"id": passage.doc_id}, ensure_ascii=False)
        call = Message(role="assistant", tool_calls=(
            ToolCall(id=call_id, name=RETRIEVAL_TOOL, arguments=arguments),))
        result = Message(role="tool", content=text, tool_call_id=call_id, name=RETRIEVAL_TOOL)
        metadata = {"document": passage.doc_id, "score": passage.score,
                    "similarity": passage.similarity, "timestamp": passage.timestamp,
                    "paragraphs": (passage.paragraph_start + 1, passage.paragraph_end + 1),
                    "outdated": passage.outdated}
        group = f"r{rank}"
        yield ContextItem(key=f"{self.namespace}.{rank}.call", message=call,
                          layer=Layer.EVIDENCE, group=group, order=2 * rank, metadata=metadata)
        yield ContextItem(key=f"{self.namespace}.{rank}.text", message=result,
                          layer=Layer.EVIDENCE, group=group, order=2 * rank + 1, untrusted=True,
                          truncatable=True, label=passage.label, metadata=metadata)


def _top_then_fill(ranked: list[RetrievedChunk], settings: RetrievalOptions
                   ) -> list[RetrievedChunk]:
    """The confident top passages first, then (when filling) the rest in rank order."""
    search = settings.search
    top = [p for p in ranked if p.similarity >= search.similarity_threshold][
        : search.rerank_top_k]
    if settings.fill_threshold is None:
        return top
    chosen = {id(p) for p in top}
    return top + [p for p in ranked if id(p) not in chosen]


def _source_document(index: int, doc: Any) -> SourceDocument:
    text = check_text(doc.text, f"documents[{index}].text")
    for field in ("id", "source", "timestamp"):
        value = getattr(doc, field)
        if value is not None:
            check_text(value, f"documents[{index}].{field}")
    return SourceDocument(id=doc.id, text=text, title=doc.source, timestamp=doc.timestamp)


def _newest_by_id(documents: list[SourceDocument]) -> list[SourceDocument]:
    """One document per id: the newest timestamp (the request schema's rule), first on ties."""
    newest: dict[str, SourceDocument] = {}
    for doc in documents:
        seen = newest.get(doc.id)
        if seen is None or (doc.timestamp or "") > (seen.timestamp or ""):
            newest[doc.id] = doc
    return list(newest.values())
