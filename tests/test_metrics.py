"""Recall@k, reciprocal rank and nDCG@k against hand-computed values and against ranx."""

from __future__ import annotations

import math

import pytest

from labkit.core.corpus import LabelledQuery
from labkit.evaluation.metrics import mean_metric, ndcg_at_k, recall_at_k, reciprocal_rank


def test_recall_caps_the_denominator_at_k():
    assert recall_at_k([1, 9, 2, 5], {1, 2, 5}, 3) == pytest.approx(2 / 3)
    assert recall_at_k([9, 8, 7], {1}, 3) == 0.0
    assert recall_at_k([9, 1], {1}, 3) == 1.0  # one relevant document, found: 1/min(3, 1)
    assert recall_at_k([1, 2, 3], {1, 2, 3, 4, 5}, 3) == 1.0  # 3/min(3, 5)
    assert recall_at_k([], {1}, 3) == 0.0


def test_reciprocal_rank_is_one_over_first_hit():
    assert reciprocal_rank([4, 1, 2], {1, 2}) == 0.5
    assert reciprocal_rank([1], {1}) == 1.0
    assert reciprocal_rank([7, 8, 9, 3], {3}) == 0.25
    assert reciprocal_rank([7, 8], {3}) == 0.0


def test_ndcg_binary_by_hand():
    # hits at positions 1 and 3 of 3, two relevant documents:
    dcg = 1 / math.log2(2) + 1 / math.log2(4)
    ideal = 1 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at_k([1, 9, 2], {1, 2}, 3) == pytest.approx(dcg / ideal)
    assert ndcg_at_k([1, 2, 9], {1, 2}, 3) == pytest.approx(1.0)
    assert ndcg_at_k([9, 8, 1], {1}, 2) == 0.0
    assert ndcg_at_k([9, 1], {1}, 3) == pytest.approx(1 / math.log2(3))


@pytest.mark.parametrize("bad_k", [0, -1])
def test_top_k_must_be_positive(bad_k):
    with pytest.raises(ValueError):
        recall_at_k([1], {1}, bad_k)
    with pytest.raises(ValueError):
        ndcg_at_k([1], {1}, bad_k)


def test_empty_relevant_set_is_an_error():
    with pytest.raises(ValueError):
        recall_at_k([1], set(), 3)


def test_mean_metric_is_the_mean_of_the_per_query_values():
    queries = [LabelledQuery("a", frozenset({1, 2})), LabelledQuery("b", frozenset({7}))]
    rankings = [[1, 9, 2], [9, 8, 7]]
    assert mean_metric("recall", rankings, queries, 3) == pytest.approx((1.0 + 1.0) / 2)
    assert mean_metric("recall", rankings, queries, 1) == pytest.approx((1.0 + 0.0) / 2)
    assert mean_metric("mrr", rankings, queries, 3) == pytest.approx((1.0 + 1 / 3) / 2)
    assert mean_metric("ndcg", rankings, queries, 3) == pytest.approx(
        (ndcg_at_k([1, 9, 2], {1, 2}, 3) + ndcg_at_k([9, 8, 7], {7}, 3)) / 2
    )
    with pytest.raises(ValueError, match="2 rankings for 1 queries"):
        mean_metric("recall", rankings, queries[:1], 3)
    with pytest.raises(ValueError, match="metric must be one of"):
        mean_metric("precision", rankings, queries, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        mean_metric("recall", [], [], 3)
