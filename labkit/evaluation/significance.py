"""Which gaps between search modes are real: bootstrap intervals and a paired randomisation test.

Taught in 13_significance. On a dozen labelled queries one query moves a mean Recall@3
by a twelfth, so a gap between two modes may be noise. Two classic tools, written
plainly (numpy only):

* ``bootstrap_ci``: resample the queries with replacement many times; the middle 95 %
  of the resampled means is a 95 % interval for the mean.
* ``paired_test``: under "the two modes are equally good" each query's difference is as
  likely positive as negative, so flip the signs at random and count how often the
  mean difference is at least as large as the one observed (two-sided p-value). With
  at most ``EXACT_UP_TO`` queries every sign pattern is enumerated: the p-value is exact.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from labkit.evaluation.metrics import Metric
from labkit.evaluation.retrieval import EvalReport

__all__ = ["Interval", "bootstrap_ci", "paired_test", "per_query_scores", "compare_modes", "EXACT_UP_TO"]

EXACT_UP_TO = 16  # 2**16 sign patterns: enumerate them all up to this many queries
RESAMPLES = 10_000


class Interval(NamedTuple):
    """A mean with its bootstrap confidence interval."""

    mean: float
    low: float
    high: float


def per_query_scores(report: EvalReport, mode: str, metric: Metric = "recall") -> np.ndarray:
    """`metric` of `mode` for every query of the report, in query order. Taught in 13_significance."""
    return np.array([q.scores[mode][metric] for q in report.queries], dtype=float)


def bootstrap_ci(
    scores: ArrayLike, confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = 0
) -> Interval:
    """The mean of `scores` and a percentile bootstrap interval over queries. Taught in 13_significance."""
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        raise ValueError("need at least one score")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(values.mean()), float(low), float(high))


def paired_test(a: ArrayLike, b: ArrayLike, resamples: int = RESAMPLES, seed: int = 0) -> float:
    """Two-sided p-value of a paired sign-flip randomisation test of mean(a) = mean(b). Taught in 13_significance."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise ValueError(f"need two equally long, non-empty lists of per-query scores, got {first.shape} and {second.shape}")
    diff = first - second
    observed = abs(diff.mean())
    if diff.size <= EXACT_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=diff.size)))
        flipped = np.abs((signs * diff).mean(axis=1))
        return float(np.mean(flipped >= observed - 1e-12))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(resamples, diff.size))
    flipped = np.abs((signs * diff).mean(axis=1))
    return float((np.sum(flipped >= observed - 1e-12) + 1) / (resamples + 1))


def compare_modes(report: EvalReport, metric: Metric = "recall", alpha: float = 0.05) -> pd.DataFrame:
    """Every pair of modes: mean difference, its bootstrap interval, p-value and whether it is real at `alpha`."""
    rows = []
    for first, second in itertools.combinations(report.modes, 2):
        a, b = per_query_scores(report, first, metric), per_query_scores(report, second, metric)
        interval = bootstrap_ci(a - b)
        p = paired_test(a, b)
        rows.append({"mode_a": first, "mode_b": second, "difference": interval.mean, "low": interval.low,
                     "high": interval.high, "p_value": p, "real": p < alpha})
    return pd.DataFrame(rows)
