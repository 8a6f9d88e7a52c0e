"""Reciprocal Rank Fusion of any number of branches (taught in 04_rrf, extended in 10_bm25 and 11_beyond_rrf).

A document at position ``rank`` (from 1) of a ranking earns ``weight / (rrf_k + rank)``;
its scores from all rankings are summed. Only positions matter, so cosine
similarities, ``ts_rank_cd`` and BM25 values never need to share a scale.

A ``FusionConfig`` names the branches to fuse with their weights, and the RRF constant
``rrf_k``; ``fuse_searches`` runs it over the searches it is given. ``search_hybrid`` is the
plain hybrid of lesson 04 (vector + ts_rank_cd); ``search_hybrid_sql`` computes it in ONE
statement built from the same branch SQL; it breaks ties by id like ``rrf``, so the two
return identical rankings. Fusing any named branches, and the search modes built on it, are
``labkit.retrieval.pipeline`` and ``labkit.retrieval.modes`` (taught in 10_bm25 and 11_beyond_rrf).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.ranking import Hit, from_scores, ids
from labkit.retrieval.branches.lexical import lexical_sql, query_words, search_lexical
from labkit.retrieval.branches.vector import embeddable, search_vector, vector_sql
from labkit.store.embedcache import cached_query_embedding
from labkit.store.vectors import lab_vector_table

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = [
    "RRF_K",
    "CANDIDATES",
    "SearchMode",
    "FusionConfig",
    "rrf",
    "fuse",
    "fuse_searches",
    "search_hybrid",
    "HYBRID_SQL",
    "search_hybrid_sql",
]

RRF_K = 60
CANDIDATES = 10  # each branch contributes its top max(top_k, CANDIDATES) documents

SearchMode = Callable[["Lab", str, int], list[Hit]]
"""A search mode: ``mode(lab, query, top_k) -> hits``, best first."""

def rrf(rankings: Sequence[Sequence[int]], rrf_k: int = RRF_K, weights: Sequence[float] | None = None) -> list[Hit]:
    """Fuse rankings of document ids: score(d) = sum of weight / (rrf_k + rank of d). Taught in 04_rrf.

    Returns all documents, best first; equal scores are ordered by id.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[int, float] = {}
    for weight, ranking in zip(weights, rankings):
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (rrf_k + rank)
    return from_scores(scores)


@dataclass(frozen=True)
class FusionConfig:
    """Which branches to fuse with which weights, and the RRF constant. Taught in 11_beyond_rrf.

    ``FusionConfig.of({"vector": 1.0, "lexical": 1.0}, rrf_k=60)``; a branch with weight 0
    still adds its documents (at score 0) but cannot reorder the others. The names are
    branches of ``labkit.retrieval.branches.registry.BRANCHES`` when a pipeline runs it.
    """

    branches: tuple[tuple[str, float], ...]
    rrf_k: int = RRF_K

    def __post_init__(self) -> None:
        if not self.branches:
            raise ValueError("a fusion needs at least one branch, got none")
        if self.rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {self.rrf_k}")

    @classmethod
    def of(cls, weights: Mapping[str, float], rrf_k: int = RRF_K) -> FusionConfig:
        """A configuration from a {branch: weight} mapping."""
        return cls(tuple((name, float(w)) for name, w in weights.items()), int(rrf_k))

    @property
    def weights(self) -> dict[str, float]:
        """{branch: weight}, in fusion order."""
        return dict(self.branches)

    def __str__(self) -> str:
        shown = ", ".join(f"{name}={w:g}" for name, w in self.branches)
        return f"RRF({shown}; rrf_k={self.rrf_k})"


def fuse(rankings: Mapping[str, Sequence[int]], config: FusionConfig) -> list[Hit]:
    """RRF of the branch rankings that `config` names, with its weights and rrf_k. Taught in 11_beyond_rrf."""
    missing = [name for name, _ in config.branches if name not in rankings]
    if missing:
        raise KeyError(f"no ranking for branch(es) {', '.join(missing)}")
    return rrf([rankings[name] for name, _ in config.branches], config.rrf_k, [w for _, w in config.branches])


def fuse_searches(
    lab: Lab, query: str, searches: Mapping[str, SearchMode], config: FusionConfig, top_k: int = 10
) -> list[Hit]:
    """The top_k of RRF over the rankings of the searches `config` names, each its top max(top_k, CANDIDATES).

    Taught in 04_rrf (two searches) and 11_beyond_rrf (any named branches, ``labkit.retrieval.pipeline``).
    """
    if top_k < 1:
        return []
    depth = max(top_k, CANDIDATES)
    return fuse({name: ids(searches[name](lab, query, depth)) for name, _ in config.branches}, config)[:top_k]


def search_hybrid(
    lab: Lab, query: str, top_k: int = 10, rrf_k: int = RRF_K, weights: tuple[float, float] = (1.0, 1.0)
) -> list[Hit]:
    """The top_k of RRF over the vector and lexical rankings; weights are (vector, lexical). Taught in 04_rrf."""
    config = FusionConfig.of({"vector": weights[0], "lexical": weights[1]}, rrf_k)
    return fuse_searches(lab, query, {"vector": search_vector, "lexical": search_lexical}, config, top_k)


HYBRID_SQL = """
WITH vector AS (
    SELECT id, row_number() OVER (ORDER BY distance, id) AS rank FROM ({vector}) AS v
),
lexical AS (
    SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank FROM ({lexical}) AS l
)
SELECT coalesce(vector.id, lexical.id) AS id,
       coalesce(%(w_vector)s::float8 / (%(rrf_k)s::int8 + vector.rank), 0)
     + coalesce(%(w_lexical)s::float8 / (%(rrf_k)s::int8 + lexical.rank), 0) AS score
FROM vector FULL OUTER JOIN lexical ON vector.id = lexical.id
ORDER BY score DESC, id
LIMIT %(top_k)s
"""


def search_hybrid_sql(
    lab: Lab, query: str, top_k: int = 10, rrf_k: int = RRF_K, weights: tuple[float, float] = (1.0, 1.0)
) -> list[Hit]:
    """The same ranking as ``search_hybrid`` from ONE SQL statement (two CTEs + full outer join). Taught in 04_rrf."""
    if top_k < 1:
        return []
    text = embeddable(query)
    if not text.strip():  # no vector branch, and no words either: nothing to fuse
        return []
    statement = sql.SQL(HYBRID_SQL).format(vector=vector_sql(lab_vector_table(lab)), lexical=lexical_sql(corpus=lab.corpus))
    params = {
        "embedding": cached_query_embedding(lab, text),
        "words": query_words(query),
        "limit": max(top_k, CANDIDATES),
        "rrf_k": rrf_k,
        "w_vector": float(weights[0]),
        "w_lexical": float(weights[1]),
        "top_k": top_k,
    }
    return [Hit(doc_id, score) for doc_id, score in lab.conn.execute(statement, params).fetchall()]
