"""A leaderboard of search pipelines on one labelled set: places, bootstrap intervals, which gaps are real.

Taught in 31_challenge; ``./run.sh grade --hidden`` ranks a class's pipelines with the same code.
Entries are ordered by mean Recall@k, then MRR; entries equal on both share a place. Each one
carries its mean's bootstrap interval and the paired randomisation test against the entry
below it (``labkit.evaluation.significance``), so a reader sees at once which steps of the
ladder are more than noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from labkit.evaluation.retrieval import EvalReport, evaluate
from labkit.evaluation.significance import bootstrap_ci, paired_test, per_query_scores

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.core.corpus import LabelledQuery
    from labkit.retrieval.fusion import SearchMode

__all__ = ["Scores", "Standing", "scores_of", "score_pipeline", "leaderboard"]


class Scores(NamedTuple):
    """One pipeline's per-query Recall@k and reciprocal rank on a labelled set, in query order."""

    recall: tuple[float, ...]
    mrr: tuple[float, ...]


class Standing(NamedTuple):
    """One entry of a leaderboard."""

    name: str
    place: int  # 1 = best; entries equal in mean Recall@k and MRR share a place
    recall: float  # mean Recall@k
    low: float  # its bootstrap interval
    high: float
    mrr: float
    p_next: float | None  # paired test of Recall@k against the entry below; None for the last


def scores_of(report: EvalReport, mode: str) -> Scores:
    """The per-query scores of `mode` in an evaluation report."""
    return Scores(tuple(map(float, per_query_scores(report, mode, "recall"))),
                  tuple(map(float, per_query_scores(report, mode, "mrr"))))


def score_pipeline(lab: Lab, pipeline: SearchMode, queries: Sequence[LabelledQuery], top_k: int = 3) -> Scores:
    """Per-query Recall@`top_k` and reciprocal rank of `pipeline` on `queries`. Taught in 31_challenge."""
    return scores_of(evaluate(lab, queries, {"pipeline": pipeline}, top_k=top_k), "pipeline")


def leaderboard(scores: Mapping[str, Scores], confidence: float = 0.95) -> list[Standing]:
    """The entries of `scores` best first, with places, intervals and the p-value against the next one.

    Taught in 31_challenge. Every entry must be scored on the same queries in the same order.
    """
    if not scores:
        return []
    sizes = {len(s.recall) for s in scores.values()} | {len(s.mrr) for s in scores.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"every entry needs scores on the same non-empty set of queries, got sizes {sorted(sizes)}")
    means = {name: (float(np.mean(s.recall)), float(np.mean(s.mrr))) for name, s in scores.items()}
    order = sorted(scores, key=lambda name: (-means[name][0], -means[name][1], name))
    standings: list[Standing] = []
    for index, name in enumerate(order):
        tied = index > 0 and np.allclose(means[name], means[order[index - 1]], atol=1e-12)
        place = standings[-1].place if tied else index + 1
        interval = bootstrap_ci(scores[name].recall, confidence)
        below = order[index + 1] if index + 1 < len(order) else None
        p_next = paired_test(scores[name].recall, scores[below].recall) if below is not None else None
        standings.append(Standing(name, place, interval.mean, interval.low, interval.high, means[name][1], p_next))
    return standings
