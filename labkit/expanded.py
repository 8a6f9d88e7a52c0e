"""Search the expanded documents: each news text plus the search questions generated for it (issue 11).

``labkit.expansion`` asks the chat model, once per document, for a few questions a reader
might type and keeps them in ``news_expansion`` (this module owns that table's DDL). A
stored row counts only while it is *current*: its ``body_md5`` is the md5 of today's body
and its ``model`` is the lab's chat model; otherwise the document is searched by its body
alone, so a search never waits for a chat model.

Two branches read the expanded text (``EXPANDED_TEXT_SQL``, defined once in SQL):

* ``search_expanded``: cosine distance ``<=>`` on the expanded texts' embeddings, kept in
  ``news_expanded_vec`` (one row per embedding model and document). Every search first
  checks, in one cheap statement, that each row's ``text_md5`` matches the current expanded
  text; stale rows are re-embedded through ``cached_embeddings`` (so a re-run costs nothing).
* ``search_expanded_lexical``: ``ts_rank_cd`` on the body's ``tsv`` concatenated with the
  questions' tsvector (computed per query: 30 short arrays; a generated column cannot use
  ``array_to_string``, which is not immutable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg import sql

from .db import EXPANDED_VEC_LOCK, advisory_xact_lock
from .embedcache import cached_embeddings, cached_query_embedding
from .lexical import TS_CONFIG, query_words
from .ranking import Hit
from .vector import embeddable

if TYPE_CHECKING:
    from .context import Lab

__all__ = ["EXPANSION_TABLE", "EXPANDED_VEC_TABLE", "EXPANSION_DDL", "EXPANDED_TEXT_SQL", "expansion_exists",
           "sync_expanded_vectors", "search_expanded", "search_expanded_lexical"]

EXPANSION_TABLE = "news_expansion"
EXPANDED_VEC_TABLE = "news_expanded_vec"

EXPANSION_DDL: list[sql.Composed] = [
    sql.SQL(
        """
        CREATE TABLE IF NOT EXISTS {t} (
            id         integer PRIMARY KEY,
            body_md5   text NOT NULL,
            model      text NOT NULL,
            questions  text[] NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        )
        """
    ).format(t=sql.Identifier(EXPANSION_TABLE)),
    sql.SQL(
        """
        CREATE TABLE IF NOT EXISTS {t} (
            model     text NOT NULL,
            id        integer NOT NULL,
            text_md5  text NOT NULL,
            embedding vector NOT NULL,
            PRIMARY KEY (model, id)
        )
        """
    ).format(t=sql.Identifier(EXPANDED_VEC_TABLE)),
]

# Current expansions joined to the documents: the expanded text is the body, then one question a line.
EXPANDED_TEXT_SQL = sql.SQL(
    """
    SELECT n.id,
           n.body || CASE WHEN cardinality(e.questions) > 0
                          THEN E'\\n' || array_to_string(e.questions, E'\\n') ELSE '' END AS text
    FROM news AS n
    LEFT JOIN {t} AS e ON e.id = n.id AND e.body_md5 = md5(n.body) AND e.model = %(chat_model)s
    """
).format(t=sql.Identifier(EXPANSION_TABLE))


def expansion_exists(lab: Lab) -> bool:
    """True when the expansion tables exist (``ensure_expansion`` or a search created them)."""
    found = lab.conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL", (EXPANSION_TABLE, EXPANDED_VEC_TABLE)
    ).fetchone()
    return bool(found and found[0])


def _create_tables(lab: Lab) -> None:
    with lab.conn.transaction():
        advisory_xact_lock(lab.conn, EXPANDED_VEC_LOCK)
        for statement in EXPANSION_DDL:
            lab.conn.execute(statement)


def sync_expanded_vectors(lab: Lab) -> int:
    """Bring ``news_expanded_vec`` in line with the current expanded texts; return rows (re)embedded.

    The usual case is one statement that finds nothing stale. Otherwise, under a transaction-level
    advisory lock, rows of deleted documents go and stale rows get embeddings from the cache.
    """
    if not expansion_exists(lab):
        _create_tables(lab)
    params: dict[str, Any] = {"chat_model": lab.chat_model, "embed_model": lab.embed_model}
    stale = sql.SQL(
        """
        WITH x AS ({expanded})
        SELECT x.id, x.text, md5(x.text) FROM x
        LEFT JOIN {v} AS v ON v.model = %(embed_model)s AND v.id = x.id
        WHERE v.id IS NULL OR v.text_md5 <> md5(x.text)
        ORDER BY x.id
        """
    ).format(expanded=EXPANDED_TEXT_SQL, v=sql.Identifier(EXPANDED_VEC_TABLE))
    orphans = sql.SQL(
        "SELECT 1 FROM {v} AS v WHERE v.model = %(embed_model)s AND NOT EXISTS (SELECT 1 FROM news AS n WHERE n.id = v.id)"
    ).format(v=sql.Identifier(EXPANDED_VEC_TABLE))
    conn = lab.conn
    if not conn.execute(stale, params).fetchone() and not conn.execute(orphans, params).fetchone():
        return 0
    with conn.transaction():
        advisory_xact_lock(conn, EXPANDED_VEC_LOCK)
        conn.execute(
            sql.SQL(
                "DELETE FROM {v} AS v WHERE v.model = %(embed_model)s "
                "AND NOT EXISTS (SELECT 1 FROM news AS n WHERE n.id = v.id)"
            ).format(v=sql.Identifier(EXPANDED_VEC_TABLE)),
            params,
        )
        rows = conn.execute(stale, params).fetchall()
        vectors = cached_embeddings(lab, [text for _, text, _ in rows], "passage") if rows else []
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL(
                    "INSERT INTO {v} (model, id, text_md5, embedding) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (model, id) DO UPDATE SET text_md5 = EXCLUDED.text_md5, embedding = EXCLUDED.embedding"
                ).format(v=sql.Identifier(EXPANDED_VEC_TABLE)),
                [(lab.embed_model, doc_id, digest, vec) for (doc_id, _, digest), vec in zip(rows, vectors)],
            )
    return len(rows)


def search_expanded(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by cosine similarity of the query to the expanded texts (score = 1 - distance).

    An empty or whitespace-only query returns []; ties are broken by id.
    """
    text = embeddable(query)
    if not text.strip() or top_k < 1:
        return []
    sync_expanded_vectors(lab)
    rows = lab.conn.execute(
        sql.SQL(
            "SELECT id, embedding <=> %(embedding)s AS distance FROM {v} WHERE model = %(model)s "
            "ORDER BY embedding <=> %(embedding)s, id LIMIT %(limit)s"
        ).format(v=sql.Identifier(EXPANDED_VEC_TABLE)),
        {"embedding": cached_query_embedding(lab, text), "model": lab.embed_model, "limit": top_k},
    ).fetchall()
    return [Hit(doc_id, 1.0 - distance) for doc_id, distance in rows]


def search_expanded_lexical(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by ``ts_rank_cd`` over body + current questions (words joined by OR).

    Never raises on the query text: a query without usable words returns [].
    """
    words = query_words(query)
    if not words or top_k < 1:
        return []
    if not expansion_exists(lab):
        _create_tables(lab)
    rows = lab.conn.execute(
        sql.SQL(
            """
            SELECT n.id, ts_rank_cd(d.tsv, q)::float8 AS score
            FROM news AS n
            LEFT JOIN {t} AS e ON e.id = n.id AND e.body_md5 = md5(n.body) AND e.model = %(chat_model)s
            CROSS JOIN LATERAL (
                SELECT n.tsv || to_tsvector({config}, coalesce(array_to_string(e.questions, ' '), '')) AS tsv
            ) AS d,
                 to_tsquery({config}, array_to_string(%(words)s::text[], ' | ')) AS q
            WHERE d.tsv @@ q
            ORDER BY score DESC, n.id
            LIMIT %(limit)s
            """
        ).format(t=sql.Identifier(EXPANSION_TABLE), config=sql.Literal(TS_CONFIG)),
        {"chat_model": lab.chat_model, "words": words, "limit": top_k},
    ).fetchall()
    return [Hit(doc_id, score) for doc_id, score in rows]
