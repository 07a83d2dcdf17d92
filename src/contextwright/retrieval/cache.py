"""A persistent embedding cache: each passage is embedded once, ever.

Vectors are stored in a SQLite file keyed by (model name, sha256 of the text), with an in-memory
LRU in front, so a corpus re-indexed by another process, or a session re-read on the next turn,
costs a lookup instead of a model call (e5 encodes about 10 passages a second on 2 cores).
``CachedEmbedder`` wraps any ``Embedder`` and sends it only the texts the cache lacks. Query
vectors go to the in-memory LRU only: a question asked once is not worth a disk write, but an
agent loop asks the same question on every call of one turn.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from os import PathLike
from typing import Any

from contextwright.errors import ContextwrightError
from contextwright.retrieval._numpy import np
from contextwright.retrieval.dense import Embedder
from contextwright.retrieval.text import content_hash

_SCHEMA = """CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL, sha256 TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (model, sha256))"""


class EmbeddingCache:
    """Vectors by (model, text hash): an LRU of ``memory_items`` over an optional SQLite file.

    Thread-safe. ``path=None`` keeps the cache in memory only.
    """

    def __init__(self, path: str | PathLike[str] | None = None, *,
                 memory_items: int = 100_000) -> None:
        self._memory: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._limit = memory_items
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = _open(path)

    def get(self, model: str, keys: Sequence[str], *, dim: int | None = None
            ) -> list[Any | None]:
        """The vector of each text hash, or None where it is not cached.

        With ``dim``, a vector of another length counts as not cached: a model can keep its
        name and change its dimension (an API model's ``dimensions`` setting, an upgraded custom
        model), and its old vectors would not fit the index.
        """
        with self._lock:
            found = [self._from_memory((model, key), dim) for key in keys]
            missing = [key for key, vector in zip(keys, found, strict=True) if vector is None]
            stored = self._from_disk(model, missing, dim) if missing and self._db else {}
            for key, vector in stored.items():
                self._remember((model, key), vector)
            return [vector if vector is not None else stored.get(key)
                    for key, vector in zip(keys, found, strict=True)]

    def put(self, model: str, keys: Sequence[str], vectors: Any, *, persist: bool = True
            ) -> None:
        """Remember ``vectors[i]`` for ``keys[i]``; written to disk when ``persist``."""
        rows = np.asarray(vectors, dtype=np.float32)
        with self._lock:
            for key, vector in zip(keys, rows, strict=True):
                self._remember((model, key), vector.copy())
            if persist and self._db is not None:
                with self._db:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)",
                        [(model, key, int(v.shape[0]), v.tobytes())
                         for key, v in zip(keys, rows, strict=True)])

    def close(self) -> None:
        """Close the SQLite file (the in-memory part stays usable)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _from_memory(self, key: tuple[str, str], dim: int | None) -> Any | None:
        vector = self._memory.get(key)
        if vector is None or (dim is not None and vector.shape != (dim,)):
            return None
        self._memory.move_to_end(key)
        return vector

    def _remember(self, key: tuple[str, str], vector: Any) -> None:
        self._memory[key] = vector
        self._memory.move_to_end(key)
        while len(self._memory) > self._limit:
            self._memory.popitem(last=False)

    def _from_disk(self, model: str, keys: list[str], dim: int | None) -> dict[str, Any]:
        assert self._db is not None
        found: dict[str, Any] = {}
        for start in range(0, len(keys), 500):  # stay under SQLite's bound-variable limit
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            query = ("SELECT sha256, dim, vector FROM embeddings "
                     f"WHERE model = ? AND sha256 IN ({marks})")
            rows = self._db.execute(query, [model, *part]).fetchall()
            for key, length, blob in rows:
                if dim is not None and length != dim:
                    continue  # written by the model at another dimension: embedded again
                if not isinstance(blob, bytes) or len(blob) != 4 * length:
                    raise ContextwrightError("embedding cache holds a truncated vector")
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found


def _open(path: str | PathLike[str]) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(_SCHEMA)
    except sqlite3.Error as exc:
        raise ContextwrightError(f"cannot open the embedding cache: {exc}") from None
    db.isolation_level = "DEFERRED"
    return db


class CachedEmbedder:
    """An ``Embedder`` that asks the wrapped one only for texts the cache has not seen."""

    def __init__(self, embedder: Embedder, cache: EmbeddingCache | None = None, *,
                 batch_size: int = 64) -> None:
        self.inner = embedder
        self.cache = cache if cache is not None else EmbeddingCache()
        self.batch_size = max(batch_size, 1)

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped model's vector length."""
        return self.inner.dim

    def embed_queries(self, texts: Sequence[str]) -> Any:
        """Query vectors; cached in memory only."""
        return self._embed(texts, query=True)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        """Passage vectors; cached in memory and on disk."""
        return self._embed(texts, query=False)

    def _encode_missing(self, model: str, texts: Sequence[str], unique: dict[str, int], *,
                        query: bool) -> dict[str, Any]:
        """Encode in batches, caching each batch as it is done.

        A long indexing run that stops half way keeps what it has encoded.
        """
        encode = self.inner.embed_queries if query else self.inner.embed_passages
        items = list(unique.items())
        fresh: dict[str, Any] = {}
        for start in range(0, len(items), self.batch_size):
            part = items[start : start + self.batch_size]
            vectors = self._checked(encode([texts[i] for _, i in part]), len(part))
            self.cache.put(model, [key for key, _ in part], vectors, persist=not query)
            fresh.update(zip((key for key, _ in part), vectors, strict=True))
        return fresh

    def _checked(self, vectors: Any, count: int) -> Any:
        """The embedder's answer for ``count`` texts as float32 rows, or a ``ContextwrightError``.

        Checked before anything is cached: a vector holding NaN makes every similarity NaN, and
        a NaN passes no threshold, so its passage would silently never be found again — for
        ever, once the vector is in the SQLite cache. A wrong shape is the embedder's fault
        and is named as such, not left to fail later in numpy.
        """
        try:
            array = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError):
            raise ContextwrightError(f"embedder {self.name!r} returned something that is not "
                                     "an array of vectors") from None
        if array.shape != (count, self.dim):
            raise ContextwrightError(f"embedder {self.name!r} returned vectors of shape "
                                     f"{array.shape} for {count} texts (expected "
                                     f"({count}, {self.dim}))")
        if not np.isfinite(array).all():
            raise ContextwrightError(f"embedder {self.name!r} returned a vector that is not "
                                     "finite (NaN or infinity)")
        return array

    def _embed(self, texts: Sequence[str], *, query: bool) -> Any:
        model = ("query:" if query else "") + self.inner.name
        keys = [content_hash(text) for text in texts]
        found = self.cache.get(model, keys, dim=self.dim)
        todo = sorted({i for i, vector in enumerate(found) if vector is None},
                      key=lambda i: keys[i])
        unique: dict[str, int] = {}
        for i in todo:
            unique.setdefault(keys[i], i)
        if unique:
            fresh = self._encode_missing(model, texts, unique, query=query)
            found = [vector if vector is not None else fresh[keys[i]]
                     for i, vector in enumerate(found)]
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, vector in enumerate(found):
            result[i] = vector
        return result
