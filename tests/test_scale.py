"""HNSW vs exact scan and iterative scans on a small deterministic synthetic set (real Postgres)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labkit.cli import main as cli_main
from labkit.evaluation import scale

SIZE = 3000  # 1 % rare topic = ~30 rows: well above LIMIT 10, far below what ef_search=40 can surface
QUERIES = 20


@pytest.fixture(scope="module")
def loaded(settings):
    from labkit.store.connection import connect

    vectors, topics = scale.make_vectors(SIZE, seed=7)
    with connect(settings) as conn:
        scale.load_vectors(conn, vectors, topics)
        scale.build_hnsw(conn, m=16, ef_construction=64, maintenance_work_mem="256MB")
        yield conn, vectors, topics, scale.make_queries(QUERIES, seed=7)


def test_data_is_deterministic():
    a, ta = scale.make_vectors(500, seed=3)
    b, tb = scale.make_vectors(500, seed=3)
    assert np.array_equal(a, b) and ta == tb
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(a, scale.make_vectors(500, seed=4)[0])


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


@pytest.mark.services
def test_bench_prints_json(settings, capsys):
    assert cli_main(["bench", "--size", "1000", "--queries", "5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [p["ef_search"] for p in result["ef_search"]] == list(scale.EF_SEARCH_VALUES)
    assert result["filtered"]["rows_with_relaxed_order"] == 10
    assert "sql_over_python" in result["hybrid_latency"], result["hybrid_latency"]


def test_bench_refuses_bad_size():
    with pytest.raises(SystemExit):
        cli_main(["bench", "--size", "5"])
