"""Every measurement of ``./run.sh bench``, as plain data (taught in 12_scale).

Ratios measured in one run, not absolute goals: the structure of the real and synthetic vectors,
HNSW's recall on the real knowledge-base chunks with the real queries, then on each synthetic set
at full size the builds (float32 and halfvec graphs) and the ef_search sweep against the exact scan, the parameters that reach
the recall target at the speed-up target, rows a selective filter returns with and without
iterative scans, and the single-SQL hybrid against the Python hybrid on the lab corpus.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from labkit.evaluation.realvectors import REAL_LABEL, real_vectors
from labkit.evaluation.scale import (
    BUILD_SETTINGS,
    EF_SEARCH_VALUES,
    RARE_TOPIC,
    STORAGES,
    BuildResult,
    choose_setting,
    filtered_search,
    load_vectors,
    sweep_builds,
)
from labkit.evaluation.synthetic import SYNTHETIC, compare_structure, synthetic_set

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["REAL_BUILDS", "REAL_EF_SEARCH", "TARGET_RECALL", "TARGET_SPEEDUP", "run_bench"]

REAL_BUILDS = ((4, 16), (8, 32), (16, 64), (32, 128))  # on a few hundred rows a build takes a blink
REAL_EF_SEARCH = (10, 20, 40, 80)
TARGET_RECALL, TARGET_SPEEDUP = 0.99, 10.0  # the course's goal for HNSW on realistic vectors at 100k rows


def _builds(results: Sequence[BuildResult]) -> list[dict[str, Any]]:
    return [{"m": b.m, "ef_construction": b.ef_construction, "storage": b.storage, "index_mb": b.index_bytes / 2**20,
             "build_s": b.build_s, "ef_search": [{"ef_search": p.ef_search, "recall": p.recall, "hnsw_ms": p.hnsw_ms,
                            "exact_ms": p.exact_ms, "speedup": p.speedup} for p in b.points]}
            for b in results]


def _choice(results: Sequence[BuildResult]) -> dict[str, Any] | None:
    choice = choose_setting(results, TARGET_RECALL, TARGET_SPEEDUP)
    if choice is None:
        return None
    return {"m": choice.build.m, "ef_construction": choice.build.ef_construction, "storage": choice.build.storage,
            "ef_search": choice.point.ef_search,
            "recall": choice.point.recall, "speedup": choice.point.speedup, "meets_target": choice.meets}


def run_bench(lab: Lab, size: int, queries: int = 50, seed: int = 0, top_k: int = 10,
              sets: Sequence[str] = tuple(SYNTHETIC), builds: Sequence[tuple[int, int]] = BUILD_SETTINGS,
              kb_documents: int | None = None, storages: Sequence[str] = STORAGES) -> dict[str, Any]:
    """Every measurement of ``./run.sh bench`` on the lab's database, as plain data. Taught in 12_scale.

    `sets` names the synthetic sets (``labkit.evaluation.synthetic.SYNTHETIC``) measured at `size` rows,
    `builds` the (m, ef_construction) pairs built on each, once for each of `storages` (what the graph stores:
    ``vector``, ``halfvec``; the filter is measured on the last float32 build); `kb_documents` limits the real vectors to the
    knowledge base's first documents (0: no real vectors). The top-level ``load_s``, ``build_s``,
    ``ef_search`` and ``filtered`` are the first set's, its last build's sweep (the keys of earlier benches).
    """
    from labkit.core.corpus import read_queries
    from labkit.evaluation.retrieval import compare_hybrid_latency

    conn = lab.conn
    result: dict[str, Any] = {"size": size, "queries": queries, "k": top_k,
                              "target": {"recall": TARGET_RECALL, "speedup": TARGET_SPEEDUP}}
    if kb_documents != 0:
        real = real_vectors(lab, kb_documents)
        structure = compare_structure(real.rows, real.queries, sets, seed)
        result["structure"] = {name: {"label": REAL_LABEL if name == "real" else SYNTHETIC[name].label,
                                      "rows": len(real.rows), **measured} for name, measured in structure.items()}
        chunks = real.rows[: real.chunks]  # HNSW on the knowledge base's chunks, searched by its queries
        load_vectors(conn, chunks, ["kb"] * len(chunks))
        result["real"] = {"title": "фрагменты базы знаний и её размеченные запросы", "rows": len(chunks),
                          "queries": len(real.queries),
                          "builds": _builds(sweep_builds(conn, real.queries, REAL_BUILDS, REAL_EF_SEARCH, top_k))}
    result["sets"] = {}
    for name in sets:
        vectors, topics, probes = synthetic_set(name).make(size, queries, seed)
        entry: dict[str, Any] = {"label": SYNTHETIC[name].label, "title": SYNTHETIC[name].title,
                                 "dim": int(vectors.shape[1])}
        entry["load_s"] = load_vectors(conn, vectors, topics)
        del vectors
        swept = []
        for storage in sorted(storages, key=lambda kind: kind != "vector"):  # float32 first: the filter needs its index
            swept += sweep_builds(conn, probes, builds, EF_SEARCH_VALUES, top_k, storage=storage)
            if storage == "vector":
                entry["filtered"] = {  # on the last float32 build
                    "topic": RARE_TOPIC,
                    "limit": top_k,
                    "rows_without_iterative": statistics.fmean(len(filtered_search(conn, q, top_k=top_k)) for q in probes),
                    "rows_with_relaxed_order": statistics.fmean(
                        len(filtered_search(conn, q, top_k=top_k, iterative=True)) for q in probes),
                }
        entry["builds"] = _builds(swept)
        entry["choice"] = _choice(swept)
        result["sets"][name] = entry
    if sets:
        first = result["sets"][sets[0]]
        kept = [b for b in first["builds"] if b["storage"] == "vector"] or first["builds"]  # the keys of earlier benches
        result.update(data=sets[0], dim=first["dim"], load_s=first["load_s"], filtered=first.get("filtered"),
                      build_s={f"m={b['m']},ef_construction={b['ef_construction']}": b["build_s"] for b in kept},
                      ef_search=kept[-1]["ef_search"])
    report = compare_hybrid_latency(lab, [q.query for q in read_queries(lab.corpus.queries)], repeats=5)
    result["hybrid_latency"] = {"python_ms": report.python_ms, "sql_ms": report.sql_ms,
                                "sql_over_python": report.ratio, "runs": report.runs}
    return result
