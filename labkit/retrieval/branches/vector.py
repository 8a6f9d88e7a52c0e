"""Vector branch: cosine distance ``<=>`` on the current model's vector table (taught in 03_vector).

The statement orders by the bare distance operator and has a LIMIT, which is the
shape an HNSW index can serve; ``ORDER BY 1 - (embedding <=> q) DESC`` would give
the same order but never use the index.

Searched `within` the ids a metadata filter let through (16_kb_codes), the index hands over
``hnsw.ef_search`` candidates before the filter runs, and a selective filter would leave fewer
rows than asked for; the statement then runs with pgvector 0.8's iterative index scan
(``hnsw.iterative_scan = relaxed_order``, set for that statement only), which walks on through
the graph until LIMIT rows pass the filter or ``hnsw.max_scan_tuples`` rows were visited.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.ranking import Hit
from labkit.retrieval.filters import within_source
from labkit.store.embedcache import cached_query_embedding
from labkit.store.vectors import lab_vector_table

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["MAX_QUERY_CHARS", "ITERATIVE_SCAN", "embeddable", "vector_sql", "search_vector"]

MAX_QUERY_CHARS = 2000  # the embedding model reads 512 tokens at most; longer text is cut before embedding
ITERATIVE_SCAN = "relaxed_order"  # hnsw.iterative_scan of a filtered search (pgvector >= 0.8); rows are re-sorted here


def embeddable(query: str) -> str:
    """The text that gets embedded: at most MAX_QUERY_CHARS, lone surrogates replaced. Taught in 03_vector."""
    return query[:MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")


def vector_sql(table: str, within: bool = False) -> sql.Composed:
    """The vector branch as SQL with parameters %(embedding)s and %(limit)s. Taught in 03_vector.

    ``search_hybrid_sql`` embeds this same statement as its vector CTE. With `within`, only the
    rows whose id is in the parameter %(within)s are ranked (16_kb_codes).
    """
    return sql.SQL(
        """
        SELECT id, embedding <=> %(embedding)s AS distance
        FROM {table}
        ORDER BY embedding <=> %(embedding)s
        LIMIT %(limit)s
        """
    ).format(table=within_source(table, within))


def search_vector(lab: Lab, query: str, top_k: int = 10, *, within: Sequence[int] | None = None) -> list[Hit]:
    """The top_k documents by cosine similarity (score = 1 - distance) to the query embedding. Taught in 03_vector.

    An empty or whitespace-only query returns []; ties are broken by id. `within`: rank only these
    ids, with an iterative index scan (16_kb_codes).
    """
    query = embeddable(query)
    if not query.strip() or top_k < 1 or (within is not None and not within):
        return []
    embedding = cached_query_embedding(lab, query)
    statement = vector_sql(lab_vector_table(lab), within is not None)
    params = {"embedding": embedding, "limit": top_k, "within": None if within is None else list(within)}
    if within is None:
        rows = lab.conn.execute(statement, params).fetchall()
    else:
        with lab.conn.transaction():  # the setting ends with this statement's transaction
            lab.conn.execute("SELECT set_config('hnsw.iterative_scan', %s, true)", (ITERATIVE_SCAN,))
            rows = lab.conn.execute(statement, params).fetchall()
    return [Hit(doc_id, 1.0 - distance) for doc_id, distance in sorted(rows, key=lambda row: (row[1], row[0]))]
