"""Coverage re-ranking (taught in 11_beyond_rrf): the head of a ranking sorted by the query words each fielded text holds."""

from __future__ import annotations

import pytest

import labkit as lk


@pytest.mark.services
def test_the_gloss_and_an_inflection_count_as_cover(lab_ro):
    """«медали» in the sport gloss stems to «меда», «медаль» to «медал»: one word, so the gold-medal news cover both."""
    found = lk.covered_lexemes(lab_ro, "золотая медаль", [6, 28, 1])
    assert found == {6: ["золот", "медал"], 28: ["медал"], 1: ["золот"]}
    assert lk.covered_lexemes(lab_ro, "", [6]) == {6: []} and lk.covered_lexemes(lab_ro, "золото", []) == {}


@pytest.mark.services
def test_only_the_head_is_reordered_and_ties_keep_their_order(lab_ro):
    hits = lk.SEARCH_MODES["fielded"](lab_ro, "золотая медаль", 8)
    reranked = lk.rerank_by_coverage(lab_ro, "золотая медаль", hits, depth=4)
    head = [h.doc_id for h in hits[:4]]
    assert sorted(lk.ids(reranked[:4])) == sorted(head) and lk.ids(reranked[4:]) == lk.ids(hits[4:])
    scores = [h.score for h in reranked[:4]]
    assert scores == sorted(scores, reverse=True) and all(h.score == 0.0 for h in reranked[4:])
    two = [d for d in head if lk.covered_lexemes(lab_ro, "золотая медаль", [d])[d] == ["золот", "медал"]]
    assert lk.ids(reranked[: len(two)]) == two  # the stable sort keeps the ranking's order among equals
    assert lk.ids(lk.rerank_by_coverage(lab_ro, "золотая медаль", hits, depth=1)) == lk.ids(hits)
    with pytest.raises(ValueError, match="depth"):
        lk.rerank_by_coverage(lab_ro, "золото", hits, depth=0)
    with pytest.raises(ValueError, match="depth"):
        lk.covered(lk.search_fielded, 0)


@pytest.mark.services
def test_the_shipped_head_size_is_the_tune_splits_choice(lab_ro):
    tune = lk.load_queries(lk.RETRIEVAL_PATH, split="tune")
    fixed = [q._replace(query=lk.correct_query(lab_ro, q.query).corrected) for q in tune]
    results = lk.pick_coverage_depth(lab_ro, lk.search_fielded, fixed)
    assert [r.depth for r in results][0] == lk.COVERAGE_DEPTH
    assert sorted(r.depth for r in results) == sorted(lk.COVERAGE_DEPTHS)
    with pytest.raises(ValueError, match="at least one"):
        lk.pick_coverage_depth(lab_ro, lk.search_fielded, [])


@pytest.mark.services
def test_coverage_keeps_the_tune_recall_of_the_picked_mode(lab_ro):
    """On tune the re-ranking ties with fielded_corrected on Recall@3; its MRR is what it pays (11_beyond_rrf)."""
    tune = lk.load_queries(lk.RETRIEVAL_PATH, split="tune")
    report = lk.evaluate(lab_ro, tune, ["fielded_corrected", "fielded_covered"])
    assert report.means["fielded_covered"]["recall"] >= report.means["fielded_corrected"]["recall"]
