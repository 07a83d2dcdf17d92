"""BM25 scores are bit-identical across processes, whatever the string hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import hashlib
    from contextwright.retrieval.lexical import Bm25Index

    words = [f"w{n}" for n in range(60)]
    index = Bm25Index()
    for row in range(300):
        index.add([words[(row * 7 + k * 13) % 60] for k in range(row % 23 + 3)])
    query = words[:40]
    digest = hashlib.sha256(index.scores(query).tobytes() + index.coverage(query).tobytes())
    print(digest.hexdigest())
    """
)


def scores_digest(hash_seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, check=True)
    return done.stdout.strip()


def test_scores_do_not_depend_on_the_hash_seed() -> None:
    digests = {scores_digest(seed) for seed in (0, 1, 2, 3, 4, 5)}
    assert len(digests) == 1
