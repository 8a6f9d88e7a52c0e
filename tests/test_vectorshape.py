"""Measures of a vector set's shape on sets whose answer is known by construction (no services)."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.evaluation import vectorshape as vs


def _sphere(n: int, dimension: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    """n points spread evenly over a `dimension`-dimensional sphere lying inside `dim` dimensions."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, dimension + 1)))
    return rng.standard_normal((n, dimension + 1)) @ basis.T


@pytest.mark.parametrize("dimension", [1, 2, 5, 10])
def test_twonn_finds_the_dimension_of_a_sphere(dimension):
    measured = vs.twonn_dimension(_sphere(2000, dimension))
    assert abs(measured - dimension) <= 0.15 * dimension + 0.1, measured


def test_twonn_tells_low_from_high_dimension():
    low = vs.twonn_dimension(_sphere(2000, 5))
    high = vs.twonn_dimension(np.random.default_rng(1).standard_normal((2000, 384)))
    assert high > 8 * low  # noise in every dimension: far more than any surface of dimension 5


def test_twonn_counts_duplicates_once_and_a_few_near_duplicates_move_it_little():
    points = _sphere(2000, 3)
    alone = vs.twonn_dimension(points)
    assert vs.twonn_dimension(np.vstack([points, points[:500]])) == pytest.approx(alone, rel=1e-6)  # exact copies
    copies = points[:100] + 1e-4 * np.random.default_rng(7).standard_normal((100, 384))  # other versions, nearly equal
    assert vs.twonn_dimension(np.vstack([points, copies])) == pytest.approx(alone, rel=0.2)


def test_pca_dimension_counts_the_components_of_a_subspace():
    rng = np.random.default_rng(2)
    basis, _ = np.linalg.qr(rng.standard_normal((384, 8)))
    scales = np.array([8, 6, 4, 3, 2, 1, 0.5, 0.25])
    # around a far centre, so normalising the rows bends the subspace very little
    points = 100 * basis[:, 0] + (rng.standard_normal((3000, 8)) * scales) @ basis.T
    variance = scales[1:] ** 2  # the centre's own direction is flattened by normalising
    expected = int(np.searchsorted(np.cumsum(variance) / variance.sum(), 0.9) + 1)
    assert vs.pca_dimension(points) == expected
    assert vs.pca_dimension(points, share=1.0) >= 7


def test_neighbour_distances_match_a_brute_force_sort():
    points = np.random.default_rng(3).standard_normal((300, 20))
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    distances = 1 - unit @ unit.T
    np.fill_diagonal(distances, np.inf)
    expected = np.sort(distances, axis=1)[:, :10]
    assert np.allclose(vs.neighbour_distances(points, 10), expected, atol=1e-9)
    queries = np.random.default_rng(4).standard_normal((5, 20))
    unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    assert np.allclose(vs.neighbour_distances(points, 3, queries), np.sort(1 - unit_q @ unit.T, axis=1)[:, :3])


def test_profile_of_tight_clusters_has_high_contrast():
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((20, 384))
    tight = centres[rng.integers(0, 20, 1000)] + 0.05 * rng.standard_normal((1000, 384)) / np.sqrt(384) * 20
    loose = rng.standard_normal((1000, 384))
    a, b = vs.neighbour_profile(tight), vs.neighbour_profile(loose)
    assert a["d1"] < a["d10"] < a["d100"] <= 1.5
    assert a["contrast"] > 5 > 1.3 > b["contrast"] > 1.0
    assert b["mean"] == pytest.approx(1.0, abs=0.01)  # random directions in 384 dimensions: nearly orthogonal


def test_document_distances():
    rng = np.random.default_rng(6)
    base = rng.standard_normal((4, 50))
    rows = np.repeat(base, 3, axis=0) + 0.01 * rng.standard_normal((12, 50))
    measured = vs.document_distances(rows, [d for d in range(4) for _ in range(3)])
    assert 0 < measured["adjacent"] < 1e-3 and 0 < measured["within"] < 1e-3
    with pytest.raises(ValueError, match="document labels"):
        vs.document_distances(rows, [0, 1])


def test_measure_structure_on_a_sample_and_bad_input():
    points = _sphere(500, 4)
    whole, part = vs.measure_structure(points), vs.measure_structure(points, rows=200)
    assert whole.rows == 500 and part.rows == 200
    assert part.d1 > whole.d1  # fewer points: the nearest one lies farther
    with pytest.raises(ValueError, match="more than 100"):
        vs.measure_structure(points[:50])
    with pytest.raises(ValueError, match="zero vector"):
        vs.measure_structure(np.vstack([points, np.zeros((1, 384))]))
