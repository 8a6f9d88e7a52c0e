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

And the question a hidden test set raises (31_challenge, ``./run.sh grade --hidden``): how many
queries does a ranking need to be more than noise? Only queries where two modes differ move the
test; with ``d`` of them the smallest possible p is ``2 / 2**d`` (``min_discordant``).
``queries_needed`` answers with the same two tools: draw ``n`` queries with replacement from the
observed per-query pairs (the bootstrap), run the paired test on each draw, and find the smallest
``n`` at which the test calls the gap real in a given share of the draws (its power).
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from labkit.evaluation.metrics import Metric
from labkit.evaluation.retrieval import EvalReport

__all__ = ["Interval", "bootstrap_ci", "paired_test", "per_query_scores", "compare_modes", "EXACT_UP_TO",
           "QueriesNeeded", "min_discordant", "detection_power", "queries_needed"]

EXACT_UP_TO = 16  # 2**16 sign patterns: enumerate them all up to this many queries
RESAMPLES = 10_000
SIMULATIONS = 400  # bootstrap draws per tried number of queries in queries_needed
MAX_QUERIES = 2_000  # queries_needed gives up beyond this many


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


@functools.lru_cache(maxsize=EXACT_UP_TO + 1)
def _sign_patterns(size: int) -> np.ndarray:
    """Every pattern of +1/-1 over `size` queries, one a row (2**size rows), computed once per size."""
    bits = (np.arange(2**size)[:, None] >> np.arange(size)) & 1
    patterns = 1.0 - 2.0 * bits
    patterns.setflags(write=False)
    return patterns


def paired_test(a: ArrayLike, b: ArrayLike, resamples: int = RESAMPLES, seed: int = 0) -> float:
    """Two-sided p-value of a paired sign-flip randomisation test of mean(a) = mean(b). Taught in 13_significance."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise ValueError(f"need two equally long, non-empty lists of per-query scores, got {first.shape} and {second.shape}")
    diff = first - second
    observed = abs(diff.mean())
    if diff.size <= EXACT_UP_TO:
        flipped = np.abs((_sign_patterns(diff.size) * diff).mean(axis=1))
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


def min_discordant(alpha: float = 0.05) -> int:
    """The fewest queries two modes must differ on before the paired test can reach p < `alpha`. Taught in 31_challenge.

    With ``d`` differing queries all in one direction the exact test gives its smallest p, ``2 / 2**d``
    (13_significance): at alpha 0.05 that takes six.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return next(d for d in itertools.count(1) if 2 / 2**d < alpha)


def _draws(diff: np.ndarray, queries: int, simulations: int, seed: int) -> list[np.ndarray]:
    """`simulations` bootstrap sets of `queries` per-query differences, each kept as its non-zero entries."""
    rng = np.random.default_rng(seed)
    picks = diff[rng.integers(0, diff.size, size=(simulations, queries))]
    return [row[row != 0] for row in picks]


def _p_of_differences(nonzero: np.ndarray, resamples: int, seed: int) -> float:
    """The paired test's p on these differences; queries where both modes score alike never change it."""
    if nonzero.size == 0:
        return 1.0
    return paired_test(nonzero, np.zeros_like(nonzero), resamples=resamples, seed=seed)


def detection_power(a: ArrayLike, b: ArrayLike, queries: int, alpha: float = 0.05, simulations: int = SIMULATIONS,
               seed: int = 0) -> float:
    """The share of bootstrap sets of `queries` queries on which the paired test finds p < `alpha`. Taught in 31_challenge.

    The sets are drawn with replacement from the pairs (a[i], b[i]) observed on one labelled set:
    how often a hidden set of that size, made of queries like these, would tell the two modes apart.
    """
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise ValueError(f"need two equally long, non-empty lists of per-query scores, got {first.shape} and {second.shape}")
    if queries < 1 or simulations < 1:
        raise ValueError(f"need queries >= 1 and simulations >= 1, got {queries} and {simulations}")
    draws = _draws(first - second, queries, simulations, seed)
    return float(np.mean([_p_of_differences(d, 2_000, seed + i) < alpha for i, d in enumerate(draws)]))


class QueriesNeeded(NamedTuple):
    """How many queries a paired test needs to tell two modes apart (``queries_needed``)."""

    queries: int | None  # the smallest number reaching the power; None when the gap is zero or past max_queries
    power: float  # the simulated power at `queries` (at max_queries when none reached it)
    discordant: int  # queries of the observed set on which the two modes differ
    observed: int  # queries in the observed set
    min_discordant: int  # differing queries the test needs at the least (``min_discordant``)

    @property
    def share(self) -> float:
        """The share of queries on which the two modes differ."""
        return self.discordant / self.observed


def queries_needed(a: ArrayLike, b: ArrayLike, alpha: float = 0.05, power: float = 0.8,
                   simulations: int = SIMULATIONS, max_queries: int = MAX_QUERIES, seed: int = 0) -> QueriesNeeded:
    """The smallest number of queries like these on which the paired test calls the gap real with `power`. Taught in 31_challenge.

    `a` and `b` are two modes' per-query scores on one labelled set. For a number of queries ``n``,
    ``detection_power`` draws ``n`` pairs with replacement `simulations` times and runs the paired test
    on each; the answer is the smallest ``n`` (doubling, then bisection) whose share of p < `alpha`
    reaches `power`. None when the two modes never differ, their mean gap is zero, or more than
    `max_queries` would be needed.
    """
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise ValueError(f"need two equally long, non-empty lists of per-query scores, got {first.shape} and {second.shape}")
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    diff = first - second
    floor = min_discordant(alpha)
    discordant = int(np.count_nonzero(diff))

    def result(queries: int | None, reached: float) -> QueriesNeeded:
        return QueriesNeeded(queries, reached, discordant, int(diff.size), floor)

    if discordant == 0 or abs(diff.mean()) < 1e-12:
        return result(None, 0.0)

    def strong(queries: int) -> float:
        return detection_power(first, second, queries, alpha, simulations, seed)

    low, high = floor - 1, floor  # low: known too few (a test on fewer than `floor` queries never reaches alpha)
    reached = strong(high)
    while reached < power:
        if high >= max_queries:
            return result(None, reached)
        low, high = high, min(2 * high, max_queries)
        reached = strong(high)
    while high - low > 1:
        middle = (low + high) // 2
        middle_power = strong(middle)
        if middle_power >= power:
            high, reached = middle, middle_power
        else:
            low = middle
    return result(high, reached)
