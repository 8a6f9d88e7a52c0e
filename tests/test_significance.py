"""Bootstrap intervals and the paired randomisation test, by hand and on an evaluation report."""

from __future__ import annotations

import numpy as np
import pytest

import labkit as lk
import labkit.evaluation.significance
from labkit.evaluation import significance
from labkit.evaluation.retrieval import EvalReport, QueryResult


def test_exact_sign_flip_p_values_by_hand():
    # three queries, all +1: of the 8 sign patterns only all-plus and all-minus reach |mean| = 1
    assert lk.paired_test([1, 1, 1], [0, 0, 0]) == pytest.approx(2 / 8)
    assert lk.paired_test([0.5, 0.5], [0.5, 0.5]) == 1.0  # no difference at all
    # one big win among ties is never "real" on a handful of queries
    assert lk.paired_test([1, 0, 0, 0], [0, 0, 0, 0]) == 1.0


def test_monte_carlo_beyond_the_exact_limit_agrees_with_enumeration():
    rng = np.random.default_rng(1)
    a, b = rng.random(significance.EXACT_UP_TO), rng.random(significance.EXACT_UP_TO)
    exact = lk.paired_test(a, b)
    longer = lk.paired_test(np.tile(a, 2), np.tile(b, 2))  # 32 queries: sampled
    assert 0 <= exact <= 1 and 0 < longer <= 1
    assert lk.paired_test(np.ones(40), np.zeros(40)) < 0.001


@pytest.mark.parametrize(("a", "b"), [([1], [0, 0, 0]), ([1, 0], [0, 0, 0]), ([], []), ([[1, 0]], [[0, 1]])])
def test_paired_test_refuses_unpaired_scores(a, b):
    with pytest.raises(ValueError, match="equally long"):
        lk.paired_test(a, b)


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_more_queries():
    few = lk.bootstrap_ci([0, 1] * 6)
    many = lk.bootstrap_ci([0, 1] * 60)
    assert few.low <= few.mean == 0.5 <= few.high
    assert (many.high - many.low) < (few.high - few.low)
    assert lk.bootstrap_ci([1, 1, 1]) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        lk.bootstrap_ci([])


def test_compare_modes_reads_per_query_scores_from_a_report():
    queries = tuple(
        QueryResult(f"q{i}", (1,), {"a": [1], "b": [2]},
                    {"a": {"recall": 1.0, "mrr": 1.0, "ndcg": 1.0}, "b": {"recall": 0.0, "mrr": 0.5, "ndcg": 0.6}})
        for i in range(8)
    )
    report = EvalReport(top_k=3, modes=("a", "b"), queries=queries)
    assert list(lk.per_query_scores(report, "b", "mrr")) == [0.5] * 8
    table = lk.compare_modes(report)
    row = table.iloc[0]
    assert (row.mode_a, row.mode_b, row.difference) == ("a", "b", 1.0)
    assert row.p_value == pytest.approx(2 / 2**8) and bool(row.real)
