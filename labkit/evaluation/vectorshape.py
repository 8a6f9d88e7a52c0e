"""The shape of a set of vectors: intrinsic dimension and how far the neighbours lie (taught in 12_scale).

A graph index such as HNSW is fast and exact when the data lives on few dimensions and a point's
nearest neighbours are much closer than the rest of the set; noise spread over all 384 dimensions
is the opposite. Two measures of the first, and a profile of the second:

* ``twonn_dimension``: TwoNN (Facco et al., 2017) — from the ratio of each point's 2nd to 1st
  neighbour distance alone, the dimension of the surface the points lie on;
* ``pca_dimension``: how many principal components hold 90 % of the variance (a linear measure:
  a curved surface needs more components than its dimension);
* ``neighbour_profile``: the median cosine distance to the 1st, 10th and 100th neighbour, and the
  relative contrast (He, Kumar, Chang, 2012): the mean distance to the whole set over the
  distance to the nearest neighbour. Near 1, "nearest" means little and any index struggles.

Distances are cosine, as in the lab's indexes (``vector_cosine_ops``); vectors are normalised
first. Neighbour distances depend on how many points there are, so two sets are compared at
the same number of rows (``measure_structure(..., rows=n)``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "PROFILE_KS",
    "Structure",
    "unit_rows",
    "neighbour_distances",
    "twonn_dimension",
    "pca_dimension",
    "neighbour_profile",
    "document_distances",
    "measure_structure",
    "QUERY_KS",
    "measures",
]

PROFILE_KS = (1, 10, 100)  # which neighbours the profile reports
QUERY_KS = (1, 10)  # ... and for queries, whose 10 nearest rows are what a search returns
_BLOCK = 1024  # rows of the distance matrix computed at once
_SAME = 1e-12  # cosine distance below which two vectors count as the same point


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """The rows scaled to unit length (float64: close neighbours' distances need the precision); a zero row is an error."""
    array = np.asarray(vectors, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"need a 2-d array of vectors, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if not np.all(norms > 0):
        raise ValueError(f"{int(np.sum(norms == 0))} zero vector(s): cosine distance is undefined for them")
    return array / norms


def _blocks(n: int) -> Iterator[slice]:
    for start in range(0, n, _BLOCK):
        yield slice(start, min(start + _BLOCK, n))


def neighbour_distances(vectors: np.ndarray, k: int, queries: np.ndarray | None = None) -> np.ndarray:
    """Cosine distances from each row (or each of `queries`) to its `k` nearest rows, ascending: shape (probes, k).

    Without `queries` the rows are the probes, and a row is never its own neighbour.
    """
    unit = unit_rows(vectors)
    probes = unit if queries is None else unit_rows(queries)
    if not 1 <= k <= len(unit) - (queries is None):
        raise ValueError(f"k must lie in [1, {len(unit) - (queries is None)}] for {len(unit)} vectors, got {k}")
    result = np.empty((len(probes), k))
    for block in _blocks(len(probes)):
        distances = 1.0 - probes[block] @ unit.T
        if queries is None:
            distances[np.arange(block.stop - block.start), np.arange(block.start, block.stop)] = np.inf
        nearest = np.partition(distances, k - 1, axis=1)[:, :k]
        result[block] = np.sort(np.maximum(nearest, 0.0), axis=1)
    return result


def twonn_dimension(vectors: np.ndarray) -> float:
    """Intrinsic dimension by TwoNN (Facco et al., 2017). Taught in 12_scale.

    For points spread over a d-dimensional surface the ratio mu = r2 / r1 of the Euclidean distances
    to the 2nd and 1st neighbour follows F(mu) = 1 - mu^(-d), whatever the density, so the median
    ratio is 2^(1/d): d = ln 2 / ln(median mu). The median, not a fit over all ratios, because a point
    with a near-duplicate (a chunk repeated in another version of its document) has a huge ratio: a
    few of them move the median little. Exact duplicates are measured once.
    """
    distinct = np.unique(unit_rows(vectors), axis=0)
    if len(distinct) < 3:
        raise ValueError("fewer than 3 distinct points: no dimension to measure")
    cosine = neighbour_distances(distinct, 2)
    r1, r2 = np.sqrt(2.0 * cosine[:, 0]), np.sqrt(2.0 * cosine[:, 1])  # Euclidean, for unit vectors
    keep = r1 > np.sqrt(2.0 * _SAME)  # equal up to rounding
    median = float(np.median(r2[keep] / r1[keep]))
    return float(np.log(2.0) / np.log(median)) if median > 1.0 else float("inf")


def pca_dimension(vectors: np.ndarray, share: float = 0.9) -> int:
    """How many principal components of the (normalised, centred) rows hold `share` of the variance. Taught in 12_scale."""
    if not 0 < share <= 1:
        raise ValueError(f"share must lie in (0, 1], got {share}")
    unit = unit_rows(vectors)
    centred = unit - unit.mean(axis=0)
    variance = np.linalg.svd(centred, compute_uv=False) ** 2
    cumulative = np.cumsum(variance) / variance.sum()
    return int(np.searchsorted(cumulative, share - 1e-12) + 1)


def neighbour_profile(vectors: np.ndarray, ks: Sequence[int] = PROFILE_KS,
                      queries: np.ndarray | None = None) -> dict[str, float]:
    """Median cosine distance to the k-th nearest row for each k (``d1``, ``d10``...), the mean distance
    to the rows (``mean``) and the relative contrast (``contrast``: mean distance over the mean distance
    to the 1st neighbour). The probes are the rows themselves, or `queries`. Taught in 12_scale."""
    unit = unit_rows(vectors)
    probes = unit if queries is None else unit_rows(queries)
    nearest = neighbour_distances(unit, max(ks), None if queries is None else probes)
    total = sum(float((1.0 - probes[block] @ unit.T).sum()) for block in _blocks(len(probes)))
    pairs = len(probes) * (len(unit) - 1) if queries is None else len(probes) * len(unit)  # self-distances are 0
    profile = {f"d{k}": float(np.median(nearest[:, k - 1])) for k in ks}
    profile["mean"] = total / pairs
    profile["contrast"] = profile["mean"] / max(float(np.mean(nearest[:, 0])), _SAME)
    return profile


def document_distances(vectors: np.ndarray, documents: Sequence[int]) -> dict[str, float]:
    """Median cosine distance between consecutive rows of one document (``adjacent``) and between any
    two rows of one document (``within``); rows of a document are consecutive. Taught in 12_scale."""
    unit = unit_rows(vectors)
    labels = np.asarray(documents)
    if len(labels) != len(unit):
        raise ValueError(f"{len(unit)} vectors but {len(labels)} document labels")
    consecutive = np.flatnonzero(labels[1:] == labels[:-1])
    if not len(consecutive):
        raise ValueError("no document has two rows: nothing to measure")
    adjacent = 1.0 - np.einsum("ij,ij->i", unit[consecutive], unit[consecutive + 1])
    within = [1.0 - unit[rows] @ unit[rows].T for rows in (np.flatnonzero(labels == doc) for doc in np.unique(labels))]
    pairs = np.concatenate([d[np.triu_indices(len(d), 1)] for d in within])
    return {"adjacent": float(np.median(adjacent)), "within": float(np.median(pairs))}


@dataclass(frozen=True)
class Structure:
    """The measured shape of one set of vectors (see the module's docstring)."""

    rows: int
    twonn: float  # intrinsic dimension, TwoNN
    pca90: int  # principal components for 90 % of the variance
    d1: float  # median cosine distance to the 1st neighbour
    d10: float
    d100: float
    mean: float  # mean cosine distance between two rows
    contrast: float  # relative contrast: mean / mean distance to the 1st neighbour


def measure_structure(vectors: np.ndarray, rows: int | None = None, seed: int = 0) -> Structure:
    """Every measure of one set, on a seeded sample of `rows` rows (default: all). Taught in 12_scale."""
    unit = unit_rows(vectors)
    if rows is not None and rows < len(unit):
        if rows <= max(PROFILE_KS):
            raise ValueError(f"rows must exceed {max(PROFILE_KS)} to find the {max(PROFILE_KS)}th neighbour, got {rows}")
        unit = unit[np.sort(np.random.default_rng(seed).choice(len(unit), size=rows, replace=False))]
    if len(unit) <= max(PROFILE_KS):
        raise ValueError(f"need more than {max(PROFILE_KS)} vectors, got {len(unit)}")
    profile = neighbour_profile(unit)
    return Structure(len(unit), twonn_dimension(unit), pca_dimension(unit), profile["d1"], profile["d10"],
                     profile["d100"], profile["mean"], profile["contrast"])


def measures(rows: np.ndarray, queries: np.ndarray | None = None,
             documents: Sequence[int] | None = None) -> dict[str, float]:
    """Every measure as one flat mapping: the rows' Structure (without ``rows``), with `queries` their profile
    against the rows (``query_d1``, ``query_d10``, ``query_mean``, ``query_contrast``), with `documents`
    the distances within documents (``adjacent``, ``within``). Taught in 12_scale."""
    found = {k: float(v) for k, v in asdict(measure_structure(rows)).items() if k != "rows"}
    if queries is not None:
        found.update({f"query_{k}": v for k, v in neighbour_profile(rows, QUERY_KS, queries).items()})
    if documents is not None:
        found.update(document_distances(rows, documents))
    return found
