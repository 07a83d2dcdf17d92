"""Postings loaded packed read like plain postings, and rank the same."""

from __future__ import annotations

from array import array
from collections import defaultdict

from contextwright.recall.bm25 import PackedPostings, TurnPostings


def _packed(postings: dict[str, list[int]]) -> tuple[list[str], array[int], array[int]]:
    terms, offsets, codes = [], array("i", [0]), array("i")
    for term, codes_of in postings.items():
        terms.append(term)
        codes.extend(codes_of)
        offsets.append(len(codes))
    return terms, offsets, codes


def test_a_packed_term_reads_like_a_held_one_and_is_cut_out_once() -> None:
    packed = PackedPostings()
    packed.add_block(*_packed({"tea": [8, 17, 40], "oslo": [9], "jazz": [33, 41]}))
    assert len(packed) == 3 and "tea" in packed and "pasta" not in packed
    assert dict.__len__(packed) == 0, "nothing cut out yet"
    assert list(packed.get("oslo")) == [9] and packed.get("pasta") is None
    assert packed.get("pasta", ()) == () and "pasta" not in packed, "get adds no term"
    assert packed["oslo"] is packed.get("oslo"), "cut out once, then held"
    packed["tea"].append(51)
    assert list(packed["tea"]) == [8, 17, 40, 51]
    packed["pasta"].append(56)  # a new term, as a defaultdict makes it
    assert len(packed) == 4 and dict.__len__(packed) == 3
    assert sorted(packed) == ["jazz", "oslo", "pasta", "tea"]
    assert {t: list(c) for t, c in packed.items()} == {
        "tea": [8, 17, 40, 51], "oslo": [9], "jazz": [33, 41], "pasta": [56]}


def test_a_later_block_extends_the_terms_held_and_packs_the_new_ones() -> None:
    packed = PackedPostings()
    packed.add_block(*_packed({"tea": [8], "oslo": [9]}))
    packed["oslo"]  # one held, one still packed
    packed.add_block(*_packed({"tea": [24], "oslo": [25], "jazz": [26]}))
    assert dict.__len__(packed) == 2, "the terms met again were cut out and extended"
    assert {t: list(c) for t, c in packed.items()} == {
        "tea": [8, 24], "oslo": [9, 25], "jazz": [26]}


def test_rankings_over_packed_postings_are_those_over_plain_ones() -> None:
    turns = [{"tea": 2, "oslo": 1}, {"jazz": 1}, {"tea": 1, "jazz": 3}, {"oslo": 9},
             {"tea": 1}, {"pasta": 1, "tea": 1}]
    plain = TurnPostings()
    plain.add_all(turns)
    loaded = TurnPostings(big_counts=dict(plain.big_counts), lengths=array("i", plain.lengths),
                          total_length=plain.total_length)
    loaded.postings = PackedPostings()
    loaded.postings.add_block(*_packed({t: list(c) for t, c in plain.postings.items()}))
    loaded.add({"tea": 1, "figs": 2})
    plain.add({"tea": 1, "figs": 2})
    for query in (["tea"], ["oslo", "jazz"], ["figs", "tea"], ["pasta"], ["nothing"]):
        assert loaded.top(query, limit=4, min_score=0.0, k1=1.2, b=0.75) == plain.top(
            query, limit=4, min_score=0.0, k1=1.2, b=0.75), query
    assert isinstance(loaded.postings, defaultdict) and loaded.postings == plain.postings
