"""``bench``: HNSW vs exact scan on real and synthetic vectors, and the hybrid's latency (taught in 12_scale).

    ./run.sh bench [--size N] [--queries Q] [--seed S] [--data noisy,realistic] [--builds 8:32,16:64,32:128]
                   [--storage vector,halfvec] [--kb-documents D] [--json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import psutil

from labkit.core.corpora import load_corpus
from labkit.evaluation.realvectors import kb_chunks
from labkit.evaluation.scale import BUILD_SETTINGS, STORAGES
from labkit.evaluation.scalebench import run_bench
from labkit.evaluation.synthetic import SYNTHETIC
from labkit.evaluation.vectorshape import PROFILE_KS
from labkit.services.setup import setup

__all__ = ["register", "run", "MAX_SIZE", "MAX_QUERIES", "memory_needed", "memory_problem"]

MAX_SIZE = 5_000_000  # 384-d float32 vectors: about 8 GB in Postgres; more would not fit a laptop
MAX_QUERIES = 1_000  # each query is searched 3 times exactly and at every ef_search of every build: more only takes longer
DIM = 384  # of the synthetic vectors (labkit.evaluation.synthetic)
VECTOR_COPIES = 4  # float32 (size, DIM) arrays a generator holds at its peak (make_vectors: noise, centers, sum,
# normalised; make_realistic: walks, edits, noise, their product with the basis)


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
                            description="HNSW vs exact scan on the knowledge base's real vectors and on synthetic "
                                        "vectors: " + "; ".join(f"{d.name} ({d.title})" for d in SYNTHETIC.values()))
    parser.add_argument("--size", type=int, default=100_000,
                        help="number of vectors (default 100000; minutes on 2 cores)")
    parser.add_argument("--queries", type=int, default=50,
                        help=f"query vectors per measurement (default 50, at most {MAX_QUERIES})")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the synthetic data (default 0)")
    parser.add_argument("--data", type=_names, default=tuple(SYNTHETIC),
                        help=f"synthetic sets, comma-separated (default {','.join(SYNTHETIC)})")
    parser.add_argument("--builds", type=_builds, default=BUILD_SETTINGS,
                        help="HNSW builds as m:ef_construction, comma-separated (default "
                             + ",".join(f"{m}:{ef}" for m, ef in BUILD_SETTINGS) + ")")
    parser.add_argument("--storage", type=_storages, default=STORAGES,
                        help="what the HNSW graph stores, comma-separated: vector (float32, as the table) and/or "
                             "halfvec (float16: half the bytes); each build is made once for each (default "
                             + ",".join(STORAGES) + ")")
    parser.add_argument("--kb-documents", type=int, default=None,
                        help="real vectors from the knowledge base's first D documents only (default all; 0: none)")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.set_defaults(run=run)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SYNTHETIC]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"expected names among {', '.join(SYNTHETIC)}, got {text!r}")
    return names


def _storages(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names or any(name not in STORAGES for name in names):
        raise argparse.ArgumentTypeError(f"expected names among {', '.join(STORAGES)}, got {text!r}")
    return names


def _builds(text: str) -> tuple[tuple[int, int], ...]:
    """'8:32,16:64' -> ((8, 32), (16, 64)), within pgvector's limits (m 2..100, ef_construction 2m..1000)."""
    try:
        pairs = tuple((int(m), int(ef)) for m, ef in (part.split(":") for part in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected m:ef_construction pairs such as 16:64, got {text!r}") from None
    for m, ef in pairs:
        if not 2 <= m <= 100 or not 2 * m <= ef <= 1000:
            raise argparse.ArgumentTypeError(f"m must lie in [2, 100] and ef_construction in [2m, 1000], got {m}:{ef}")
    return pairs


def run(args: argparse.Namespace) -> int:
    """Run the bench and print its figures."""
    if not 100 <= args.size <= MAX_SIZE or not 1 <= args.queries <= MAX_QUERIES:
        args.parser.error(f"--size must lie in [100, {MAX_SIZE}] and --queries in [1, {MAX_QUERIES}]")
    if args.kb_documents is not None and args.kb_documents < 0:
        args.parser.error("--kb-documents must be 0 or more")
    if args.kb_documents:
        rows = len(kb_chunks(args.kb_documents)) + len(load_corpus())
        if rows <= max(PROFILE_KS):
            args.parser.error(f"--kb-documents {args.kb_documents} gives {rows} real vectors; measuring their shape "
                              f"needs more than {max(PROFILE_KS)}: use more documents, or 0 for none")
    problem = memory_problem(args.size, psutil.virtual_memory().available)
    if problem:  # refused now, not killed by the kernel after minutes of work
        args.parser.error(problem)
    with setup(quiet=True) as lab:
        result = run_bench(lab, args.size, args.queries, args.seed, sets=args.data, builds=args.builds,
                           kb_documents=args.kb_documents, storages=args.storage)
    print(json.dumps(result, indent=2) if args.json else _text(result))
    return 0


_STRUCTURE = (("twonn", "TwoNN dim", ".1f"), ("pca90", "PCA 90%", ".0f"), ("d1", "d(1st)", ".3f"),
              ("d10", "d(10th)", ".3f"), ("d100", "d(100th)", ".3f"), ("mean", "d(mean)", ".3f"),
              ("contrast", "contrast", ".2f"), ("query_d1", "q d(1st)", ".3f"), ("query_contrast", "q contr.", ".2f"))


def _sweep(builds: list[dict[str, Any]], k: int, speed: bool = True) -> list[str]:
    lines = []
    for build in builds:
        stored = f", {build['storage']} (index {build['index_mb']:.0f} MB)" if "storage" in build else ""
        lines.append(f"  m={build['m']}, ef_construction={build['ef_construction']}{stored}: built in {build['build_s']:.1f} s")
        lines.append(f"  {'ef_search':>9} {'recall@' + str(k):>10}" + (f" {'hnsw ms':>8} {'exact ms':>9} {'speed-up':>9}"
                                                                       if speed else ""))
        lines += [f"  {p['ef_search']:>9} {p['recall']:>10.3f}" + (
            f" {p['hnsw_ms']:>8.2f} {p['exact_ms']:>9.2f} {p['speedup']:>8.1f}x" if speed else "")
            for p in build["ef_search"]]
    return lines


def _text(result: dict[str, Any]) -> str:
    k, target = result["k"], result["target"]
    lines = []
    if "structure" in result:
        lines.append(f"structure (each set made with as many rows as the real one, {result['structure']['real']['rows']}):")
        lines.append(f"  {'set':<10}" + "".join(f" {title:>9}" for _, title, _ in _STRUCTURE))
        lines += [f"  {name:<10}" + "".join(f" {format(measured[key], spec):>9}" for key, _, spec in _STRUCTURE)
                  for name, measured in result["structure"].items()]
        real = result["real"]
        lines.append(f"HNSW on {real['rows']} knowledge-base chunks with its {real['queries']} labelled queries "
                     "(recall only: at this size speed says nothing):")
        lines += _sweep(real["builds"], k, speed=False)
    for name, entry in result["sets"].items():
        lines.append(f"{name}: {result['size']} vectors x {entry['dim']} dims, {result['queries']} queries, k={k}; "
                     f"load (binary COPY) {entry['load_s']:.1f} s")
        lines += _sweep(entry["builds"], k)
        choice = entry["choice"]
        if choice is None:
            lines.append(f"  no setting is {target['speedup']:.0f}x faster than the exact scan")
        else:
            verdict = "reaches" if choice["meets_target"] else "best recall at that speed-up, short of"
            lines.append(f"  m={choice['m']}, ef_construction={choice['ef_construction']}, {choice['storage']}, "
                         f"ef_search={choice['ef_search']}: "
                         f"recall@{k} {choice['recall']:.3f} at {choice['speedup']:.1f}x ({verdict} the target "
                         f"recall >= {target['recall']} at >= {target['speedup']:.0f}x)")
        f = entry.get("filtered")
        if f is None:
            continue
        lines.append(f"  WHERE topic = '{f['topic']}' LIMIT {f['limit']}: {f['rows_without_iterative']:.1f} rows on "
                     f"average without iterative scan, {f['rows_with_relaxed_order']:.1f} with "
                     "hnsw.iterative_scan = relaxed_order")
    h = result["hybrid_latency"]
    lines.append(f"hybrid: single SQL {h['sql_ms']:.2f} ms vs Python {h['python_ms']:.2f} ms "
                 f"(ratio {h['sql_over_python']:.2f})")
    return "\n".join(lines)
