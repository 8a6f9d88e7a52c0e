"""Search contextual chunks: each chunk with one line of context the chat model wrote for it (taught in 15_kb_chunking).

Anthropic's "contextual retrieval", cheaply: a chunk from the middle of a long document loses
what the document is about, so before indexing the chat model writes one sentence that situates
the chunk in its document, and that sentence is searched together with the chunk.
``labkit.retrieval.contexts`` writes the lines, once per chunk text, into the corpus' context table
(``Corpus.derived("context")``; this module owns its DDL), keyed by the md5 of the chunk's text
and the chat model: a chunk whose text is unchanged by a new cut keeps its line. A line counts
only for the lab's chat model; a chunk without one is searched by its own text, so a search never
waits for a chat model.

Two branches read the contextual text (``contextual_text_sql``: the line, a line break, the chunk):

* ``search_contextual``: cosine distance on its embeddings, kept in ``Corpus.derived("context_vec")``
  by ``labkit.retrieval.branches.textvec.TextVectors``;
* ``search_contextual_lexical``: ``ts_rank_cd`` on the chunk's ``tsv`` concatenated with the line's tsvector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.corpus import Corpus
from labkit.core.ranking import Hit
from labkit.retrieval.branches.lexical import query_words
from labkit.retrieval.branches.textvec import TextVectors
from labkit.store.locks import CONTEXT_VEC_LOCK, advisory_xact_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["context_ddl", "ensure_context_tables", "contextual_text_sql", "contextual_vectors", "sync_contextual_vectors", "search_contextual",
           "search_contextual_lexical"]


def context_ddl(corpus: Corpus) -> list[sql.Composed]:
    """The corpus' table of context lines (one per chunk text and chat model) and the table of their embeddings."""
    return [
        sql.SQL(
            """
            CREATE TABLE IF NOT EXISTS {t} (
                text_md5   text NOT NULL,
                model      text NOT NULL,
                context    text NOT NULL,
                seconds    real NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (text_md5, model)
            )
            """
        ).format(t=sql.Identifier(corpus.derived("context"))),
        contextual_vectors(corpus).ddl(),
    ]


def contextual_text_sql(corpus: Corpus) -> sql.Composed:
    """Each chunk's text, after its current context line when it has one (parameter %(chat_model)s)."""
    return sql.SQL(
        """
        SELECT n.id,
               CASE WHEN c.context <> '' THEN c.context || E'\\n' || n.{x} ELSE n.{x} END AS text
        FROM {n} AS n
        LEFT JOIN {t} AS c ON c.text_md5 = md5(n.{x}) AND c.model = %(chat_model)s
        """
    ).format(t=sql.Identifier(corpus.derived("context")), n=sql.Identifier(corpus.table),
             x=sql.Identifier(corpus.text_column))


def contextual_vectors(corpus: Corpus) -> TextVectors:
    """The contextual texts' embeddings of `corpus`, kept in its table ``<table>_context_vec``."""
    return TextVectors(corpus.derived("context_vec"), contextual_text_sql(corpus), CONTEXT_VEC_LOCK, corpus.table)


def ensure_context_tables(lab: Lab) -> None:
    """Create the context table and the contextual vectors' table of the lab's corpus, once."""
    corpus = lab.corpus
    found = lab.conn.execute("SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                             (corpus.derived("context"), corpus.derived("context_vec"))).fetchone()
    if found and found[0]:
        return
    with lab.conn.transaction():
        advisory_xact_lock(lab.conn, CONTEXT_VEC_LOCK)
        for statement in context_ddl(corpus):
            lab.conn.execute(statement)


def sync_contextual_vectors(lab: Lab) -> int:
    """Bring the contextual texts' embeddings in line with the current lines; return rows (re)embedded."""
    ensure_context_tables(lab)
    return contextual_vectors(lab.corpus).sync(lab, {"chat_model": lab.chat_model})


def search_contextual(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k chunks by cosine similarity of the query to the chunk with its context line. Taught in 15_kb_chunking."""
    ensure_context_tables(lab)
    return contextual_vectors(lab.corpus).search(lab, query, top_k, {"chat_model": lab.chat_model})


def search_contextual_lexical(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k chunks by ``ts_rank_cd`` over the chunk's words and its context line's (OR). Taught in 15_kb_chunking.

    Never raises on the query text: a query without usable words returns [].
    """
    words = query_words(query)
    if not words or top_k < 1:
        return []
    ensure_context_tables(lab)
    corpus = lab.corpus
    rows = lab.conn.execute(
        sql.SQL(
            """
            SELECT n.id, ts_rank_cd(d.tsv, q)::float8 AS score
            FROM {n} AS n
            LEFT JOIN {t} AS c ON c.text_md5 = md5(n.{x}) AND c.model = %(chat_model)s
            CROSS JOIN LATERAL (SELECT n.tsv || to_tsvector({config}, coalesce(c.context, '')) AS tsv) AS d,
                 to_tsquery({config}, array_to_string(%(words)s::text[], ' | ')) AS q
            WHERE d.tsv @@ q
            ORDER BY score DESC, n.id
            LIMIT %(limit)s
            """
        ).format(t=sql.Identifier(corpus.derived("context")), n=sql.Identifier(corpus.table),
                 x=sql.Identifier(corpus.text_column), config=sql.Literal(corpus.ts_config)),
        {"chat_model": lab.chat_model, "words": words, "limit": top_k},
    ).fetchall()
    return [Hit(chunk, score) for chunk, score in rows]
