"""pgvector at scale: synthetic clustered vectors, exact scan vs HNSW, filtered search (taught in 12_scale).

Everything is deterministic for a given (size, dim, seed): numpy's seeded generator
makes the vectors, their ``topic`` and the query vectors. Vectors live in their own
table ``scale_vectors`` (never the lab corpus' tables), loaded with binary COPY.
Settings that change plans (``enable_seqscan``, ``hnsw.ef_search``,
``hnsw.iterative_scan``, ``maintenance_work_mem``) are set with
``set_config(..., true)``, i.e. ``SET LOCAL``: they end with the transaction.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = [
    "SCALE_TABLE",
    "EF_SEARCH_VALUES",
    "RARE_TOPIC",
    "make_vectors",
    "make_queries",
    "load_vectors",
    "exact_search",
    "build_hnsw",
    "hnsw_search",
    "SweepPoint",
    "sweep_ef_search",
    "filtered_search",
    "plot_tradeoff",
    "BUILD_SETTINGS",
    "run_bench",
]

SCALE_TABLE = "scale_vectors"
EF_SEARCH_VALUES = (10, 20, 40, 80, 200, 400)
RARE_TOPIC = "rare"  # 1 % of the rows: a selective filter
TOPICS = ("rare", "common_a", "common_b", "common_c")
TOPIC_SHARES = (0.01, 0.33, 0.33, 0.33)
_TABLE = sql.Identifier(SCALE_TABLE)


def _clustered(rng: np.random.Generator, n: int, centers: np.ndarray, spread: float) -> np.ndarray:
    """n unit vectors scattered around randomly chosen cluster centers."""
    picks = rng.integers(0, len(centers), size=n)
    noise = rng.standard_normal((n, centers.shape[1]), dtype=np.float32) * (spread / np.sqrt(centers.shape[1]))
    points = centers[picks] + noise
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def _centers(seed: int, dim: int, clusters: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim), dtype=np.float32)
    return centers / np.linalg.norm(centers, axis=1, keepdims=True)


def make_vectors(
    n: int, dim: int = 384, clusters: int = 100, spread: float = 2.5, seed: int = 0
) -> tuple[np.ndarray, list[str]]:
    """`n` clustered unit vectors (float32, shape (n, dim)) and a topic per row. Taught in 12_scale."""
    if n < 1 or dim < 1:
        raise ValueError(f"need n >= 1 and dim >= 1, got n={n}, dim={dim}")
    rng = np.random.default_rng([seed, 1])
    vectors = _clustered(rng, n, _centers(seed, dim, clusters), spread)
    topics = rng.choice(len(TOPICS), size=n, p=TOPIC_SHARES)
    return vectors, [TOPICS[t] for t in topics]


def make_queries(
    count: int, dim: int = 384, clusters: int = 100, spread: float = 2.5, seed: int = 0
) -> np.ndarray:
    """`count` query vectors from the same clusters, never rows of the table. Taught in 12_scale."""
    return _clustered(np.random.default_rng([seed, 2]), count, _centers(seed, dim, clusters), spread)


def load_vectors(conn: psycopg.Connection[Any], vectors: np.ndarray, topics: Sequence[str]) -> float:
    """(Re)create ``scale_vectors`` and fill it with binary COPY; return seconds taken. Taught in 12_scale."""
    if len(vectors) != len(topics):
        raise ValueError(f"{len(vectors)} vectors but {len(topics)} topics")
    start = time.perf_counter()
    with conn.transaction():
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(_TABLE))
        conn.execute(
            sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, topic text NOT NULL, embedding vector({}) NOT NULL)").format(
                _TABLE, sql.Literal(vectors.shape[1])
            )
        )
        with conn.cursor() as cur:
            with cur.copy(sql.SQL("COPY {} (id, topic, embedding) FROM STDIN WITH (FORMAT BINARY)").format(_TABLE)) as copy:
                copy.set_types(["int4", "text", "vector"])
                for row_id, (vector, topic) in enumerate(zip(vectors, topics), start=1):
                    copy.write_row((row_id, topic, vector))
    conn.execute(sql.SQL("ANALYZE {}").format(_TABLE))
    return time.perf_counter() - start


def _set_local(conn: psycopg.Connection[Any], **settings: str) -> None:
    """SET LOCAL each setting (dots written as __) for the current transaction."""
    for name, value in settings.items():
        conn.execute("SELECT set_config(%s, %s, true)", (name.replace("__", "."), str(value)))


_KNN = sql.SQL("SELECT id FROM {} ORDER BY embedding <=> %(q)s LIMIT %(limit)s").format(_TABLE)


def _timed_ids(conn: psycopg.Connection[Any], statement: sql.Composed, params: dict[str, Any]) -> tuple[list[int], float]:
    start = time.perf_counter()
    rows = conn.execute(statement, params).fetchall()
    return [row[0] for row in rows], (time.perf_counter() - start) * 1000.0


def exact_search(conn: psycopg.Connection[Any], query: np.ndarray, top_k: int = 10) -> tuple[list[int], float]:
    """Exact top-k by cosine distance (index scans disabled) and its milliseconds. Taught in 12_scale."""
    with conn.transaction():
        _set_local(conn, enable_indexscan="off")
        return _timed_ids(conn, _KNN, {"q": query, "limit": top_k})


def hnsw_search(
    conn: psycopg.Connection[Any], query: np.ndarray, top_k: int = 10, ef_search: int = 40
) -> tuple[list[int], float]:
    """Approximate top-k through the HNSW index at a given ef_search, and its milliseconds. Taught in 12_scale."""
    with conn.transaction():
        _set_local(conn, enable_seqscan="off", hnsw__ef_search=str(ef_search))
        return _timed_ids(conn, _KNN, {"q": query, "limit": top_k})


def build_hnsw(
    conn: psycopg.Connection[Any], m: int = 16, ef_construction: int = 64, maintenance_work_mem: str = "1GB"
) -> float:
    """(Re)build the HNSW cosine index with (m, ef_construction); return build seconds. Taught in 12_scale.

    ``maintenance_work_mem`` is raised for this transaction only: a graph that fits in
    it is built in memory, otherwise pgvector warns and builds much more slowly.
    """
    index = sql.Identifier(f"{SCALE_TABLE}_hnsw")
    with conn.transaction():
        _set_local(conn, maintenance_work_mem=maintenance_work_mem)
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(index))
        start = time.perf_counter()
        conn.execute(
            sql.SQL(
                "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = {}, ef_construction = {})"
            ).format(index, _TABLE, sql.Literal(int(m)), sql.Literal(int(ef_construction)))
        )
        return time.perf_counter() - start


class SweepPoint(NamedTuple):
    """Mean recall@k and median latency of HNSW at one ef_search, with the exact scan's latency."""

    ef_search: int
    recall: float
    hnsw_ms: float
    exact_ms: float

    @property
    def speedup(self) -> float:
        """How many times faster than the exact scan."""
        return self.exact_ms / self.hnsw_ms


def sweep_ef_search(
    conn: psycopg.Connection[Any],
    queries: np.ndarray,
    ef_values: Sequence[int] = EF_SEARCH_VALUES,
    top_k: int = 10,
) -> list[SweepPoint]:
    """Recall@k of HNSW against the exact scan, and both latencies, for each ef_search. Taught in 12_scale."""
    truth, exact_ms = [], []
    for query in queries:
        found, ms = exact_search(conn, query, top_k)
        truth.append(set(found))
        exact_ms.append(ms)
    exact = statistics.median(exact_ms)
    for query in queries:  # warm-up: the index pages all queries touch into shared buffers
        hnsw_search(conn, query, top_k, max(ef_values))
    points = []
    for ef in ef_values:
        recalls, latencies = [], []
        for query, expected in zip(queries, truth):
            found, ms = hnsw_search(conn, query, top_k, ef)
            recalls.append(len(expected & set(found)) / len(expected))
            latencies.append(ms)
        points.append(SweepPoint(ef, statistics.fmean(recalls), statistics.median(latencies), exact))
    return points


_FILTERED = sql.SQL(
    """
    WITH candidates AS MATERIALIZED (
        SELECT id, embedding <=> %(q)s AS distance FROM {}
        WHERE topic = %(topic)s
        ORDER BY embedding <=> %(q)s
        LIMIT %(limit)s
    )
    SELECT id FROM candidates ORDER BY distance, id
    """
).format(_TABLE)


def filtered_search(
    conn: psycopg.Connection[Any],
    query: np.ndarray,
    topic: str = RARE_TOPIC,
    top_k: int = 10,
    iterative: bool = False,
    ef_search: int = 40,
) -> list[int]:
    """HNSW top-k with ``WHERE topic = ...``; `iterative` turns on relaxed_order iterative scans. Taught in 12_scale.

    The index hands over ef_search candidates and the filter runs after it: without
    iterative scans a 1 % topic leaves about ef_search / 100 rows. relaxed_order lets
    the scan continue until LIMIT rows pass (results re-sorted by the outer query).
    """
    with conn.transaction():
        _set_local(
            conn,
            enable_seqscan="off",
            hnsw__ef_search=str(ef_search),
            hnsw__iterative_scan="relaxed_order" if iterative else "off",
        )
        return [row[0] for row in conn.execute(_FILTERED, {"q": query, "topic": topic, "limit": top_k}).fetchall()]


def plot_tradeoff(points: Sequence[SweepPoint], ax: Any = None) -> Any:
    """Recall@k against HNSW milliseconds, one labelled dot per ef_search. Taught in 12_scale."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p.hnsw_ms for p in points], [p.recall for p in points], marker="o")
    for p in points:
        ax.annotate(f"ef={p.ef_search}", (p.hnsw_ms, p.recall), textcoords="offset points", xytext=(4, -10))
    if points:
        ax.axvline(points[0].exact_ms, linestyle="--", color="grey", label="exact scan")
    ax.set_xscale("log")
    ax.set_xlabel("ms per query (median)")
    ax.set_ylabel("recall@10")
    ax.legend()
    return ax


BUILD_SETTINGS = ((8, 32), (16, 64))  # (m, ef_construction) the bench builds; the last one stays for the sweep


def run_bench(lab: Lab, size: int, queries: int = 50, seed: int = 0, top_k: int = 10) -> dict[str, Any]:
    """Every measurement of ``./run.sh bench`` on the lab's database, as plain data. Taught in 12_scale.

    Ratios measured in one run, not absolute goals: HNSW builds, an ef_search sweep against
    the exact scan, rows a selective filter returns with and without iterative scans, and
    the single-SQL hybrid against the Python hybrid on the lab corpus.
    """
    from labkit.core.corpus import read_queries
    from labkit.evaluation.retrieval import compare_hybrid_latency

    conn = lab.conn
    vectors, topics = make_vectors(size, seed=seed)
    probes = make_queries(queries, seed=seed)
    result: dict[str, Any] = {"size": size, "dim": int(vectors.shape[1]), "queries": queries, "k": top_k}
    result["load_s"] = load_vectors(conn, vectors, topics)
    result["build_s"] = {f"m={m},ef_construction={ef}": build_hnsw(conn, m, ef) for m, ef in BUILD_SETTINGS}
    result["ef_search"] = [
        {"ef_search": p.ef_search, "recall": p.recall, "hnsw_ms": p.hnsw_ms, "exact_ms": p.exact_ms, "speedup": p.speedup}
        for p in sweep_ef_search(conn, probes, top_k=top_k)
    ]
    result["filtered"] = {
        "topic": RARE_TOPIC,
        "limit": top_k,
        "rows_without_iterative": statistics.fmean(len(filtered_search(conn, q, top_k=top_k)) for q in probes),
        "rows_with_relaxed_order": statistics.fmean(
            len(filtered_search(conn, q, top_k=top_k, iterative=True)) for q in probes
        ),
    }
    report = compare_hybrid_latency(lab, [q.query for q in read_queries(lab.corpus.queries)], repeats=5)
    result["hybrid_latency"] = {"python_ms": report.python_ms, "sql_ms": report.sql_ms,
                                "sql_over_python": report.ratio, "runs": report.runs}
    return result
