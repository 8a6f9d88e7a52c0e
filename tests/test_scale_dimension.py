"""12_scale's index path at another embedder's dimension (the foreign stack's 896-d), on real Postgres.

The foreign stack does not execute 12_scale (tests/test_foreign_stack.py says why); what the lesson does with
its real vectors there (a table of the vectors' own dimension, HNSW builds swept over ef_search, a filtered
search, the shape measures) runs here on vectors of that dimension.
"""

from __future__ import annotations

import pytest

from labkit.evaluation import scale, synthetic

pytestmark = pytest.mark.services

DIM = 896  # qwen2.5-coder-embed:0.5b, the foreign stack's embedder


def test_the_lesson_s_index_path_runs_at_another_dimension(settings):
    from labkit.store.connection import connect

    vectors, topics = synthetic.make_vectors(1500, dim=DIM, seed=11)
    queries = synthetic.make_queries(8, dim=DIM, seed=11)
    with connect(settings) as conn:
        scale.load_vectors(conn, vectors, topics)
        declared = conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                                "WHERE attrelid = 'scale_vectors'::regclass AND attname = 'embedding'").fetchone()[0]
        assert declared == f"vector({DIM})"
        (build,) = scale.sweep_builds(conn, queries, [(8, 32)], (10, 200), maintenance_work_mem="256MB")
        low, high = build.points
        assert 0 <= low.recall <= high.recall <= 1 and high.recall >= 0.9
        rare = {i + 1 for i, topic in enumerate(topics) if topic == scale.RARE_TOPIC}
        assert set(scale.filtered_search(conn, queries[0], top_k=5, iterative=True)) <= rare

    shape = synthetic.compare_structure(vectors[:150], queries)
    assert set(shape) == {"real", *synthetic.SYNTHETIC}
    assert 1 < shape["real"]["twonn"] < DIM and shape["real"]["query_d1"] > 0
