"""The exact-code branch: article codes, law articles and model names matched as whole keys (taught in 16_kb_codes).

An embedder reads «7748-К» as a number near other numbers: «7784-К» and «5512-К» land beside it.
Full-text search does not do much better: the ``russian`` configuration's parser splits
«7748-К» into the number ``7748`` and the word «К», and «к» is a Russian stop word, so the
tsvector keeps only ``7748`` and «7748-М» matches as well. A text-search configuration can
change the dictionaries per token type, not how the parser cuts; a parser of our own would be C.

So a code is cut out of the text by one regular expression in SQL, ``code_keys``: letters and
digits with a digit in the first part, then any more parts joined by ``-``, ``.`` or ``/``, two
characters or more (``CODE_PATTERN``; «ст.25» gives ``25``, «К-7748» gives ``7748``). Its *key* is lower-cased, without hyphens, with Latin letters that look Cyrillic read as
Cyrillic (a reader types «7748-K» with the Latin K as often as with the Cyrillic one):
«7748-К» → ``7748к``, «152.1» → ``152.1``, «M4» → ``м4``, «0-0-6» → ``006``.

The keys of a row are those of its text and of the corpus' ``codes`` field (the knowledge base's
article codes, ``Field.many``), kept in an expression GIN index (``<table>_code_keys``), so
``keys && query_keys`` finds the rows without reading the others. Rows are ranked like BM25
without length normalisation: ``sum over shared keys of IDF(key) * tf * (k1 + 1) / (tf + k1)``,
N and df counted over the rows searched. A query without a key ranks nothing.

The SQL function is created once per database (``labkit_code_keys_v1``) and never replaced: the
index stores its results, so a changed cut must be a new version, with a new name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from labkit.core.corpus import Corpus
from labkit.core.ranking import Hit
from labkit.retrieval.filters import within_source
from labkit.store.locks import CODE_INDEX_LOCK, advisory_xact_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["CODES_FIELD", "CODE_KEYS_FUNCTION", "CODE_PATTERN", "CODE_KEYS_DDL", "MAX_QUERY_KEYS", "CODES_K1", "code_keys",
           "codes_problem", "code_index_name", "ensure_code_index", "codes_sql", "search_codes"]

CODES_FIELD = "codes"  # the corpus field of article codes whose keys count with the text's
CODE_KEYS_FUNCTION = "labkit_code_keys_v1"
MAX_QUERY_KEYS = 32  # a pasted page is not a query; its first 32 distinct keys are plenty
MAX_QUERY_CHARS = 2000
CODES_K1 = 1.2  # BM25's tf saturation; no length normalisation (b = 0): a key is rare or it is not

# Latin letters that look like Cyrillic ones, lower case, and the Cyrillic letters they are read as.
_LATIN, _CYRILLIC = "aceopxykmtbh", "асеорхукмтвн"
_ALNUM = "0-9A-Za-zА-Яа-яЁё"
# A code: letters and digits with a digit in its first part, then more parts after - . or / («7748-К», «152.1», «M4»).
CODE_PATTERN = f"([{_ALNUM}]*[0-9][{_ALNUM}]*(?:[-‐‑–./][{_ALNUM}]+)*)"
CODE_KEYS_DDL = sql.SQL(
    """
    CREATE FUNCTION {name}(t text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    RETURN ARRAY(
        SELECT key
        FROM (
            SELECT translate(regexp_replace(lower(m[1]), '[-‐‑–]', '', 'g'), {latin}, {cyrillic}) AS key
            FROM regexp_matches(t, {pattern}, 'g') AS m
        ) AS found
        WHERE length(key) >= 2
    )
    """
).format(name=sql.Identifier(CODE_KEYS_FUNCTION), latin=sql.Literal(_LATIN), cyrillic=sql.Literal(_CYRILLIC),
         pattern=sql.Literal(CODE_PATTERN))
"""The code cut as an SQL function (created by ``ensure_code_index``)."""


def _clean(text: str) -> str:
    """`text` as Postgres takes it: at most MAX_QUERY_CHARS, no NUL, lone surrogates replaced."""
    return text[:MAX_QUERY_CHARS].replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


def codes_problem(corpus: Corpus) -> str | None:
    """Why `corpus` cannot be searched by codes (it has no text field ``codes``); None when it can."""
    names = {f.name: f for f in corpus.fields}
    if CODES_FIELD not in names or names[CODES_FIELD].sql_type != "text":
        return f"the corpus {corpus.name!r} has no text field {CODES_FIELD!r} (article codes)"
    return None


def code_index_name(corpus: Corpus) -> str:
    """The expression index of the code keys of `corpus`' rows."""
    return corpus.derived("code_keys")


def _row_keys(corpus: Corpus) -> sql.Composed:
    """The keys of a row as an SQL expression: the same in the index and in every query, so the index serves them."""
    return sql.SQL("{fn}({text} || ' ' || coalesce({codes}, ''))").format(
        fn=sql.Identifier(CODE_KEYS_FUNCTION), text=sql.Identifier(corpus.text_column),
        codes=sql.Identifier(CODES_FIELD))


def _exists(conn: psycopg.Connection[Any], corpus: Corpus) -> bool:
    row = conn.execute("SELECT to_regprocedure(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                       (f"{CODE_KEYS_FUNCTION}(text)", code_index_name(corpus))).fetchone()
    return bool(row and row[0])


def ensure_code_index(lab: Lab) -> bool:
    """Create the code-key function and the corpus' expression GIN index if missing; True when it made something."""
    if _exists(lab.conn, lab.corpus):
        return False
    problem = codes_problem(lab.corpus)
    if problem is not None:
        raise ValueError(problem)
    with lab.conn.transaction():
        advisory_xact_lock(lab.conn, CODE_INDEX_LOCK)
        if _exists(lab.conn, lab.corpus):  # made by another session meanwhile
            return False
        missing = lab.conn.execute("SELECT to_regprocedure(%s) IS NULL", (f"{CODE_KEYS_FUNCTION}(text)",)).fetchone()
        if missing and missing[0]:
            lab.conn.execute(CODE_KEYS_DDL)
        lab.conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin ({keys})").format(
            index=sql.Identifier(code_index_name(lab.corpus)), table=sql.Identifier(lab.corpus.table),
            keys=_row_keys(lab.corpus)))
    return True


def code_keys(lab: Lab, text: str) -> list[str]:
    """The code keys of `text`, in order, as the branch cuts them (the SQL function itself). Taught in 16_kb_codes."""
    ensure_code_index(lab)
    row = lab.conn.execute(sql.SQL("SELECT {}(%s)").format(sql.Identifier(CODE_KEYS_FUNCTION)), (_clean(text),)).fetchone()
    return list(row[0]) if row and row[0] else []


def codes_sql(corpus: Corpus, within: bool = False) -> sql.Composed:
    """The branch as SQL with parameters %(keys)s (text[]), %(k1)s and %(limit)s (and %(within)s). Taught in 16_kb_codes."""
    return sql.SQL(
        """
        WITH query_keys AS (
            SELECT DISTINCT unnest(%(keys)s::text[]) AS key
        ),
        matched AS (  -- the index finds these: the same expression as the index's
            SELECT id, {keys} AS keys FROM {table} WHERE {keys} && %(keys)s::text[]
        ),
        doc_freq AS (
            SELECT q.key, count(m.id)::float8 AS df
            FROM query_keys AS q LEFT JOIN matched AS m ON q.key = ANY(m.keys)
            GROUP BY q.key
        ),
        collection AS (
            SELECT count(*)::float8 AS n FROM {table}
        )
        SELECT m.id,
               sum(ln(1 + (c.n - f.df + 0.5) / (f.df + 0.5)) * t.tf * (%(k1)s::float8 + 1) / (t.tf + %(k1)s::float8))
                   AS score
        FROM matched AS m
        CROSS JOIN LATERAL (SELECT key, count(*)::float8 AS tf FROM unnest(m.keys) AS key GROUP BY key) AS t
        JOIN doc_freq AS f ON f.key = t.key
        CROSS JOIN collection AS c
        GROUP BY m.id
        ORDER BY score DESC, m.id
        LIMIT %(limit)s
        """
    ).format(keys=_row_keys(corpus), table=within_source(corpus.table, within))


def search_codes(lab: Lab, query: str, top_k: int = 10, *, within: Sequence[int] | None = None) -> list[Hit]:
    """The top_k rows sharing the query's code keys, rarest keys first; any string is safe. Taught in 16_kb_codes.

    A query without a code («как вернуть телевизор») returns []. `within`: rank only these ids.
    """
    if top_k < 1 or (within is not None and not within):
        return []
    keys = list(dict.fromkeys(code_keys(lab, query)))[:MAX_QUERY_KEYS]
    if not keys:
        return []
    params = {"keys": keys, "k1": CODES_K1, "limit": top_k, "within": None if within is None else list(within)}
    rows = lab.conn.execute(codes_sql(lab.corpus, within is not None), params).fetchall()
    return [Hit(doc_id, float(score)) for doc_id, score in rows]
