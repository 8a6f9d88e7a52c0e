"""What a judge re-ranker reads and how well it tells the answer from the rest (taught in 17_kb_rerank).

A re-ranker can only help if its scores put the chunks of relevant documents above the others.
``judged_pairs`` lists, for labelled queries, the first `depth` chunks of a first-stage search with
the judge's P(yes) for each (from the cache or the shipped scores when present, so a re-run asks the
model nothing) and whether the chunk's document is one of the query's relevant documents.
``separation`` is the share of (relevant, other) pairs of one query that the judge orders rightly,
pooled over the queries: the area under the ROC curve of the scores within a query, 0.5 for a coin.
A chunk of a relevant document need not hold the answer: a judge that rightly refuses it is counted wrong, so the
measure is strict with a good judge (a coin still gets 0.5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from labkit.core.corpus import LabelledQuery
from labkit.retrieval.documents import CHUNK_DEPTH, parents
from labkit.retrieval.rerankers.judge import judge_scores

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.retrieval.fusion import SearchMode

__all__ = ["judged_pairs", "separation"]


def judged_pairs(lab: Lab, queries: Sequence[LabelledQuery], search: SearchMode, depth: int,
                 model: str | None = None) -> pd.DataFrame:
    """One row per (query, chunk of the head): rank, chunk, document, relevant, p_yes. Taught in 17_kb_rerank.

    The head is the first `depth` hits of `search` as ``document_hits`` fetches them (``CHUNK_DEPTH`` deep), so
    it is the head a judged mode re-ranks. Scores not cached or shipped cost a model call each.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    rows = []
    for labelled in queries:
        head = [hit.doc_id for hit in search(lab, labelled.query, max(CHUNK_DEPTH, depth))[:depth]]
        scores = judge_scores(lab, labelled.query, head, model)
        parent = parents(lab, head)
        rows += [{"query": labelled.query, "rank": rank, "chunk": chunk, "document": parent.get(chunk, chunk),
                  "relevant": parent.get(chunk, chunk) in labelled.relevant, "p_yes": scores[chunk]}
                 for rank, chunk in enumerate(head, start=1)]
    return pd.DataFrame(rows, columns=["query", "rank", "chunk", "document", "relevant", "p_yes"])


def separation(pairs: pd.DataFrame) -> tuple[float, int]:
    """The share of (relevant, other) chunk pairs of the same query that the judge scored in the right order
    (ties count half), and how many such pairs there were. 0.5 is a coin; 1.0 puts every relevant chunk first."""
    right, total = 0.0, 0
    for _, group in pairs.groupby("query"):
        relevant = group.loc[group["relevant"], "p_yes"].tolist()
        other = group.loc[~group["relevant"], "p_yes"].tolist()
        for a in relevant:
            for b in other:
                right += 1.0 if a > b else 0.5 if a == b else 0.0
        total += len(relevant) * len(other)
    return (right / total if total else float("nan")), total
