"""The synthetic sets of 12_scale: deterministic, labelled, and the realistic one shaped like real e5 vectors."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from labkit.evaluation import synthetic as syn
from labkit.evaluation.realvectors import real_vectors
from labkit.evaluation.vectorshape import measure_structure
from labkit.models.embedding import model_family

MEASURES = ("twonn", "pca90", "d1", "d10", "d100", "mean", "contrast")


def test_realistic_is_deterministic_unit_and_float32():
    a, ta, qa = syn.make_realistic(900, 20, seed=3)
    b, tb, qb = syn.make_realistic(900, 20, seed=3)
    assert np.array_equal(a, b) and ta == tb and np.array_equal(qa, qb)
    assert a.dtype == qa.dtype == np.float32 and a.shape == (900, 384) and qa.shape == (20, 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.allclose(np.linalg.norm(qa, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(a, syn.make_realistic(900, 20, seed=4)[0])


def test_realistic_queries_are_not_rows_and_topics_have_a_rare_one():
    rows, topics, queries = syn.make_realistic(5000, 30)
    nearest = 1 - (queries @ rows.T).max(axis=1)
    assert nearest.min() > 1e-4  # no query is a row
    shares = Counter(topics)
    assert set(shares) == set(syn.TOPICS) and 0.003 < shares[syn.RARE_TOPIC] / len(topics) < 0.02


def test_a_document_s_chunks_lie_nearer_each_other_than_other_documents():
    shape = dataclasses.replace(syn.REALISTIC, versions=0.0)
    rows, _, _ = syn.make_realistic(shape.doc_size * 40, shape=shape)
    documents = np.arange(len(rows)) // shape.doc_size
    similarity = rows @ rows.T
    same = documents[:, None] == documents[None, :]
    np.fill_diagonal(same, False)
    assert similarity[same].mean() > similarity[~same].mean() + 0.05


def test_the_two_sets_differ_in_structure_the_way_their_labels_say():
    noisy, realistic = (measure_structure(syn.synthetic_set(name).make(433, 0, 0)[0]) for name in ("noisy", "realistic"))
    assert noisy.twonn > 4 * realistic.twonn  # noise in all 384 dimensions vs a low-dimensional subspace
    assert noisy.mean > 0.9 > 0.3 > realistic.mean  # nearly orthogonal vs e5's narrow cone
    assert realistic.contrast > 2 * noisy.contrast


def test_sets_are_named_and_titled():
    assert set(syn.SYNTHETIC) == {"noisy", "realistic"}
    assert all(d.label and d.title and d.name == name for name, d in syn.SYNTHETIC.items())
    with pytest.raises(ValueError, match="noisy, realistic"):
        syn.synthetic_set("uniform")


def test_compare_structure_makes_each_set_as_large_as_the_real_one():
    real, _, queries = syn.make_realistic(300, 20, seed=9)
    measured = syn.compare_structure(real, queries)
    assert list(measured) == ["real", "noisy", "realistic"]
    assert all({"twonn", "query_d1", "query_contrast"} <= set(m) for m in measured.values())
    # the same generator with another seed lies nearer than the noisy set does
    assert syn.misfit(measured["realistic"], measured["real"]) < 0.5 * syn.misfit(measured["noisy"], measured["real"])


def test_bad_shapes_and_sizes_are_refused():
    with pytest.raises(ValueError, match="subspace"):
        syn.Shape(subspace=400)
    with pytest.raises(ValueError, match="versions"):
        syn.Shape(versions=1.0)
    with pytest.raises(ValueError, match="negative"):
        syn.Shape(noise=-0.1)
    with pytest.raises(ValueError, match="n >= 1"):
        syn.make_realistic(0)


def test_fit_moves_towards_the_shape_that_made_the_target():
    truth = dataclasses.replace(syn.REALISTIC, subspace=40, noise=0.4, query_shift=0.5)
    rows, _, queries = syn.make_realistic(300, 40, truth, seed=1)
    documents = [row // truth.doc_size for row in range(len(rows))]
    start = dataclasses.replace(truth, noise=1.2, step=0.4, query_shift=1.5)
    _, before = syn.fit_realistic(rows, queries, documents, trials=0, start=start)
    fitted, after = syn.fit_realistic(rows, queries, documents, trials=40, start=start)
    assert after < 0.7 * before
    assert abs(np.log(fitted.noise / truth.noise)) < abs(np.log(start.noise / truth.noise))


@pytest.mark.services
def test_the_realistic_set_measures_like_the_lab_s_real_vectors(lab):
    real = real_vectors(lab, documents=16)  # the knowledge base's first documents (12_scale's CI size), news, queries
    assert real.chunks > 50 and len(real.rows) == real.chunks + 30 and len(real.queries) > 20
    assert real.rows.shape[1] == real.queries.shape[1]
    measured = syn.compare_structure(real.rows, real.queries)
    assert measured["real"]["twonn"] < measured["noisy"]["twonn"] / 2  # text vectors: a low intrinsic dimension
    if model_family(lab.embed_model) == "e5":  # REALISTIC was fitted to e5; another embedder has its own shape
        realistic, noisy = (syn.misfit(measured[name], measured["real"]) for name in ("realistic", "noisy"))
        assert realistic < 0.3 * noisy, (realistic, noisy)
