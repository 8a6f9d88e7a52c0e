"""Reciprocal Rank Fusion of the vector and lexical branches (taught in 04_rrf).

A document at position ``rank`` (from 1) of a ranking earns ``weight / (k + rank)``;
its scores from all rankings are summed. Only positions matter, so cosine
similarities and ``ts_rank_cd`` values never need to share a scale.
``search_hybrid`` fuses in Python after two round trips; ``search_hybrid_sql`` does
the same in ONE statement built from the same branch SQL. Both break ties by id,
so they return identical rankings.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from .db import settings_for, vector_table
from .embedcache import cached_query_embedding
from .lexical import lexical_sql, query_words, search_lexical
from .ranking import Hit, from_scores, ids
from .settings import Settings
from .vector import embeddable, search_vector, vector_sql

__all__ = ["RRF_K", "CANDIDATES", "rrf", "search_hybrid", "search_hybrid_sql"]

RRF_K = 60
CANDIDATES = 10  # each branch contributes its top max(k, CANDIDATES) documents


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K, weights: Sequence[float] | None = None) -> list[Hit]:
    """Fuse rankings of document ids: score(d) = sum of weight / (k + rank of d). Taught in 04_rrf.

    Returns all documents, best first; equal scores are ordered by id.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[int, float] = {}
    for weight, ranking in zip(weights, rankings):
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    return from_scores(scores)


def search_hybrid(
    conn: psycopg.Connection,
    query: str,
    k: int = 10,
    rrf_k: int = RRF_K,
    weights: tuple[float, float] = (1.0, 1.0),
    settings: Settings | None = None,
) -> list[Hit]:
    """Top-k of RRF over the vector and lexical rankings; weights are (vector, lexical). Taught in 04_rrf."""
    depth = max(k, CANDIDATES)
    vector = ids(search_vector(conn, query, depth, settings))
    lexical = ids(search_lexical(conn, query, depth))
    return rrf([vector, lexical], rrf_k, weights)[:k]


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
LIMIT %(k)s
"""


def search_hybrid_sql(
    conn: psycopg.Connection,
    query: str,
    k: int = 10,
    rrf_k: int = RRF_K,
    weights: tuple[float, float] = (1.0, 1.0),
    settings: Settings | None = None,
) -> list[Hit]:
    """The same ranking as ``search_hybrid`` from ONE SQL statement (two CTEs + full outer join). Taught in 04_rrf."""
    if k < 1:
        return []
    settings = settings or settings_for(conn)
    text = embeddable(query)
    if not text.strip():  # no vector branch, and no words either: nothing to fuse
        return []
    embedding = cached_query_embedding(conn, text, settings)
    statement = sql.SQL(HYBRID_SQL).format(
        vector=vector_sql(vector_table(conn, settings.embed_model)), lexical=lexical_sql()
    )
    params = {
        "embedding": embedding,
        "words": query_words(query),
        "limit": max(k, CANDIDATES),
        "rrf_k": rrf_k,
        "w_vector": float(weights[0]),
        "w_lexical": float(weights[1]),
        "k": k,
    }
    return [Hit(doc_id, score) for doc_id, score in conn.execute(statement, params).fetchall()]
