"""The retriever: index documents incrementally, search with hybrid fusion, merge, rerank.

``search`` runs three passes (retrieve, merge, rerank) with the fusion ranking of ``fusion``:
retrieve the ``top_k`` chunks by fused similarity (lexical BM25 + dense cosine; lexical only
without an embedder), drop those under ``similarity_threshold`` (calibrated, see ``fusion``),
merge adjacent or overlapping chunks of one document into one passage, drop passages whose text
repeats another's, and let the ``Reranker`` keep the best ``rerank_top_k``. A document whose
newer version is indexed (same id, or same title with a later version or timestamp) is left out,
or kept marked outdated and ranked last when asked.

Adding documents embeds only the new chunks; an unchanged document added again costs a hash.
``add`` is all or nothing: it validates, chunks and embeds a batch before it changes the index.
A replaced version leaves the BM25 statistics at once; its rows are reclaimed once replaced rows
outnumber live ones. Thread-safe: one lock serialises indexing and searching.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from contextwright.checks import whole_number
from contextwright.core.versions import VersionKey, version_key
from contextwright.errors import InvalidInputError
from contextwright.retrieval._numpy import np
from contextwright.retrieval.cache import CachedEmbedder
from contextwright.retrieval.chunking import (
    DEFAULT_CHUNK_TOKENS,
    Chunk,
    SourceDocument,
    chunk_document,
)
from contextwright.retrieval.dense import Embedder, VectorMatrix
from contextwright.retrieval.fusion import (
    E5_CALIBRATION,
    Calibration,
    RankingWeights,
    minmax,
    weighted_fusion,
)
from contextwright.retrieval.lexical import Bm25Index
from contextwright.retrieval.rerank import FusionReranker, Reranker, RetrievedChunk
from contextwright.retrieval.text import content_hash, search_tokens
from contextwright.tokens import CountingTokenizer, get_tokenizer

Supersede = Literal["title", "id"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSettings:
    """Per-search settings, with their defaults."""

    top_k: int = 8
    """Chunks retrieved by fused similarity before thresholding and merging."""
    similarity_threshold: float = 0.35
    """Minimum calibrated similarity (see ``fusion``). With α=0.5 and dense on, 0.35 is met by,
    e.g., half the query's idf weight present plus a cosine of about 0.81; lexical only, by 35 %
    of the idf weight. On the HotpotQA BEIR pool 0.35 keeps 97.4 % of the gold passages and
    0.36 % of the others (hybrid), 87.9 % and 0.39 % (lexical)."""
    rerank_top_k: int = 3
    """Passages kept after reranking."""
    alpha: float | None = None
    """Lexical weight in the fusion (None: the retriever's); 1 is lexical only, 0 dense only."""
    dense: bool = True
    """Use the embedder when the retriever has one."""
    keep_outdated: bool = False
    """Keep superseded versions (marked outdated, ranked last) instead of leaving them out."""

    def __post_init__(self) -> None:
        # Outside [0, 1] the fusion weights and the calibrated similarity leave their range
        # (a negative alpha gives similarities above 1), so the threshold would mean nothing.
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise InvalidInputError("alpha must be between 0 and 1")
        for name in ("top_k", "rerank_top_k"):
            whole_number(getattr(self, name), name)
        if not 0.0 <= self.similarity_threshold <= 1.0:  # NaN included: it would drop all
            raise InvalidInputError("similarity_threshold must be between 0 and 1")


@dataclass(slots=True)
class _Doc:
    document: SourceDocument
    digest: str
    rows: list[int]
    """Its chunks' rows, in chunk order (renumbered when the index is compacted)."""
    order_key: VersionKey


@dataclass(frozen=True, slots=True, kw_only=True)
class _Prepared:
    """A document ready to index: everything that can fail is done before the index changes."""

    document: SourceDocument
    digest: str
    order_key: VersionKey
    chunks: list[Chunk]
    texts: list[str]
    """Per chunk, ``indexed_text``: what is searched and embedded."""
    tokens: list[list[str]]
    """Per chunk, the search tokens of its text."""
    text_keys: list[bytes]
    """Per chunk, ``text_key`` of its text."""


class Retriever:
    """An incremental hybrid index over documents, searched one query at a time."""

    def __init__(self, *, embedder: Embedder | None = None,
                 tokenizer: str | CountingTokenizer = "o200k_base",
                 chunk_size: int = DEFAULT_CHUNK_TOKENS, alpha: float = 0.5,
                 calibration: Calibration = E5_CALIBRATION,
                 reranker: Reranker | None = None, supersede: Supersede = "title") -> None:
        if not 0.0 <= alpha <= 1.0:
            raise InvalidInputError("alpha must be between 0 and 1")
        self.embedder = _cached(embedder)
        self.tokenizer = get_tokenizer(tokenizer)
        self.chunk_size, self.alpha, self.calibration = chunk_size, alpha, calibration
        self.reranker: Reranker = reranker or FusionReranker(RankingWeights())
        self.supersede = supersede
        self._lexical = Bm25Index()
        self._vectors = VectorMatrix(self.embedder.dim) if self.embedder else None
        self._chunks: list[Chunk] = []
        self._text_keys: list[bytes] = []
        """Per row, ``text_key`` of the chunk's text (a one-chunk passage's duplicate check)."""
        self._row_doc: list[str] = []
        self._docs: dict[str, _Doc] = {}
        self._lock = threading.Lock()
        self._eligible: dict[bool, tuple[Any, dict[str, str]]] = {}

    @property
    def document_count(self) -> int:
        """Documents currently indexed (replaced versions of one id not counted)."""
        return len(self._docs)

    @property
    def chunk_count(self) -> int:
        """Chunks of the documents currently indexed."""
        return sum(len(doc.rows) for doc in self._docs.values())

    def add(self, documents: Iterable[SourceDocument]) -> int:
        """Index documents; returns how many chunks were added.

        A document already indexed with the same content and metadata is skipped; one with the
        same id and anything changed replaces the old one (within a batch, the last version of
        an id wins). Only new chunks are embedded. All or nothing: when a document is refused
        (``InvalidInputError``) or the embedder fails, the index is left exactly as it was.
        """
        with self._lock:
            prepared = self._prepare(documents)
            vectors = self._embed(prepared)
            for document in prepared:
                self._commit(document)
            if vectors is not None and self._vectors is not None:
                self._vectors.append(vectors)
            if prepared:
                self._eligible.clear()
                self._compact_if_sparse()
            return sum(len(document.chunks) for document in prepared)

    def _prepare(self, documents: Iterable[SourceDocument]) -> list[_Prepared]:
        """Validate, chunk and tokenize the documents that change the index; mutates nothing."""
        pending: dict[str, _Prepared] = {}
        for position, document in enumerate(documents):
            _check_fields(document, position)
            # repr, not str: a version is an int, and no other value may share its digest.
            digest = content_hash("\x00".join((document.text, document.title or "",
                                               document.timestamp or "", repr(document.version))))
            known = self._docs.get(document.id)
            current = pending.get(document.id) or known
            if current is not None and current.digest == digest:
                continue
            pending.pop(document.id, None)  # re-inserted below: commits follow the batch order
            if known is not None and known.digest == digest:
                continue  # the batch went back to the indexed version
            pending[document.id] = self._prepare_one(document, digest, position)
        return list(pending.values())

    def _prepare_one(self, document: SourceDocument, digest: str, position: int) -> _Prepared:
        chunks = chunk_document(document, self.tokenizer, chunk_size=self.chunk_size)
        texts = [indexed_text(document, chunk) for chunk in chunks]
        return _Prepared(document=document, digest=digest, order_key=version_key(
                             document.version, document.timestamp,
                             f"documents[{position}].timestamp"),
                         chunks=chunks, texts=texts,
                         tokens=[search_tokens(text) for text in texts],
                         text_keys=[text_key(chunk.text) for chunk in chunks])

    def _embed(self, prepared: list[_Prepared]) -> Any | None:
        """The vectors of every prepared chunk, in order (None without an embedder)."""
        texts = [text for document in prepared for text in document.texts]
        if not texts or self._vectors is None or self.embedder is None:
            return None
        return self.embedder.embed_passages(texts)

    def _commit(self, prepared: _Prepared) -> None:
        """Index one prepared document, taking the version it replaces out of the index."""
        document = prepared.document
        replaced = self._docs.get(document.id)
        if replaced is not None:
            for row in replaced.rows:
                chunk = self._chunks[row]
                self._lexical.remove(row, search_tokens(indexed_text(replaced.document, chunk)))
        rows = [self._lexical.add(tokens) for tokens in prepared.tokens]
        self._chunks.extend(prepared.chunks)
        self._text_keys.extend(prepared.text_keys)
        self._row_doc.extend(document.id for _ in prepared.chunks)
        self._docs[document.id] = _Doc(document=document, digest=prepared.digest, rows=rows,
                                       order_key=prepared.order_key)

    def _compact_if_sparse(self) -> None:
        """Renumber the rows without the replaced versions' once those outnumber the live ones.

        Replaced rows no longer count in any statistic (``Bm25Index.remove``), but they still
        hold memory (a vector each) and cost scoring time. Compacting when they pass half the
        rows keeps both within twice the live size, at an amortised constant cost per replaced
        row; vectors are moved, not embedded again. Results do not change: scores do not depend
        on row numbers, and the renumbering keeps the rows' order, which breaks ties.
        """
        live = self._lexical.live_rows
        if len(self._lexical) - live <= live:
            return
        kept = self._lexical.compact().tolist()
        if self._vectors is not None:
            self._vectors.keep(kept)
        self._chunks = [self._chunks[row] for row in kept]
        self._text_keys = [self._text_keys[row] for row in kept]
        self._row_doc = [self._row_doc[row] for row in kept]
        renumbered = {old: new for new, old in enumerate(kept)}
        for doc in self._docs.values():
            doc.rows = [renumbered[row] for row in doc.rows]
        self._eligible.clear()

    def search(self, query: str, *, top_k: int = 8, similarity_threshold: float = 0.35,
               rerank_top_k: int = 3, alpha: float | None = None, dense: bool = True,
               keep_outdated: bool = False) -> list[RetrievedChunk]:
        """The best passages for ``query``, best first; the arguments are ``SearchSettings``."""
        return self.search_with(query, SearchSettings(
            top_k=top_k, similarity_threshold=similarity_threshold, rerank_top_k=rerank_top_k,
            alpha=alpha, dense=dense, keep_outdated=keep_outdated))

    def search_with(self, query: str, settings: SearchSettings) -> list[RetrievedChunk]:
        """``search`` with its settings as one object (see the module docstring)."""
        return self.search_traced(query, settings).passages

    def search_traced(self, query: str, settings: SearchSettings) -> SearchTrace:
        """``search_with``, and what a caller needs to say why a document is not among them."""
        with self._lock:
            eligible, outdated = self._eligible_rows(settings.keep_outdated)
            if not len(eligible):
                return SearchTrace([], {}, dict(outdated))
            fused, similarity, lexical, dense = self._score(query, eligible, settings)
            order = _top(fused, eligible, max(settings.top_k, 0))
            # Min–max puts the weakest row at 0 even when it matches, so only the calibrated
            # similarity decides what is too weak to keep.
            picked = [i for i in order if similarity[i] > 0
                      and similarity[i] >= settings.similarity_threshold]
            merged = self._merge([
                (int(eligible[i]), float(fused[i]), float(similarity[i]), float(lexical[i]),
                 None if dense is None else float(dense[i])) for i in picked], outdated)
            runs = _distinct(merged)
            repeats = _repeats(merged, runs)
            passages = [self._passage(doc_id, run, doc_id in outdated) for doc_id, run in runs]
        return SearchTrace(self.reranker.rerank(query, passages, limit=settings.rerank_top_k),
                           repeats, dict(outdated))

    def _eligible_rows(self, keep_outdated: bool) -> tuple[Any, dict[str, str]]:
        """Rows of live documents (current versions only unless kept), and ``_outdated``."""
        cached = self._eligible.get(keep_outdated)
        if cached is not None:
            return cached
        outdated = self._outdated()
        rows = [row for doc_id, doc in self._docs.items()
                if keep_outdated or doc_id not in outdated for row in doc.rows]
        result = (np.asarray(sorted(rows), dtype=np.int64), outdated)
        self._eligible[keep_outdated] = result
        return result

    def _outdated(self) -> dict[str, str]:
        """Per document a newer version of which is indexed: the id of its newest version."""
        newest: dict[str, tuple[VersionKey, str]] = {}
        for doc_id, doc in self._docs.items():
            lineage = self._lineage(doc)
            seen = newest.get(lineage)
            if seen is None or doc.order_key > seen[0]:
                newest[lineage] = (doc.order_key, doc_id)
        return {doc_id: top[1] for doc_id, doc in self._docs.items()
                if doc.order_key < (top := newest[self._lineage(doc)])[0]}

    def _lineage(self, doc: _Doc) -> str:
        title = doc.document.title
        return f"title:{title}" if self.supersede == "title" and title else f"id:{doc.document.id}"

    def _score(self, query: str, rows: Any, settings: SearchSettings
               ) -> tuple[Any, Any, Any, Any | None]:
        alpha = self.alpha if settings.alpha is None else settings.alpha
        tokens = search_tokens(query)
        bm25 = self._lexical.scores(tokens)[rows]
        coverage = self._lexical.coverage(tokens)[rows]
        use_dense = settings.dense and self.embedder is not None and self._vectors is not None
        if not use_dense or alpha >= 1.0:
            return minmax(bm25), coverage, coverage, None
        assert self.embedder is not None and self._vectors is not None
        query_vector = self.embedder.embed_queries([query])[0]
        cosine = self._vectors.similarities(query_vector)[rows]
        fused = weighted_fusion(bm25, cosine, alpha)
        similarity = alpha * coverage + (1.0 - alpha) * self.calibration.apply(cosine)
        return fused, similarity, coverage, cosine

    def _merge(self, hits: list[_Hit], outdated: Mapping[str, str]) -> list[_Run]:
        """Runs of adjacent or overlapping chunks of a document: one passage each."""
        by_doc: dict[str, list[_Hit]] = {}
        for hit in hits:
            by_doc.setdefault(self._row_doc[hit[0]], []).append(hit)
        runs: list[_Run] = []
        chunks = self._chunks
        for doc_id, doc_hits in by_doc.items():
            doc_hits.sort(key=lambda hit: chunks[hit[0]].start)
            run = [doc_hits[0]]
            for hit in doc_hits[1:]:
                if chunks[hit[0]].index <= chunks[run[-1][0]].index + 1:
                    run.append(hit)
                    continue
                runs.append(self._run(doc_id, run, doc_id in outdated))
                run = [hit]
            runs.append(self._run(doc_id, run, doc_id in outdated))
        return runs

    def _run(self, doc_id: str, run: list[_Hit], outdated: bool) -> _Run:
        start = self._chunks[run[0][0]].start
        if len(run) == 1:  # the usual passage: its text's key was computed at indexing
            return _Run(doc_id, run, self._text_keys[run[0][0]], run[0][1], start, outdated)
        end = max(self._chunks[hit[0]].end for hit in run)
        text = self._docs[doc_id].document.text[start:end]
        return _Run(doc_id, run, text_key(text), max(hit[1] for hit in run), start, outdated)

    def _passage(self, doc_id: str, run: list[_Hit], outdated: bool) -> RetrievedChunk:
        document = self._docs[doc_id].document
        chunks = [self._chunks[hit[0]] for hit in run]
        start, end = chunks[0].start, max(chunk.end for chunk in chunks)
        best = max(run, key=lambda hit: hit[1])
        return RetrievedChunk(
            doc_id=doc_id, title=document.title, text=document.text[start:end], start=start,
            end=end, paragraph_start=chunks[0].paragraph_start,
            paragraph_end=max(chunk.paragraph_end for chunk in chunks),
            chunks=tuple(chunk.index for chunk in chunks), timestamp=document.timestamp,
            version=document.version, fused=best[1], similarity=max(hit[2] for hit in run),
            lexical=max(hit[3] for hit in run), dense=best[4], outdated=outdated)


class SearchTrace(NamedTuple):
    """What one search kept, and what tells why the documents it did not keep are left out."""

    passages: list[RetrievedChunk]
    """The passages ``search_with`` returns."""
    repeats: dict[str, str]
    """Per document a passage of which was dropped because a better-ranked one has the same
    text: the id of that one's document."""
    outdated: dict[str, str]
    """Per document a newer version of which is indexed: the id of its newest version."""


_Hit = tuple[int, float, float, float, float | None]
"""A retrieved chunk: (row, fused, similarity, lexical coverage, cosine or None)."""


class _Run(NamedTuple):
    """Hits that make one passage, with what ordering and de-duplication need of it."""

    doc_id: str
    hits: list[_Hit]
    key: bytes
    """``text_key`` of the passage's text."""
    fused: float
    """The best fused score among the hits (the passage's)."""
    start: int
    """Where the passage starts in the document."""
    outdated: bool = False
    """A newer version of the document is indexed."""


def _check_fields(document: SourceDocument, position: int) -> None:
    """Refuse a document whose fields have the wrong types, before anything is indexed.

    Corpora often come from JSON or front matter, where ``version: "2"`` is easy to write. Let
    in, such a version cannot be ordered against the others, and every later search would fail
    until the document changed; so it is refused here, with the field named, as
    ``Request.validate`` refuses it.
    """
    where = f"documents[{position}]"
    for name in ("id", "text", "title", "timestamp"):
        value = getattr(document, name)
        if not isinstance(value, str) and (value is not None or name in ("id", "text")):
            raise InvalidInputError(f"{where}.{name} must be a string")
    if document.version is not None:
        whole_number(document.version, f"{where}.version")


def indexed_text(document: SourceDocument, chunk: Chunk) -> str:
    """What a chunk is searched and embedded as: its text under the document's title.

    A chunk rarely repeats its document's name ("It was founded in 1865" in ``University of
    Kansas``), yet the name is often what the question asks about; the title gives every chunk
    that context. A chunk that already starts with the title is indexed as it is.
    """
    title = (document.title or "").strip()
    if not title or chunk.text.startswith(title):
        return chunk.text
    return f"{title}\n\n{chunk.text}"


def _top(scores: Any, rows: Any, k: int) -> Any:
    """Positions of the ``k`` best scores, best first, ties by row (partitioned, then sorted)."""
    if k < len(scores):
        # Widen the cut to every score tied with the k-th, so ties break by row, not by chance.
        kth = -np.partition(-scores, k - 1)[k - 1] if k > 0 else np.inf
        candidates = np.flatnonzero(scores >= kth)
    else:
        candidates = np.arange(len(scores))
    return candidates[np.lexsort((rows[candidates], -scores[candidates]))][:k]


def _run_order(run: _Run) -> tuple[bool, float, str, int]:
    """Current text first, then best first.

    Old and new versions of a document share most of their paragraphs: of two equal passages
    the current one must stay, or a rule still in force would be shown only as OUTDATED.
    """
    return run.outdated, -run.fused, run.doc_id, run.start


def _distinct(runs: list[_Run]) -> list[tuple[str, list[_Hit]]]:
    """In ``_run_order``, without the runs whose text repeats an earlier one's.

    Texts are compared whitespace-normalised (``text_key``).
    """
    seen: set[bytes] = set()
    kept: list[tuple[str, list[_Hit]]] = []
    for run in sorted(runs, key=_run_order):
        if run.key not in seen:
            seen.add(run.key)
            kept.append((run.doc_id, run.hits))
    return kept


def _repeats(runs: list[_Run], kept: list[tuple[str, list[_Hit]]]) -> dict[str, str]:
    """``SearchTrace.repeats``: who kept the text of the documents ``_distinct`` left out.

    Per document none of whose runs ``_distinct`` kept, the document of the kept run whose text
    one of its runs repeats.
    """
    shown = {doc_id for doc_id, _ in kept}
    first: dict[bytes, str] = {}  # the first run of a text in this order is the one kept
    repeats: dict[str, str] = {}
    for run in sorted(runs, key=_run_order):
        keeper = first.setdefault(run.key, run.doc_id)
        if run.doc_id not in shown:
            repeats.setdefault(run.doc_id, keeper)
    return repeats


def text_key(text: str) -> bytes:
    """What tells two passages' texts apart: a 128-bit digest of the whitespace-normalised text.

    Computed once per chunk at indexing, so a search compares digests instead of normalising
    every candidate's text (two different texts share a digest with probability 2⁻¹²⁸).
    """
    return hashlib.blake2b(" ".join(text.split()).encode("utf-8", "surrogatepass"),
                           digest_size=16).digest()


def _cached(embedder: Embedder | None) -> Embedder | None:
    """Wrap a bare embedder in an in-memory cache (a ``CachedEmbedder`` is used as given)."""
    if embedder is None or isinstance(embedder, CachedEmbedder):
        return embedder
    return CachedEmbedder(embedder)
