"""Ranking metrics for labelled queries: Recall@k, reciprocal rank, nDCG@k (taught in 05_evaluation).

Written plainly on purpose: they are the lesson. Relevance is binary (a document
is relevant to a query or not); ``ranked_ids`` is a ranking, best first.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

__all__ = ["recall_at_k", "reciprocal_rank", "ndcg_at_k"]


def recall_at_k(ranked_ids: Sequence[int], relevant: Collection[int], k: int) -> float:
    """Relevant documents in the top k divided by min(k, |relevant|). Taught in 05_evaluation.

    The denominator is capped at k (as in the seed article), so a query with five
    relevant documents can still reach 1.0 at k=3.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    relevant = set(relevant)
    if not relevant:
        raise ValueError("a labelled query needs at least one relevant document")
    found = len(set(ranked_ids[:k]) & relevant)
    return found / min(k, len(relevant))


def reciprocal_rank(ranked_ids: Sequence[int], relevant: Collection[int]) -> float:
    """1 / position of the first relevant document, 0.0 if none is ranked. Taught in 05_evaluation."""
    relevant = set(relevant)
    for position, doc_id in enumerate(ranked_ids, start=1):
        if doc_id in relevant:
            return 1.0 / position
    return 0.0


def ndcg_at_k(ranked_ids: Sequence[int], relevant: Collection[int], k: int) -> float:
    """DCG of the top k divided by the best possible DCG (binary relevance). Taught in 05_evaluation."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    relevant = set(relevant)
    if not relevant:
        raise ValueError("a labelled query needs at least one relevant document")
    dcg = sum(
        1.0 / math.log2(position + 1)
        for position, doc_id in enumerate(ranked_ids[:k], start=1)
        if doc_id in relevant
    )
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(k, len(relevant)) + 1))
    return dcg / ideal
