"""The ``bench`` command: ratios measured in one run, not absolute goals (taught in 12_scale).

    ./run.sh bench [--size N] [--queries Q] [--json]

Loads ``N`` synthetic vectors into ``scale_vectors``, builds HNSW with two
(m, ef_construction) settings, sweeps ``hnsw.ef_search`` against the exact scan,
counts the rows a selective filtered query returns with and without iterative
scans, and times the single-SQL hybrid against the Python hybrid on the lab corpus.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence

from . import scale

__all__ = ["BUILD_SETTINGS", "run_bench", "main"]

BUILD_SETTINGS = ((8, 32), (16, 64))  # (m, ef_construction); the last one stays for the sweep


def run_bench(conn, size: int, queries: int = 50, seed: int = 0, k: int = 10) -> dict:
    """Run every measurement on one connection and return them as plain data. Taught in 12_scale."""
    vectors, topics = scale.make_vectors(size, seed=seed)
    probes = scale.make_queries(queries, seed=seed)
    result: dict = {"size": size, "dim": int(vectors.shape[1]), "queries": queries, "k": k}
    result["load_s"] = scale.load_vectors(conn, vectors, topics)
    result["build_s"] = {f"m={m},ef_construction={ef}": scale.build_hnsw(conn, m, ef) for m, ef in BUILD_SETTINGS}
    sweep = scale.sweep_ef_search(conn, probes, k=k)
    result["ef_search"] = [
        {"ef_search": p.ef_search, "recall": p.recall, "hnsw_ms": p.hnsw_ms, "exact_ms": p.exact_ms, "speedup": p.speedup}
        for p in sweep
    ]
    result["filtered"] = {
        "topic": scale.RARE_TOPIC,
        "limit": k,
        "rows_without_iterative": statistics.fmean(len(scale.filtered_search(conn, q, k=k)) for q in probes),
        "rows_with_relaxed_order": statistics.fmean(len(scale.filtered_search(conn, q, k=k, iterative=True)) for q in probes),
    }
    result["hybrid_latency"] = _hybrid_latency(conn)
    return result


def _hybrid_latency(conn) -> dict:
    """Single-SQL vs Python hybrid on the lab corpus (needs the model server for query embeddings)."""
    from .corpus import load_queries
    from .db import ensure_corpus, settings_for
    from .evaluation import compare_hybrid_latency

    try:
        ensure_corpus(conn, settings_for(conn))
        report = compare_hybrid_latency(conn, [q.query for q in load_queries()], repeats=5)
    except Exception as exc:  # report, do not hide the other measurements
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"python_ms": report.python_ms, "sql_ms": report.sql_ms, "sql_over_python": report.ratio, "runs": report.runs}


def _print(result: dict) -> None:
    print(f"{result['size']} vectors x {result['dim']} dims, {result['queries']} queries, k={result['k']}")
    print(f"load (binary COPY): {result['load_s']:.1f} s")
    for name, seconds in result["build_s"].items():
        print(f"HNSW build {name}: {seconds:.1f} s")
    print(f"{'ef_search':>9} {'recall@' + str(result['k']):>10} {'hnsw ms':>8} {'exact ms':>9} {'speed-up':>9}")
    for p in result["ef_search"]:
        print(f"{p['ef_search']:>9} {p['recall']:>10.3f} {p['hnsw_ms']:>8.2f} {p['exact_ms']:>9.2f} {p['speedup']:>8.1f}x")
    f = result["filtered"]
    print(
        f"WHERE topic = '{f['topic']}' LIMIT {f['limit']}: {f['rows_without_iterative']:.1f} rows on average "
        f"without iterative scan, {f['rows_with_relaxed_order']:.1f} with hnsw.iterative_scan = relaxed_order"
    )
    h = result["hybrid_latency"]
    if "error" in h:
        print(f"hybrid latency: not measured ({h['error']})")
    else:
        print(f"hybrid: single SQL {h['sql_ms']:.2f} ms vs Python {h['python_ms']:.2f} ms (ratio {h['sql_over_python']:.2f})")


def main(argv: Sequence[str] | None = None) -> int:
    """``bench`` command: 0 on success, 1 when the stack fails, 2 on bad arguments."""
    parser = argparse.ArgumentParser(prog="labkit bench", description="HNSW vs exact scan on synthetic vectors.")
    parser.add_argument("--size", type=int, default=100_000, help="number of vectors (default 100000; minutes on 2 cores)")
    parser.add_argument("--queries", type=int, default=50, help="query vectors per measurement (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the synthetic data (default 0)")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = parser.parse_args(argv)
    if args.size < 100 or args.queries < 1:
        parser.error("--size must be at least 100 and --queries at least 1")
    from .db import connect
    from .stack import ensure_stack

    try:
        with connect(ensure_stack()) as conn:
            result = run_bench(conn, args.size, args.queries, args.seed)
    except Exception as exc:  # the stack or a service failed: say what, do not dump a traceback
        print(f"labkit bench: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0
