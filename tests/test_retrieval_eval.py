"""nDCG of the retrieval step: the metric, and the lexical ranking on the HotpotQA BEIR pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextwright.errors import InvalidInputError
from contextwright.evaluate.metrics import ndcg_at_k as ndcg
from contextwright.retrieval.evaluate import beir_ndcg

BEIR_POOL = Path(__file__).parents[2] / "shared" / "data" / "hotpotqa-dev" / "beir_pool"


def test_ndcg_is_one_for_the_ideal_order_and_discounts_later_hits() -> None:
    assert ndcg(["a", "b", "x"], {"a": 1, "b": 1}, 10) == 1.0
    assert ndcg(["x", "a"], {"a": 1}, 10) == pytest.approx(1 / 1.5849625, rel=1e-6)
    assert ndcg(["x"], {"a": 1}, 10) == 0.0


def test_ndcg_counts_a_repeated_document_once_at_its_first_rank() -> None:
    # Chunks of one document repeat its id: the repeat neither scores again nor takes a rank.
    assert ndcg(["a", "a", "a"], {"a": 1}, 10) == 1.0
    assert ndcg(["a", "a", "b"], {"a": 1, "b": 1}, 2) == 1.0  # k counts distinct documents
    assert ndcg(["x", "a", "x", "a"], {"a": 1}, 10) == pytest.approx(1 / 1.5849625, rel=1e-6)
    assert ndcg(["a", "a"], {"a": 2, "b": 1}, 10) == pytest.approx(2 / (2 + 1 / 1.5849625))


def test_beir_ndcg_on_a_tiny_folder(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    corpus = [{"_id": "d1", "title": "Kansas", "text": "The University of Kansas is in Lawrence."},
              {"_id": "d2", "title": "Apple", "text": "The Apple Remote controls Front Row."}]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus))
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "Apple Remote"}))
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\td2\t1\n")
    assert beir_ndcg(tmp_path) == 1.0
    with pytest.raises(InvalidInputError):
        beir_ndcg(tmp_path, mode="hybrid")


@pytest.mark.data
@pytest.mark.skipif(not BEIR_POOL.is_dir(), reason="needs ../shared/data")
def test_lexical_ndcg_on_hotpotqa_matches_the_research_note() -> None:
    # docs/research/retrieval-candidates.md measured 0.902 with the same tokenizer and BM25.
    assert beir_ndcg(BEIR_POOL) >= 0.89


LOCOMO = BEIR_POOL.parents[1] / "locomo-dev"


@pytest.mark.data
@pytest.mark.skipif(not LOCOMO.is_dir(), reason="needs ../shared/data")
def test_lexical_turn_recall_on_locomo_matches_the_research_note() -> None:
    # The research note measured nDCG@10 0.371 / R@10 0.510 for BM25 with this tokenizer.
    from contextwright.retrieval.evaluate import locomo_recall_quality

    quality = locomo_recall_quality(LOCOMO)
    assert quality.questions == 383
    assert quality.ndcg >= 0.36 and quality.recall >= 0.49
    assert quality.evidence_kept >= 0.9  # the default threshold rarely drops found evidence
