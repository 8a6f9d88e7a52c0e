"""Search the expanded documents: each document's text plus the search questions generated for it.

Taught in 11_beyond_rrf. ``labkit.retrieval.questions`` asks the chat model, once per document, for
a few questions a reader might type and keeps them in the corpus' expansion table
(``Corpus.derived("expansion")``; this module owns its DDL). A stored row counts only while it
is *current*: its ``body_md5`` is the md5 of today's text and its ``model`` is the lab's chat
model; otherwise the document is searched by its text alone, so a search never waits for a chat
model.

Two branches read the expanded text (``expanded_text_sql``, defined once in SQL):

* ``search_expanded``: cosine distance ``<=>`` on the expanded texts' embeddings, kept in
  ``Corpus.derived("expanded_vec")`` by ``labkit.retrieval.branches.textvec.TextVectors`` (one row per
  embedding model and document, re-embedded when its text changes).
* ``search_expanded_lexical``: ``ts_rank_cd`` on the document's ``tsv`` concatenated with the
  questions' tsvector (computed per query: 30 short arrays; a generated column cannot use
  ``array_to_string``, which is not immutable).

Without current questions both would search the bare texts: the first a copy of the vector mode,
the second of the lexical one. ``expansion_missing`` says so, with the command that makes them
(``EXPAND_COMMAND``), and the eval command and the lessons leave these modes out until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.core.ranking import Hit
from labkit.core.text import count
from labkit.retrieval.branches.lexical import query_words
from labkit.retrieval.branches.needs import Missing
from labkit.retrieval.branches.textvec import TextVectors
from labkit.store.locks import EXPANDED_VEC_LOCK, advisory_xact_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["EXPAND_COMMAND", "EXPANSION_TABLE", "EXPANDED_VEC_TABLE", "EXPANSION_DDL", "EXPANDED_TEXT_SQL", "expanded_text_sql",
           "expanded_vectors", "expansion_ddl", "expansion_exists", "documents_without_questions", "expansion_missing",
           "sync_expanded_vectors", "search_expanded", "search_expanded_lexical"]

EXPAND_COMMAND = "./run.sh expand"  # writes the questions (labkit.cli.expand: shipped ones first, then the chat model)


def expanded_text_sql(corpus: Corpus) -> sql.Composed:
    """Current expansions joined to the documents: the text, then one question a line (parameter %(chat_model)s)."""
    return sql.SQL(
        """
        SELECT n.id,
               n.{x} || CASE WHEN cardinality(e.questions) > 0
                             THEN E'\\n' || array_to_string(e.questions, E'\\n') ELSE '' END AS text
        FROM {n} AS n
        LEFT JOIN {t} AS e ON e.id = n.id AND e.body_md5 = md5(n.{x}) AND e.model = %(chat_model)s
        """
    ).format(t=sql.Identifier(corpus.derived("expansion")), n=sql.Identifier(corpus.table),
             x=sql.Identifier(corpus.text_column))


def expanded_vectors(corpus: Corpus) -> TextVectors:
    """The expanded texts' embeddings of `corpus`, kept in its table ``<table>_expanded_vec``."""
    return TextVectors(corpus.derived("expanded_vec"), expanded_text_sql(corpus), EXPANDED_VEC_LOCK, corpus.table)


def expansion_ddl(corpus: Corpus) -> list[sql.Composed]:
    """The corpus' table of generated questions and the table of its expanded texts' embeddings."""
    return [
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
        ).format(t=sql.Identifier(corpus.derived("expansion"))),
        expanded_vectors(corpus).ddl(),
    ]


# The same for the default corpus.
EXPANSION_TABLE = DEFAULT_CORPUS.derived("expansion")
EXPANDED_VEC_TABLE = DEFAULT_CORPUS.derived("expanded_vec")
EXPANDED_TEXT_SQL = expanded_text_sql(DEFAULT_CORPUS)
EXPANDED_VECTORS = expanded_vectors(DEFAULT_CORPUS)
EXPANSION_DDL = expansion_ddl(DEFAULT_CORPUS)


def expansion_exists(lab: Lab) -> bool:
    """True when the expansion tables exist (``ensure_expansion`` or a search created them)."""
    corpus = lab.corpus
    found = lab.conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
        (corpus.derived("expansion"), corpus.derived("expanded_vec")),
    ).fetchone()
    return bool(found and found[0])


def documents_without_questions(lab: Lab) -> tuple[int, int]:
    """How many documents have no current questions of the lab's chat model, and how many documents there are.

    A row is current when it was written for the document's text as it is now and by ``lab.chat_model``;
    an empty list (a garbled answer) counts as written.
    """
    corpus = lab.corpus
    documents = sql.Identifier(corpus.table)
    if not expansion_exists(lab):
        row = lab.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(documents)).fetchone()
        total = int(row[0]) if row else 0
        return total, total
    row = lab.conn.execute(
        sql.SQL(
            "SELECT count(*) FILTER (WHERE e.id IS NULL), count(*) FROM {n} AS n "
            "LEFT JOIN {t} AS e ON e.id = n.id AND e.body_md5 = md5(n.{x}) AND e.model = %s"
        ).format(n=documents, t=sql.Identifier(corpus.derived("expansion")), x=sql.Identifier(corpus.text_column)),
        (lab.chat_model,),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def expansion_missing(lab: Lab) -> Missing | None:
    """What the expanded branches lack on this lab: documents without questions of its chat model; None when none lack them."""
    without, total = documents_without_questions(lab)
    if without == 0:
        return None
    return Missing(
        f"no expansion questions of chat model {lab.chat_model} are stored for {without} of {total} documents "
        f"(the expanded modes would search the bare texts); make them with: {EXPAND_COMMAND}",
        f"нет вопросов чат-модели `{lab.chat_model}` к {count(without, 'документу', 'документам', 'документам')} "
        f"из {total}: без них эти режимы искали бы по голому тексту; вопросы пишет `{EXPAND_COMMAND}` "
        "(или ячейка с `lk.ensure_expansion` в уроке 11)",
    )


def _create_tables(lab: Lab) -> None:
    with lab.conn.transaction():
        advisory_xact_lock(lab.conn, EXPANDED_VEC_LOCK)
        for statement in expansion_ddl(lab.corpus):
            lab.conn.execute(statement)


def sync_expanded_vectors(lab: Lab) -> int:
    """Bring the expanded texts' embeddings in line with the current texts; return rows (re)embedded (``TextVectors.sync``)."""
    if not expansion_exists(lab):
        _create_tables(lab)
    return expanded_vectors(lab.corpus).sync(lab, {"chat_model": lab.chat_model})


def search_expanded(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by cosine similarity of the query to the expanded texts (score = 1 - distance).

    An empty or whitespace-only query returns []; ties are broken by id.
    """
    if not expansion_exists(lab):
        _create_tables(lab)
    return expanded_vectors(lab.corpus).search(lab, query, top_k, {"chat_model": lab.chat_model})


def search_expanded_lexical(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by ``ts_rank_cd`` over the text + current questions (words joined by OR).

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
            FROM {n} AS n
            LEFT JOIN {t} AS e ON e.id = n.id AND e.body_md5 = md5(n.{x}) AND e.model = %(chat_model)s
            CROSS JOIN LATERAL (
                SELECT n.tsv || to_tsvector({config}, coalesce(array_to_string(e.questions, ' '), '')) AS tsv
            ) AS d,
                 to_tsquery({config}, array_to_string(%(words)s::text[], ' | ')) AS q
            WHERE d.tsv @@ q
            ORDER BY score DESC, n.id
            LIMIT %(limit)s
            """
        ).format(t=sql.Identifier(lab.corpus.derived("expansion")), n=sql.Identifier(lab.corpus.table),
                 x=sql.Identifier(lab.corpus.text_column), config=sql.Literal(lab.corpus.ts_config)),
        {"chat_model": lab.chat_model, "words": words, "limit": top_k},
    ).fetchall()
    return [Hit(doc_id, score) for doc_id, score in rows]
