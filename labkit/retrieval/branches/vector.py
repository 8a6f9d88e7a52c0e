"""Vector branch: cosine distance ``<=>`` on the current model's vector table (taught in 03_vector).

The statement orders by the bare distance operator and has a LIMIT, which is the
shape an HNSW index can serve; ``ORDER BY 1 - (embedding <=> q) DESC`` would give
the same order but never use the index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.ranking import Hit
from labkit.store.embedcache import cached_query_embedding
from labkit.store.vectors import lab_vector_table

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["MAX_QUERY_CHARS", "embeddable", "vector_sql", "search_vector"]

MAX_QUERY_CHARS = 2000  # the embedding model reads 512 tokens at most; longer text is cut before embedding


def embeddable(query: str) -> str:
    """The text that gets embedded: at most MAX_QUERY_CHARS, lone surrogates replaced. Taught in 03_vector."""
    return query[:MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")


def vector_sql(table: str) -> sql.Composed:
    """The vector branch as SQL with parameters %(embedding)s and %(limit)s. Taught in 03_vector.

    ``search_hybrid_sql`` embeds this same statement as its vector CTE.
    """
    return sql.SQL(
        """
        SELECT id, embedding <=> %(embedding)s AS distance
        FROM {table}
        ORDER BY embedding <=> %(embedding)s
        LIMIT %(limit)s
        """
    ).format(table=sql.Identifier(table))


def search_vector(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by cosine similarity (score = 1 - distance) to the query embedding. Taught in 03_vector.

    An empty or whitespace-only query returns []; ties are broken by id.
    """
    query = embeddable(query)
    if not query.strip() or top_k < 1:
        return []
    embedding = cached_query_embedding(lab, query)
    rows = lab.conn.execute(vector_sql(lab_vector_table(lab)), {"embedding": embedding, "limit": top_k}).fetchall()
    return [Hit(doc_id, 1.0 - distance) for doc_id, distance in sorted(rows, key=lambda row: (row[1], row[0]))]
