"""Coverage re-ranking (taught in 11_beyond_rrf): the head of a ranking sorted by the query words each fielded text holds."""

from __future__ import annotations

import pytest

import labkit as lk


@pytest.mark.services
def test_the_rubric_and_an_inflection_count_as_cover(lab_ro):
    """«спортивные» is covered by the sport rubric «спорт»; «медали» stems to «меда», the body's «медаль» to «медал»: one word."""
    found = lk.covered_lexemes(lab_ro, "спортивные медали и золото", [6, 28, 1, 12])
    assert found == {6: ["золот", "спортивн"], 28: ["меда", "спортивн"], 1: ["золот"], 12: ["спортивн"]}
    assert lk.covered_lexemes(lab_ro, "", [6]) == {6: []} and lk.covered_lexemes(lab_ro, "золото", []) == {}


@pytest.mark.services
def test_only_the_head_is_reordered_and_ties_keep_their_order(lab_ro):
    query = "спортивные медали и золото"
    hits = lk.SEARCH_MODES["fielded"](lab_ro, query, 8)
    reranked = lk.rerank_by_coverage(lab_ro, query, hits, depth=4)
    head = [h.doc_id for h in hits[:4]]
    assert sorted(lk.ids(reranked[:4])) == sorted(head) and lk.ids(reranked[4:]) == lk.ids(hits[4:])
    scores = [h.score for h in reranked[:4]]
    assert scores == sorted(scores, reverse=True) and all(h.score == 0.0 for h in reranked[4:])
    cover = lk.covered_lexemes(lab_ro, query, head)
    most = [d for d in head if len(cover[d]) == max(len(words) for words in cover.values())]
    assert lk.ids(reranked[: len(most)]) == most  # the stable sort keeps the ranking's order among equals
    assert lk.ids(lk.rerank_by_coverage(lab_ro, query, hits, depth=1)) == lk.ids(hits)
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
def test_the_tuning_rule_keeps_the_mode_without_coverage(lab_ro):
    """On tune the re-ranking does not beat fielded_corrected (Recall@3, then MRR): it stays a mode of its own (11_beyond_rrf)."""
    tune = lk.load_queries(lk.RETRIEVAL_PATH, split="tune")
    means = lk.evaluate(lab_ro, tune, ["fielded_corrected", "fielded_covered"]).means
    picked, covered = ((means[m]["recall"], means[m]["mrr"]) for m in ("fielded_corrected", "fielded_covered"))
    assert picked >= covered
