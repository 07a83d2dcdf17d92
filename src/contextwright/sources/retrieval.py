"""Retrieved passages (L4): the request's documents, or a prepared corpus, searched for the input.

``RetrievalSource`` chunks and indexes ``request.documents`` (indexes are cached across builds,
keyed by chunk size and every field of each document, its text by hash, and embeddings are cached by
text, so a document is chunked once per set and embedded once ever), or searches a ``Retriever``
given to it (a corpus indexed ahead of time), or both. Each kept passage is shown the way
``DocumentSource`` shows a document: one item, fenced as untrusted data, labelled with its document
and paragraphs (``refund_policy.md §2``); a passage longer than ``max_passage_tokens`` is cut around
the query's keywords first.

Plan options (all optional): ``top_k`` (8), ``similarity_threshold`` (0.35), ``rerank_top_k`` (3),
``chunk_size`` (200), ``alpha`` (each index's own: the source's for request documents, the given
``Retriever``'s for the corpus), ``dense`` (true: use the embedder when there is one),
``keep_outdated`` (false: superseded versions are left out; true: kept, marked ``OUTDATED``, ranked
last), ``max_passage_tokens`` (400), ``fill_budget`` (false: only the top ``rerank_top_k``; true:
every further passage at or above ``fill_threshold`` (0.1) follows in rank order and the source's
grant decides how many go in, out of ``fill_limit`` (64) chunks — the shipped ``rag_qa`` and
``doc_analysis`` plans set it). ``rank`` (the built-in ``DocumentSource``'s) and the options every
source takes are accepted too, so one plan serves with either source. A request document the source
shows no passage of is reported with why: an older version (same id, or same title), superseded by
the corpus, its text or passage repeating a shown one, or not retrieved. A document's ``score``
from the request is not used: passages are ranked by this source's own fusion; its ``source`` is
the title (the label, and what ties versions of one document) and its ``timestamp`` the version
time. With both a corpus and request documents, a version superseded by a newer one on the other
side (same id, or same title when the corpus ties versions by title) is treated as the retriever
treats one inside an index: left out, or marked and ranked last; the same id on both sides at the
same version is the request's (given now, it overrides the corpus copy).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, NamedTuple

from contextwright.checks import whole_number
from contextwright.core.cutting import cut_around_keywords
from contextwright.core.items import ContextItem, Layer
from contextwright.core.request import Request, check_document
from contextwright.core.versions import VersionKey, version_key
from contextwright.errors import InvalidInputError, PlanError
from contextwright.retrieval import (
    CachedEmbedder,
    Embedder,
    RetrievedChunk,
    Retriever,
    SearchSettings,
    SourceDocument,
)
from contextwright.retrieval.retriever import text_key
from contextwright.retrieval.text import content_hash
from contextwright.sources.documents import (
    BLANK,
    document_message,
    is_blank,
    newest_per_id,
    omitted_document,
    superseded,
)
from contextwright.sources.options import DocumentOptions
from contextwright.tokens import CountingTokenizer, get_tokenizer


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalOptions:
    """The source's plan options, validated."""

    search: SearchSettings
    """What ``Retriever.search`` is given."""
    chunk_size: int
    """Tokens per chunk for request documents."""
    max_passage_tokens: int
    """A longer passage is cut around the query's keywords (at least 1: a passage cut to
    nothing would be an empty fenced block)."""
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
_IGNORED = frozenset(DocumentOptions.model_fields) - {*_INTS, *_FLOATS, "alpha", *_FLAGS}
"""Options a ``rag`` plan may give that this source does not read: ``rank`` (the built-in
``DocumentSource``'s order; passages are always ranked by relevance) and those every source
takes (``digest_share``, ``max_item_share`` ...), which the builder reads. Accepted, so a plan
checked against ``DocumentOptions`` serves with either source."""
_MINIMUMS = {"chunk_size": 8, "max_passage_tokens": 1}
"""Smallest accepted values (default 0): ``chunk_document`` refuses chunks under 8 tokens, and
that must be reported as the plan's fault, not the request's; a passage cut to 0 tokens would
be shown as an empty fenced block."""
UNLIMITED = 1_000_000
"""``rerank_top_k`` of a filling search: more than any index holds."""


def read_options(options: Mapping[str, Any], default_alpha: float | None = None
                 ) -> RetrievalOptions:
    """Validate the plan's options; ``PlanError`` names a bad one.

    ``default_alpha`` is the alpha when the plan gives none (or ``alpha: null``); None leaves
    each index its own, which is what ``RetrievalSource`` does: a corpus ``Retriever`` made with
    ``alpha=1.0`` (lexical only, no query to embed) is searched lexical only.
    """
    unknown = set(options) - {*_INTS, *_FLOATS, "alpha", *_FLAGS, *_IGNORED}
    if unknown:
        raise PlanError(f"rag options: unknown option {sorted(unknown)[0]!r}")
    ints = {name: _number(options, name, default, int) for name, default in _INTS.items()}
    floats = {name: _number(options, name, default, float) for name, default in _FLOATS.items()}
    alpha = (default_alpha if options.get("alpha") is None
             else _number(options, "alpha", 0.5, float))
    if alpha is not None and not 0.0 <= alpha <= 1.0:
        raise PlanError("rag options: alpha must be between 0 and 1")
    for name, value in floats.items():  # calibrated similarities lie in [0, 1]
        if value > 1.0:
            raise PlanError(f"rag options: {name} must be between 0 and 1")
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
    # NaN passes every comparison below (and a NaN threshold would silently drop every
    # passage); infinity is no count of anything.
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or (isinstance(value, float) and not math.isfinite(value))):
        raise PlanError(f"rag options: {name} must be a finite number")
    minimum = _MINIMUMS.get(name, 0)
    if value < minimum:
        raise PlanError(f"rag options: {name} must be at least {minimum}")
    if kind is int and value != int(value):
        raise PlanError(f"rag options: {name} must be a whole number")
    return kind(value)


Origin = Literal["request", "corpus"]
"""Where a passage was found: the request's documents or the prepared corpus."""


class _Found(NamedTuple):
    """A passage and where it was found."""

    passage: RetrievedChunk
    origin: Origin


_Why = Literal["older", "repeats", "older_in_corpus", "repeats_corpus"]
"""Why a request document's passages were dropped: ``older`` (a newer version with the same
title, ``_Dropped.other``), ``repeats`` (its passage repeats one of ``other``), or the same
against the corpus."""


class _Dropped(NamedTuple):
    """Why the search dropped a request document's passages, and because of which document."""

    why: _Why
    other: str | None
    """The request document id that won (None for the corpus: its ids are not reported)."""


class _Shown(NamedTuple):
    """The passages to show, best first, and why request documents' passages were dropped."""

    found: list[_Found]
    dropped: dict[str, _Dropped]
    """Per request document id: the first reason met, consulted only if nothing of it shows."""


class RetrievalSource:
    """Passages retrieved for the user's input, best first, one fenced item each.

    ``namespace`` defaults to ``rag``, so ``ContextBuilder(sources=[RetrievalSource()])``
    replaces the built-in ``DocumentSource``. ``max_indexes`` request-document indexes are kept
    (least recently used evicted first; 0 keeps none). ``alpha`` is the lexical weight of the
    request documents' indexes; a given ``retriever`` is searched with its own. Thread-safe.
    """

    volatile = True
    """Passages follow the input, so a stable-prefix build renders them after the stable part."""
    options_model = DocumentOptions
    """Checked at build under any namespace, as the built-in ``rag`` source's are."""

    def __init__(self, retriever: Retriever | None = None, *, embedder: Embedder | None = None,
                 tokenizer: str | CountingTokenizer = "o200k_base", alpha: float = 0.5,
                 namespace: str = "rag", max_indexes: int = 32) -> None:
        whole_number(max_indexes, "max_indexes")
        # Refused here, as ``Retriever`` refuses it: found at build, it would read as the
        # plan's fault.
        if (isinstance(alpha, bool) or not isinstance(alpha, int | float)
                or not 0.0 <= alpha <= 1.0):
            raise InvalidInputError("alpha must be between 0 and 1")
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

    def offered_units(self, request: Request) -> int:
        """How many units the report counts as offered for ``request``: one per document id."""
        return len({doc.id for doc in request.documents})

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One item per kept passage, best first, after one per request document left out."""
        settings = read_options(options)
        query = request.user_input
        shown = self._found(request, settings)
        yield from self._left_out(request, shown, settings)
        for rank, passage in enumerate(shown.found):
            yield from self._items(rank, passage, query, settings)

    def _left_out(self, request: Request, shown: _Shown, settings: RetrievalOptions
                  ) -> Iterator[ContextItem]:
        """What the source says of the request's documents it shows no passage of, and why."""
        kept = newest_per_id((doc.id, doc.version, doc.timestamp) for doc in request.documents)
        yield from superseded(request, kept, self.namespace)
        position = {request.documents[index].id: index for index in kept}
        showing = {f.passage.doc_id for f in shown.found if f.origin == "request"}
        shown_text = {text_key(request.documents[position[doc_id]].text): position[doc_id]
                      for doc_id in showing if doc_id in position}
        for index in kept:
            doc = request.documents[index]
            if doc.id in showing:
                continue
            same = shown_text.get(text_key(doc.text))
            # Named by position: a reason is kept in clear by a redacting recorder, an id not.
            why = (BLANK if is_blank(doc.text)
                   else f"its text repeats that of documents[{same}]" if same is not None
                   else _dropped_reason(shown.dropped.get(doc.id), position, showing)
                   or _not_retrieved(settings))
            yield omitted_document(self.namespace, index, why)

    def passages(self, request: Request, settings: RetrievalOptions) -> list[RetrievedChunk]:
        """The kept passages for ``request``, best first: from its documents and the corpus.

        The top ``rerank_top_k`` above ``similarity_threshold`` come first; with
        ``fill_budget``, every further passage at or above ``fill_threshold`` follows in rank
        order, and the builder keeps as many as the source's grant holds.
        """
        return [found.passage for found in self._found(request, settings).found]

    def _found(self, request: Request, settings: RetrievalOptions) -> _Shown:
        search = _search_settings(settings)
        documents = _request_documents(request)
        dropped: dict[str, _Dropped] = {}
        mine: list[RetrievedChunk] = []
        if documents:
            trace = self._index_for(documents, settings.chunk_size).search_traced(
                request.user_input, search)
            mine = trace.passages
            if not search.keep_outdated:
                dropped.update((doc_id, _Dropped("older", newest))
                               for doc_id, newest in trace.outdated.items())
            dropped.update((doc_id, _Dropped("repeats", other))
                           for doc_id, other in trace.repeats.items() if doc_id not in dropped)
        if self.retriever is None:
            return _Shown(_top_then_fill([_Found(p, "request") for p in mine], settings), dropped)
        corpus = self.retriever.search_with(request.user_input, search)
        if not documents:
            return _Shown(_top_then_fill([_Found(p, "corpus") for p in corpus], settings), {})
        found = _supersede_across(mine, corpus, documents,
                                  by_title=self.retriever.supersede == "title",
                                  keep_outdated=search.keep_outdated, dropped=dropped)
        # Two indexes' fused scores are relative to each: merge on the calibrated one.
        found.sort(key=lambda f: (f.passage.outdated, -f.passage.similarity, f.passage.doc_id,
                                  f.passage.start))
        return _Shown(_top_then_fill(_distinct_texts(found, dropped), settings), dropped)

    def _index_for(self, documents: list[SourceDocument], chunk_size: int) -> Retriever:
        # Ids are unique here (newest per id): one order whatever the request's. The index is
        # built in that order too, since rows break ties between equal scores: built in the
        # order of whichever request came first, the same request kept another passage
        # depending on what the cache had seen.
        documents = sorted(documents, key=lambda d: d.id)
        key = (chunk_size, *(_document_key(d) for d in documents))
        with self._lock:
            retriever = self._indexes.get(key)
            if retriever is not None:
                self._indexes.move_to_end(key)  # least recently used is evicted first
                return retriever
            retriever = Retriever(embedder=self.embedder, tokenizer=self.tokenizer,
                                  chunk_size=chunk_size, alpha=self.alpha)
            retriever.add(documents)
            self._indexes[key] = retriever
            while len(self._indexes) > self._max_indexes:
                self._indexes.popitem(last=False)
            return retriever

    def _items(self, rank: int, found: _Found, query: str,
               settings: RetrievalOptions) -> Iterator[ContextItem]:
        passage = found.passage
        text = passage.text
        if self.tokenizer.count(text) > settings.max_passage_tokens:
            text = cut_around_keywords(text, query, settings.max_passage_tokens, self.tokenizer)
        metadata = {"document": passage.doc_id, "score": passage.score,
                    "similarity": passage.similarity, "timestamp": passage.timestamp,
                    "paragraphs": (passage.paragraph_start + 1, passage.paragraph_end + 1),
                    "outdated": passage.outdated, "origin": found.origin}
        yield ContextItem(key=f"{self.namespace}.{rank}.text", message=document_message(text),
                          layer=Layer.EVIDENCE, order=rank, untrusted=True,
                          truncatable=True, label=passage.label, metadata=metadata)


def _dropped_reason(dropped: _Dropped | None, position: Mapping[str, int],
                    showing: set[str]) -> str | None:
    """The reason for a search's drop, or None when it no longer explains the document's absence.

    A passage that repeats one of another request document explains nothing when that one is
    not shown either (the ranking cut both): the document was then simply not retrieved.
    """
    if dropped is None:
        return None
    if dropped.why == "older_in_corpus":
        return "superseded by a newer version in the corpus"
    if dropped.why == "repeats_corpus":
        return "its passage repeats one shown from the corpus"
    other = position.get(dropped.other or "")
    if other is None:
        return None
    if dropped.why == "older":
        return f"an older version of documents[{other}] (same title)"
    return f"its passage repeats one of documents[{other}]" if dropped.other in showing else None


def _not_retrieved(settings: RetrievalOptions) -> str:
    """Why a document none of whose passages the search kept is not shown."""
    if settings.fill_threshold is not None:
        return (f"not retrieved for this input: no passage of it at similarity "
                f"{settings.fill_threshold} or more")
    search = settings.search
    return (f"not retrieved for this input: no passage of it among the best "
            f"{search.rerank_top_k} at similarity {search.similarity_threshold} or more")


def _document_key(document: SourceDocument) -> tuple[object, ...]:
    """Everything of ``document`` its index depends on, the text by its hash.

    Every field, not a chosen few: each shows in a passage's label or metadata or weighs in its
    rank (version, time), and an index cached without one kept showing the old value.
    """
    return tuple(content_hash(document.text) if f.name == "text" else getattr(document, f.name)
                 for f in fields(SourceDocument))


def _distinct_texts(found: list[_Found], dropped: dict[str, _Dropped]) -> list[_Found]:
    """The best-ranked passage of each text; a request passage dropped is noted in ``dropped``.

    A document given in the request and also in the corpus is shown once (each index already
    drops repeats within itself).
    """
    seen: dict[bytes, _Found] = {}
    distinct = []
    for item in found:
        key = text_key(item.passage.text)
        first = seen.setdefault(key, item)
        if first is item:
            distinct.append(item)
        elif item.origin == "request" and first.origin == "corpus":
            dropped.setdefault(item.passage.doc_id, _Dropped("repeats_corpus", None))
    return distinct


def _search_settings(settings: RetrievalOptions) -> SearchSettings:
    """What each index is searched with: a filling search retrieves more, down to its floor."""
    search = settings.search
    if settings.fill_threshold is None:
        return search
    return replace(search, top_k=max(search.top_k, settings.fill_limit),
                   rerank_top_k=UNLIMITED,
                   similarity_threshold=min(search.similarity_threshold,
                                            settings.fill_threshold))


def _top_then_fill(ranked: list[_Found], settings: RetrievalOptions) -> list[_Found]:
    """The confident top passages first, then (when filling) the rest in rank order."""
    search = settings.search
    top = [f for f in ranked if f.passage.similarity >= search.similarity_threshold][
        : search.rerank_top_k]
    if settings.fill_threshold is None:
        return top
    chosen = {id(f) for f in top}
    # The search went down to the lower of the two thresholds: the tail must meet its own.
    return top + [f for f in ranked if id(f) not in chosen
                  and f.passage.similarity >= settings.fill_threshold]


def _request_documents(request: Request) -> list[SourceDocument]:
    """The request's documents, validated, one per id (the newest: the request schema's rule)."""
    documents = [_source_document(index, doc) for index, doc in enumerate(request.documents)]
    kept = newest_per_id((d.id, d.version, d.timestamp) for d in documents)
    return [documents[index] for index in kept]


def _source_document(index: int, doc: Any) -> SourceDocument:
    check_document(doc, index)
    return SourceDocument(id=doc.id, text=doc.text, title=doc.source, timestamp=doc.timestamp,
                          version=doc.version)


# --------------------------------------------------------------------------- versions across


@dataclass(slots=True)
class _Newest:
    """The newest version key per document id and per title, among one side's documents."""

    by_id: dict[str, VersionKey] = field(default_factory=dict)
    by_title: dict[str, VersionKey] = field(default_factory=dict)

    @classmethod
    def of(cls, versions: Iterable[tuple[str, str | None, int | None, str | None]]) -> _Newest:
        """From (id, title, version, timestamp) of each document."""
        newest = cls()
        for doc_id, title, version, timestamp in versions:
            # Timestamps were checked when their index was built: this cannot raise.
            key = version_key(version, timestamp, "timestamp")
            newest.by_id[doc_id] = max(newest.by_id.get(doc_id, key), key)
            if title:
                newest.by_title[title] = max(newest.by_title.get(title, key), key)
        return newest

    def supersedes(self, document: RetrievedChunk | SourceDocument, *, by_title: bool,
                   ties: bool = False) -> bool:
        """Whether a newer version of the document is among these.

        Strictly newer, or with ``ties`` also one of the same id at the same version.
        """
        key = version_key(document.version, document.timestamp, "timestamp")
        same_id = self.by_id.get(_doc_id(document))
        if same_id is not None and (same_id > key or (ties and same_id == key)):
            return True
        return bool(by_title and document.title) and self.by_title.get(
            document.title or "", key) > key


def _doc_id(document: RetrievedChunk | SourceDocument) -> str:
    return document.doc_id if isinstance(document, RetrievedChunk) else document.id


def _supersede_across(mine: list[RetrievedChunk], corpus: list[RetrievedChunk],
                      documents: list[SourceDocument], *, by_title: bool,
                      keep_outdated: bool, dropped: dict[str, _Dropped]) -> list[_Found]:
    """Both sides' passages, with the retriever's supersede rule applied between the sides.

    Each index has already handled versions inside it. Across the two, one document can sit on
    both sides (e.g. last year's refund policy in the corpus, this year's in the request), and the
    older must not be shown as current. Same id always ties two versions (ids are stable); same
    title does when the corpus ties by title, as the request's index does. Every request document is
    known, so a corpus passage yields to any newer one, retrieved or not; of the corpus only what
    was retrieved is known here. The same id at the same version on both sides is one document:
    the request's copy, given now, is the current one (a caller passes it to override the corpus).
    A request document superseded by the corpus is noted in ``dropped`` when it is left out.
    """
    newer_in_request = _Newest.of((d.id, d.title, d.version, d.timestamp) for d in documents)
    newer_in_corpus = _Newest.of((p.doc_id, p.title, p.version, p.timestamp) for p in corpus)
    if not keep_outdated:
        for document in documents:
            if newer_in_corpus.supersedes(document, by_title=by_title):
                dropped.setdefault(document.id, _Dropped("older_in_corpus", None))
    return [*_marked(mine, "request", newer_in_corpus, by_title, keep_outdated, ties=False),
            *_marked(corpus, "corpus", newer_in_request, by_title, keep_outdated, ties=True)]


def _marked(passages: list[RetrievedChunk], origin: Origin, other_side: _Newest,
            by_title: bool, keep_outdated: bool, *, ties: bool) -> Iterator[_Found]:
    """The passages not superseded by ``other_side``; the superseded too, marked, if kept."""
    for passage in passages:
        if other_side.supersedes(passage, by_title=by_title, ties=ties):
            if not keep_outdated:
                continue
            passage = replace(passage, outdated=True)
        yield _Found(passage, origin)
