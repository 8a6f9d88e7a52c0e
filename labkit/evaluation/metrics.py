"""Ranking metrics for labelled queries: Recall@k, reciprocal rank, nDCG@k (taught in 05_evaluation).

Written plainly on purpose: they are the lesson. Relevance is binary (a document
is relevant to a query or not); ``ranked_ids`` is a ranking, best first; ``top_k``
is the cut-off k of "@k". ``mean_metric`` is the one place that averages a metric
over labelled queries: evaluation, fusion tuning and the exercise checkers call it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence
from typing import Literal, Protocol

__all__ = ["METRICS", "Metric", "recall_at_k", "reciprocal_rank", "ndcg_at_k", "metric_value", "mean_metric"]

Metric = Literal["recall", "mrr", "ndcg"]
METRICS: tuple[Metric, ...] = ("recall", "mrr", "ndcg")


class Labelled(Protocol):
    """Anything with the set of relevant ids of one query (e.g. ``LabelledQuery``)."""

    @property
    def relevant(self) -> Collection[int]: ...


def recall_at_k(ranked_ids: Sequence[int], relevant: Collection[int], top_k: int) -> float:
    """Relevant documents in the top k divided by min(k, |relevant|). Taught in 05_evaluation.

    The denominator is capped at k (as in the course's source article), so a query with five
    relevant documents can still reach 1.0 at k=3.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    relevant = set(relevant)
    if not relevant:
        raise ValueError("a labelled query needs at least one relevant document")
    found = len(set(ranked_ids[:top_k]) & relevant)
    return found / min(top_k, len(relevant))


def reciprocal_rank(ranked_ids: Sequence[int], relevant: Collection[int]) -> float:
    """1 / position of the first relevant document, 0.0 if none is ranked. Taught in 05_evaluation."""
    relevant = set(relevant)
    for position, doc_id in enumerate(ranked_ids, start=1):
        if doc_id in relevant:
            return 1.0 / position
    return 0.0


def ndcg_at_k(ranked_ids: Sequence[int], relevant: Collection[int], top_k: int) -> float:
    """DCG of the top k divided by the best possible DCG (binary relevance). Taught in 05_evaluation."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    relevant = set(relevant)
    if not relevant:
        raise ValueError("a labelled query needs at least one relevant document")
    dcg = sum(
        1.0 / math.log2(position + 1)
        for position, doc_id in enumerate(ranked_ids[:top_k], start=1)
        if doc_id in relevant
    )
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(top_k, len(relevant)) + 1))
    return dcg / ideal


def metric_value(metric: Metric, ranked_ids: Sequence[int], relevant: Collection[int], top_k: int) -> float:
    """One metric of one ranking by name: "recall" (@top_k), "mrr" (whole ranking) or "ndcg" (@top_k)."""
    if metric == "recall":
        return recall_at_k(ranked_ids, relevant, top_k)
    if metric == "mrr":
        return reciprocal_rank(ranked_ids, relevant)
    if metric == "ndcg":
        return ndcg_at_k(ranked_ids, relevant, top_k)
    raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")


def mean_metric(
    metric: Metric, rankings: Sequence[Sequence[int]], queries: Sequence[Labelled], top_k: int
) -> float:
    """Mean of `metric` over labelled queries; ``rankings[i]`` is the ranking of ``queries[i]``. Taught in 05_evaluation."""
    if not queries:
        raise ValueError("need at least one labelled query")
    if len(rankings) != len(queries):
        raise ValueError(f"{len(rankings)} rankings for {len(queries)} queries")
    return statistics.fmean(metric_value(metric, r, q.relevant, top_k) for r, q in zip(rankings, queries))
