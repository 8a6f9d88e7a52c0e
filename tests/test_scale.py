"""HNSW vs exact scan, its parameters and iterative scans on small deterministic sets (real Postgres)."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.cli import main as cli_main
from labkit.evaluation import scale, synthetic

SIZE = 3000  # 1 % rare topic = ~30 rows: well above LIMIT 10, far below what ef_search=40 can surface
QUERIES = 20


@pytest.fixture(scope="module")
def loaded(settings):
    from labkit.store.connection import connect

    vectors, topics = synthetic.make_vectors(SIZE, seed=7)
    with connect(settings) as conn:
        scale.load_vectors(conn, vectors, topics)
        scale.build_hnsw(conn, m=16, ef_construction=64, maintenance_work_mem="256MB")
        yield conn, vectors, topics, synthetic.make_queries(QUERIES, seed=7)


def test_data_is_deterministic():
    a, ta = synthetic.make_vectors(500, seed=3)
    b, tb = synthetic.make_vectors(500, seed=3)
    assert np.array_equal(a, b) and ta == tb
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(a, synthetic.make_vectors(500, seed=4)[0])


def _point(ef: int, recall: float, hnsw_ms: float, exact_ms: float = 100.0) -> scale.SweepPoint:
    return scale.SweepPoint(ef, recall, hnsw_ms, exact_ms)


def test_choose_setting_takes_the_fastest_that_reaches_both_targets():
    small = scale.BuildResult(8, 32, 1.0, [_point(40, 0.95, 2.0), _point(200, 0.985, 5.0)])
    large = scale.BuildResult(32, 128, 4.0, [_point(40, 0.992, 4.0), _point(80, 0.999, 8.0), _point(400, 1.0, 20.0)])
    chosen = scale.choose_setting([small, large], 0.99, 10)
    assert chosen is not None and chosen.meets
    assert (chosen.build.m, chosen.point.ef_search) == (32, 40)  # 25x beats 12.5x; ef 400 is only 5x
    short = scale.choose_setting([small], 0.99, 10)
    assert short is not None and not short.meets and short.point.ef_search == 200  # best recall at >= 10x
    assert scale.choose_setting([small], 0.99, 100) is None  # nothing that fast


@pytest.mark.services
def test_exact_scan_equals_numpy_brute_force(loaded):
    conn, vectors, _, queries = loaded
    for query in queries[:5]:
        found, ms = scale.exact_search(conn, query, 10)
        expected = (np.argsort(-(vectors @ query), kind="stable")[:10] + 1).tolist()
        assert set(found) == set(expected)
        assert ms > 0


@pytest.mark.services
def test_recall_grows_with_ef_search(loaded):
    conn, _, _, queries = loaded
    points = scale.sweep_ef_search(conn, queries, ef_values=(10, 400))
    low, high = points
    assert high.recall >= low.recall
    assert high.recall >= 0.95


@pytest.mark.services
def test_searches_are_planned_under_their_own_settings(loaded):
    """Many exact scans first (psycopg prepares a statement run five times), then the index must still be used:
    ef_search = 1 hands over a single row, which only the index does."""
    conn, _, _, queries = loaded
    for query in queries:
        scale.exact_search(conn, query, 10)
    assert [len(scale.hnsw_search(conn, query, 10, ef_search=1)[0]) for query in queries[:3]] == [1, 1, 1]
    assert len(scale.exact_search(conn, queries[0], 10)[0]) == 10


@pytest.mark.services
def test_sweep_builds_rebuilds_for_each_setting(loaded):
    conn, _, _, queries = loaded
    results = scale.sweep_builds(conn, queries[:5], [(4, 8), (16, 64)], (10, 80), maintenance_work_mem="256MB")
    assert [(b.m, b.ef_construction) for b in results] == [(4, 8), (16, 64)]
    assert all(b.build_s > 0 and [p.ef_search for p in b.points] == [10, 80] for b in results)
    index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'scale_vectors_hnsw'").fetchone()[0]
    assert "m='16'" in index.replace(" ", "") and "ef_construction='64'" in index.replace(" ", "")


@pytest.mark.services
def test_a_halfvec_graph_is_half_the_size_finds_the_float32_neighbours_and_replaces_the_other_index(loaded):
    conn, _, _, queries = loaded
    try:
        (half,) = scale.sweep_builds(conn, queries[:5], [(16, 64)], (10, 400), maintenance_work_mem="256MB",
                                     storage="halfvec")
        assert half.storage == "halfvec" and half.points[-1].recall >= 0.95  # against the exact float32 scan
        assert scale.hnsw_bytes(conn, "vector") == 0  # one index at a time: the float32 one was dropped
        with pytest.raises(ValueError, match="no vector HNSW index"):  # not a silent full scan at exact speed
            scale.sweep_ef_search(conn, queries[:2], (10,))
        with conn.transaction():
            conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN SELECT id FROM scale_vectors ORDER BY embedding::halfvec(384) <=> %s::halfvec(384) LIMIT 10",
                (queries[0],)))
        assert "scale_vectors_hnsw_half" in plan
        assert [len(scale.hnsw_search(conn, q, 10, ef_search=1, storage="halfvec")[0]) for q in queries[:2]] == [1, 1]
        (full,) = scale.sweep_builds(conn, queries[:5], [(16, 64)], (400,), maintenance_work_mem="256MB")
        assert 0 < half.index_bytes < 0.8 * full.index_bytes and scale.hnsw_bytes(conn, "halfvec") == 0
    finally:  # the module's float32 index, for the tests after this one
        scale.build_hnsw(conn, m=16, ef_construction=64, maintenance_work_mem="256MB")


@pytest.mark.services
def test_filtered_query_loses_rows_without_iterative_scan(loaded):
    conn, _, topics, queries = loaded
    rare = {i + 1 for i, t in enumerate(topics) if t == scale.RARE_TOPIC}
    assert len(rare) > 10
    for query in queries[:5]:
        plain = scale.filtered_search(conn, query, top_k=10)
        relaxed = scale.filtered_search(conn, query, top_k=10, iterative=True)
        assert len(plain) < 10
        assert len(relaxed) == 10
        assert set(plain) | set(relaxed) <= rare


@pytest.mark.services
def test_hnsw_plan_uses_the_index(loaded):
    conn, _, _, queries = loaded
    with conn.transaction():
        conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT id FROM scale_vectors ORDER BY embedding <=> %s LIMIT 10", (queries[0],)))
    assert "scale_vectors_hnsw" in plan


@pytest.mark.parametrize("argv", [["--size", "5"], ["--data", "uniform"], ["--builds", "16:8"], ["--builds", "16"],
                                  ["--kb-documents", "-1"], ["--kb-documents", "1"],
                                  ["--storage", "float8"], ["--storage", ""]])
def test_bench_refuses_bad_arguments(argv):
    with pytest.raises(SystemExit):
        cli_main(["bench", *argv])
