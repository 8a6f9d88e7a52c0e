"""Okapi BM25 computed inside PostgreSQL from the tsvector lexemes (taught in 10_bm25).

``ts_rank`` and ``ts_rank_cd`` look at one document at a time: they never ask how
rare a word is in the whole corpus. BM25 does, through the inverse document
frequency (IDF), and it normalises by document length:

    score(d, q) = sum over lexemes t of q:
        IDF(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    IDF(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

tf is the number of positions of the lexeme in the document's tsvector, |d| the
number of positions of all its lexemes (stop words are already gone), N the
number of documents and df the number of documents holding the lexeme.

Design choice: the statistics (N, avgdl, df) are computed in the query itself with
``unnest(tsv)`` CTEs instead of a materialized view. They are therefore always
current (an inserted or deleted document counts at once, no refresh step a loader
could forget), at the price of a pass over all postings per query: nothing on the
30-document corpus, a few milliseconds per thousand documents. A corpus of
millions would keep the per-lexeme statistics in a table maintained by a trigger.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.core.ranking import Hit, from_scores
from labkit.retrieval.branches.lexical import query_words
from labkit.retrieval.filters import within_source

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = [
    "BM25_SQL",
    "bm25_sql",
    "DEFAULT_K1",
    "DEFAULT_B",
    "query_lexemes",
    "fetch_postings",
    "bm25_scores",
    "search_bm25",
]

DEFAULT_K1 = 1.2
DEFAULT_B = 0.75

# One statement: query lexemes, postings, document lengths, corpus statistics, scores; {table} is the
# corpus' documents table and {config} its text-search configuration (bm25_sql fills them in).
BM25_SQL = """
WITH query_terms AS (
    SELECT DISTINCT lexeme FROM unnest(to_tsvector({config}, %(words)s))
),
postings AS (
    SELECT n.id, t.lexeme, cardinality(t.positions)::float8 AS tf
    FROM {table} AS n CROSS JOIN LATERAL unnest(n.tsv) AS t
),
doc_len AS (
    SELECT n.id, coalesce(sum(p.tf), 0)::float8 AS dl
    FROM {table} AS n LEFT JOIN postings AS p ON p.id = n.id
    GROUP BY n.id
),
corpus AS (
    SELECT count(*)::float8 AS n_docs, avg(dl)::float8 AS avgdl FROM doc_len
),
doc_freq AS (
    SELECT p.lexeme, count(*)::float8 AS df
    FROM postings AS p JOIN query_terms AS q ON q.lexeme = p.lexeme
    GROUP BY p.lexeme
)
SELECT p.id,
       sum(ln(1 + (c.n_docs - f.df + 0.5) / (f.df + 0.5))
           * p.tf * (%(k1)s::float8 + 1)
           / (p.tf + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * l.dl / c.avgdl))
       ) AS score
FROM postings AS p
JOIN doc_freq AS f ON f.lexeme = p.lexeme
JOIN doc_len AS l ON l.id = p.id
CROSS JOIN corpus AS c
GROUP BY p.id
ORDER BY score DESC, p.id
LIMIT %(limit)s
"""
_LEXEMES = "SELECT DISTINCT lexeme FROM unnest(to_tsvector({config}, %(words)s)) ORDER BY lexeme"


def bm25_sql(corpus: Corpus, within: bool = False) -> sql.Composed:
    """BM25_SQL over `corpus`: its documents table and text-search configuration. Taught in 10_bm25.

    With `within`, the table is only its rows whose id is in the parameter %(within)s (16_kb_codes):
    the filtered rows are the collection searched, and N, avgdl and df are counted over them.
    """
    return sql.SQL(BM25_SQL).format(table=within_source(corpus.table, within, alias=False), config=sql.Literal(corpus.ts_config))


def _check_parameters(top_k: int, k1: float, b: float) -> None:
    """Raise ValueError with a clear message on out-of-range BM25 parameters."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if not k1 >= 0:
        raise ValueError(f"k1 must be >= 0, got {k1}")
    if not 0 <= b <= 1:
        raise ValueError(f"b must lie in [0, 1], got {b}")


def query_lexemes(conn: psycopg.Connection[Any], query: str, corpus: Corpus = DEFAULT_CORPUS) -> list[str]:
    """The distinct lexemes of a query (the corpus' stemming), as BM25 sees them. Taught in 10_bm25."""
    words = " ".join(query_words(query))
    if not words:
        return []
    statement = sql.SQL(_LEXEMES).format(config=sql.Literal(corpus.ts_config))
    rows = conn.execute(statement, {"words": words}).fetchall()
    return [row[0] for row in rows]


def fetch_postings(conn: psycopg.Connection[Any], corpus: Corpus = DEFAULT_CORPUS) -> dict[int, dict[str, int]]:
    """Every document's lexemes with their term frequencies, read with unnest(tsv). Taught in 10_bm25."""
    postings: dict[int, dict[str, int]] = {}
    for doc_id, lexeme, tf in conn.execute(
        sql.SQL("SELECT n.id, t.lexeme, cardinality(t.positions) "
                "FROM {} AS n LEFT JOIN LATERAL unnest(n.tsv) AS t ON true ORDER BY n.id").format(
            sql.Identifier(corpus.table))
    ):
        terms = postings.setdefault(doc_id, {})
        if lexeme is not None:
            terms[lexeme] = tf
    return postings


def bm25_scores(
    postings: Mapping[int, Mapping[str, int]],
    terms: Iterable[str],
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
) -> list[Hit]:
    """Plain-Python BM25 over given postings, best first (the reference for the SQL). Taught in 10_bm25."""
    _check_parameters(1, k1, b)
    terms = set(terms)
    n_docs = len(postings)
    if n_docs == 0 or not terms:
        return []
    lengths = {doc_id: sum(tfs.values()) for doc_id, tfs in postings.items()}
    avgdl = sum(lengths.values()) / n_docs
    df = {t: sum(1 for tfs in postings.values() if t in tfs) for t in terms}
    scores: dict[int, float] = {}
    for doc_id, tfs in postings.items():
        for t in terms & tfs.keys():
            idf = math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5))
            tf = tfs[t]
            norm = k1 * (1 - b + b * lengths[doc_id] / avgdl)
            scores[doc_id] = scores.get(doc_id, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
    return from_scores(scores)


def search_bm25(
    lab: Lab,
    query: str,
    top_k: int = 10,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    *,
    within: Sequence[int] | None = None,
) -> list[Hit]:
    """The top_k documents by BM25 computed in one SQL statement; any string is safe. Taught in 10_bm25.

    `within`: rank only these ids, as a collection of their own (16_kb_codes).
    """
    _check_parameters(top_k, k1, b)
    words = " ".join(query_words(query))
    if not words or (within is not None and not within):
        return []
    params = {"words": words, "k1": k1, "b": b, "limit": top_k, "within": None if within is None else list(within)}
    rows = lab.conn.execute(bm25_sql(lab.corpus, within is not None), params).fetchall()
    return [Hit(doc_id, float(score)) for doc_id, score in rows]

