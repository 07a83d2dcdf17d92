"""An embedding nearest-centroid mode classifier (the router's second stage).

Each mode is described by a few example messages; their embeddings are averaged into a centroid
once. A message goes to the mode whose centroid is most similar; the confidence is a softmax over
the similarities, so a message halfway between two modes comes out unsure and the router falls
back to its default rule. Works with any embedder that has ``embed_queries`` and
``embed_passages`` (e.g. ``contextwright.retrieval.E5Embedder``, which handles Chinese). numpy is
needed (the ``retrieval`` or ``embeddings`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from contextwright.errors import PlanError
from contextwright.modes.router import Classification

DEFAULT_TEMPERATURE = 0.02
"""Softmax temperature over cosine similarities; e5 similarities sit in a narrow band
(0.7–0.9), so differences of a few hundredths must count."""


class TextEmbedder(Protocol):
    """What the classifier needs of an embedder."""

    def embed_queries(self, texts: Sequence[str]) -> Any:
        """Row-normalised vectors of the messages to classify."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> Any:
        """Row-normalised vectors of the example messages."""
        ...


class CentroidClassifier:
    """Nearest centroid over embedded examples; thread-safe after construction."""

    def __init__(self, embedder: TextEmbedder, examples: Mapping[str, Sequence[str]], *,
                 name: str = "centroid", temperature: float = DEFAULT_TEMPERATURE) -> None:
        import numpy as np

        if len(examples) < 2 or any(not texts for texts in examples.values()):
            raise PlanError("a centroid classifier needs examples for at least two modes")
        for mode, texts in examples.items():
            # One string is a sequence of characters: it would be embedded letter by letter.
            if isinstance(texts, str | bytes) or not all(
                    isinstance(text, str) and text.strip() for text in texts):
                raise PlanError(f"centroid classifier: the examples of mode {mode!r} must be a "
                                "list of non-blank texts")
        self.name = name
        self._embedder = embedder
        self._modes = list(examples)
        centroids = []
        for mode in self._modes:
            vectors = np.asarray(embedder.embed_passages(list(examples[mode])), dtype=np.float32)
            centroid = vectors.mean(axis=0)
            centroids.append(centroid / (np.linalg.norm(centroid) or 1.0))
        self._centroids = np.stack(centroids)
        self._temperature = temperature

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes it has examples for, so the one it answers is always one of these."""
        return tuple(self._modes)

    def classify(self, text: str) -> Classification | None:
        """The nearest mode and how clearly it wins; None for blank text."""
        import numpy as np

        if not text.strip():
            return None
        query = np.asarray(self._embedder.embed_queries([text]), dtype=np.float32)[0]
        similarities = self._centroids @ (query / (np.linalg.norm(query) or 1.0))
        weights = np.exp((similarities - similarities.max()) / self._temperature)
        best = int(np.argmax(similarities))
        return Classification(mode=self._modes[best],
                              confidence=float(weights[best] / weights.sum()))
