"""``bench``: HNSW vs exact scan on synthetic vectors, and the hybrid's latency (taught in 12_scale).

    ./run.sh bench [--size N] [--queries Q] [--seed S] [--json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import psutil

from labkit.evaluation.scale import run_bench
from labkit.services.setup import setup

__all__ = ["register", "run", "MAX_SIZE", "MAX_QUERIES", "memory_needed", "memory_problem"]

MAX_SIZE = 5_000_000  # 384-d float32 vectors: about 8 GB in Postgres; more would not fit a laptop
MAX_QUERIES = 1_000  # each query is searched exactly and at 6 ef_search values: more only takes longer
DIM = 384  # of the synthetic vectors (labkit.evaluation.scale.make_vectors)
VECTOR_COPIES = 4  # float32 (size, DIM) arrays make_vectors holds at its peak: noise, centers, sum, normalised


def memory_needed(size: int, dim: int = DIM) -> int:
    """Bytes of memory the synthetic vectors of a bench of `size` need at their peak."""
    return VECTOR_COPIES * size * dim * 4


def memory_problem(size: int, available: int) -> str | None:
    """Why a bench of `size` vectors cannot run with `available` bytes of free memory, or None when it can."""
    need = memory_needed(size)
    if need <= available:
        return None
    fits = available // memory_needed(1)
    return (f"--size {size} needs about {need / 1e9:.1f} GB of memory for its vectors, "
            f"but {available / 1e9:.1f} GB are available: use --size {fits} or less")


def register(sub: Any) -> None:
    """Add the ``bench`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("bench", help="benchmark search at scale (exact vs HNSW)",
                            description="HNSW vs exact scan on synthetic vectors.")
    parser.add_argument("--size", type=int, default=100_000,
                        help="number of vectors (default 100000; minutes on 2 cores)")
    parser.add_argument("--queries", type=int, default=50,
                        help=f"query vectors per measurement (default 50, at most {MAX_QUERIES})")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the synthetic data (default 0)")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the bench and print its figures."""
    if not 100 <= args.size <= MAX_SIZE or not 1 <= args.queries <= MAX_QUERIES:
        args.parser.error(f"--size must lie in [100, {MAX_SIZE}] and --queries in [1, {MAX_QUERIES}]")
    problem = memory_problem(args.size, psutil.virtual_memory().available)
    if problem:  # refused now, not killed by the kernel after minutes of work
        args.parser.error(problem)
    with setup(quiet=True) as lab:
        result = run_bench(lab, args.size, args.queries, args.seed)
    print(json.dumps(result, indent=2) if args.json else _text(result))
    return 0


def _text(result: dict[str, Any]) -> str:
    lines = [f"{result['size']} vectors x {result['dim']} dims, {result['queries']} queries, k={result['k']}",
             f"load (binary COPY): {result['load_s']:.1f} s"]
    lines += [f"HNSW build {name}: {seconds:.1f} s" for name, seconds in result["build_s"].items()]
    lines.append(f"{'ef_search':>9} {'recall@' + str(result['k']):>10} {'hnsw ms':>8} {'exact ms':>9} {'speed-up':>9}")
    lines += [f"{p['ef_search']:>9} {p['recall']:>10.3f} {p['hnsw_ms']:>8.2f} {p['exact_ms']:>9.2f} {p['speedup']:>8.1f}x"
              for p in result["ef_search"]]
    f = result["filtered"]
    lines.append(f"WHERE topic = '{f['topic']}' LIMIT {f['limit']}: {f['rows_without_iterative']:.1f} rows on average "
                 f"without iterative scan, {f['rows_with_relaxed_order']:.1f} with hnsw.iterative_scan = relaxed_order")
    h = result["hybrid_latency"]
    lines.append(f"hybrid: single SQL {h['sql_ms']:.2f} ms vs Python {h['python_ms']:.2f} ms "
                 f"(ratio {h['sql_over_python']:.2f})")
    return "\n".join(lines)
