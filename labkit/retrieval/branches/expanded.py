"""Search the expanded documents: each news text plus the search questions generated for it (issue 11).

``labkit.retrieval.questions`` asks the chat model, once per document, for a few questions a reader
might type and keeps them in ``news_expansion`` (this module owns that table's DDL). A
stored row counts only while it is *current*: its ``body_md5`` is the md5 of today's body
and its ``model`` is the lab's chat model; otherwise the document is searched by its body
alone, so a search never waits for a chat model.

Two branches read the expanded text (``EXPANDED_TEXT_SQL``, defined once in SQL):

* ``search_expanded``: cosine distance ``<=>`` on the expanded texts' embeddings, kept in
  ``news_expanded_vec`` by ``labkit.retrieval.branches.textvec.TextVectors`` (one row per embedding model and
  document, re-embedded when its text changes).
* ``search_expanded_lexical``: ``ts_rank_cd`` on the body's ``tsv`` concatenated with the
  questions' tsvector (computed per query: 30 short arrays; a generated column cannot use
  ``array_to_string``, which is not immutable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.ranking import Hit
from labkit.retrieval.branches.lexical import TS_CONFIG, query_words
from labkit.retrieval.branches.textvec import TextVectors
from labkit.store.locks import EXPANDED_VEC_LOCK, advisory_xact_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["EXPANSION_TABLE", "EXPANDED_VEC_TABLE", "EXPANSION_DDL", "EXPANDED_TEXT_SQL", "expansion_exists",
           "sync_expanded_vectors", "search_expanded", "search_expanded_lexical"]

EXPANSION_TABLE = "news_expansion"
EXPANDED_VEC_TABLE = "news_expanded_vec"

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
EXPANDED_VECTORS = TextVectors(EXPANDED_VEC_TABLE, EXPANDED_TEXT_SQL, EXPANDED_VEC_LOCK)

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
    EXPANDED_VECTORS.ddl(),
]


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
    """Bring ``news_expanded_vec`` in line with the current expanded texts; return rows (re)embedded (``TextVectors.sync``)."""
    if not expansion_exists(lab):
        _create_tables(lab)
    return EXPANDED_VECTORS.sync(lab, {"chat_model": lab.chat_model})


def search_expanded(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by cosine similarity of the query to the expanded texts (score = 1 - distance).

    An empty or whitespace-only query returns []; ties are broken by id.
    """
    if not expansion_exists(lab):
        _create_tables(lab)
    return EXPANDED_VECTORS.search(lab, query, top_k, {"chat_model": lab.chat_model})


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
