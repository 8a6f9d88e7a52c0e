"""The improved hybrid: RRF over vector, lexical and latent-terms branches, tuned honestly (taught in 11_beyond_rrf).

Honesty rules, as code:

* ``tune_fusion`` scores every configuration of a grid on ONE split of labelled
  queries (the 12 seed queries, ``queries.jsonl``) and picks the best by mean
  Recall@k, then MRR, then the smallest departure from the plain defaults.
* The pick is frozen in ``DEFAULT_FUSION``; the held-out set
  (``heldout.jsonl``, written after the corpus and never passed to ``tune_fusion``)
  only measures it.
* ``time_modes`` puts the milliseconds a mode costs per query next to its gain.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import psycopg

from .bm25 import search_bm25
from .corpus import DATA_DIR, LabelledQuery
from .fusion import CANDIDATES, RRF_K, rrf
from .latent import search_latent
from .lexical import search_lexical
from .metrics import reciprocal_rank, recall_at_k
from .ranking import Hit, ids
from .vector import search_vector

__all__ = [
    "HELDOUT_PATH",
    "BRANCHES",
    "FusionConfig",
    "DEFAULT_FUSION",
    "TuningResult",
    "branch_rankings",
    "fuse",
    "default_grid",
    "tune_fusion",
    "search_fused",
    "search_hybrid_latent",
    "search_hybrid_bm25",
    "time_modes",
]

HELDOUT_PATH = DATA_DIR / "heldout.jsonl"

Branch = Callable[[psycopg.Connection, str, int], list[Hit]]
BRANCHES: dict[str, Branch] = {
    "vector": search_vector,
    "lexical": search_lexical,  # ts_rank_cd
    "bm25": search_bm25,
    "latent": search_latent,
}


class FusionConfig(NamedTuple):
    """Which lexical branch to fuse, the RRF constant and the (vector, lexical, latent) weights."""

    lexical: str = "lexical"
    rrf_k: int = RRF_K
    weights: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def branches(self) -> tuple[str, str, str]:
        """Names of the three fused branches, in weight order."""
        return ("vector", self.lexical, "latent")


# Chosen by tune_fusion on queries.jsonl with default_grid() (re-run in 11_beyond_rrf):
# many configurations tie at the top on 12 queries; the tie-break keeps the plain defaults.
DEFAULT_FUSION = FusionConfig(lexical="lexical", rrf_k=60, weights=(1.0, 1.0, 1.0))


class TuningResult(NamedTuple):
    """Mean metrics of one configuration on the tuning split."""

    config: FusionConfig
    recall: float
    mrr: float


def branch_rankings(
    conn: psycopg.Connection, queries: Sequence[str], depth: int = CANDIDATES
) -> dict[str, dict[str, list[int]]]:
    """Every branch's top-`depth` ids for every query: ``{branch: {query: ids}}``. Taught in 11_beyond_rrf."""
    return {name: {q: ids(branch(conn, q, depth)) for q in queries} for name, branch in BRANCHES.items()}


def fuse(rankings: Mapping[str, Sequence[int]], config: FusionConfig = DEFAULT_FUSION) -> list[Hit]:
    """RRF of the three branch rankings named by `config` (a zero weight drops a branch). Taught in 11_beyond_rrf."""
    if config.lexical not in ("lexical", "bm25"):
        raise ValueError(f"lexical must be 'lexical' or 'bm25', not {config.lexical!r}")
    chosen = [(rankings[name], w) for name, w in zip(config.branches(), config.weights) if w > 0]
    if not chosen:
        return []
    return rrf([r for r, _ in chosen], k=config.rrf_k, weights=[w for _, w in chosen])


def default_grid() -> list[FusionConfig]:
    """The searched configurations: 2 lexical branches x 4 RRF constants x 63 weight triples. Taught in 11_beyond_rrf."""
    levels = (0.0, 0.5, 1.0, 2.0)
    triples = [w for w in itertools.product(levels, repeat=3) if any(w)]
    return [FusionConfig(lex, k, w) for lex in ("lexical", "bm25") for k in (5, 10, 30, 60) for w in triples]


def _departure(config: FusionConfig) -> tuple[int, int, int]:
    """How far a configuration is from the defaults (for tie-breaking towards the simplest)."""
    return (
        sum(w != 1.0 for w in config.weights),
        abs(config.rrf_k - RRF_K),
        config.lexical != "lexical",
    )


def tune_fusion(
    rankings: Mapping[str, Mapping[str, Sequence[int]]],
    queries: Sequence[LabelledQuery],
    grid: Sequence[FusionConfig] | None = None,
    k: int = 3,
) -> list[TuningResult]:
    """Score each configuration on `queries`; best first (Recall@k, MRR, closeness to defaults). Taught in 11_beyond_rrf."""
    if not queries:
        raise ValueError("tune_fusion needs at least one labelled query")
    results = []
    for config in grid if grid is not None else default_grid():
        fused = [ids(fuse({b: rankings[b][q.query] for b in config.branches()}, config)) for q in queries]
        results.append(
            TuningResult(
                config,
                statistics.fmean(recall_at_k(r, q.relevant, k) for r, q in zip(fused, queries)),
                statistics.fmean(reciprocal_rank(r, q.relevant) for r, q in zip(fused, queries)),
            )
        )
    return sorted(results, key=lambda r: (-r.recall, -r.mrr, _departure(r.config)))


def search_fused(
    conn: psycopg.Connection, query: str, k: int = 10, config: FusionConfig = DEFAULT_FUSION
) -> list[Hit]:
    """Top-k of RRF over the branches `config` weights above zero; any string is safe. Taught in 11_beyond_rrf."""
    depth = max(k, CANDIDATES)
    rankings = {
        name: ids(BRANCHES[name](conn, query, depth)) for name, w in zip(config.branches(), config.weights) if w > 0
    }
    return fuse(rankings, config)[:k]


def search_hybrid_latent(conn: psycopg.Connection, query: str, k: int = 10) -> list[Hit]:
    """The improved mode: vector + ts_rank_cd + latent terms with the frozen DEFAULT_FUSION. Taught in 11_beyond_rrf."""
    return search_fused(conn, query, k, DEFAULT_FUSION)


def search_hybrid_bm25(
    conn: psycopg.Connection, query: str, k: int = 10, rrf_k: int = RRF_K, weights: tuple[float, float] = (1.0, 1.0)
) -> list[Hit]:
    """RRF of the vector and BM25 branches (BM25 in place of ts_rank_cd); weights (vector, bm25). Taught in 10_bm25."""
    return search_fused(conn, query, k, FusionConfig("bm25", rrf_k, (weights[0], weights[1], 0.0)))


def time_modes(
    conn: psycopg.Connection,
    queries: Sequence[str],
    modes: Mapping[str, Callable[[psycopg.Connection, str, int], list[Hit]]],
    k: int = 3,
    repeat: int = 1,
) -> dict[str, float]:
    """Median wall-clock milliseconds per query of each mode (after one warm-up call). Taught in 11_beyond_rrf."""
    timings: dict[str, float] = {}
    for name, mode in modes.items():
        if queries:
            mode(conn, queries[0], k)  # warm-up: model load, caches, plans
        samples = []
        for _ in range(repeat):
            for query in queries:
                start = time.perf_counter()
                mode(conn, query, k)
                samples.append((time.perf_counter() - start) * 1000.0)
        timings[name] = statistics.median(samples) if samples else float("nan")
    return timings
