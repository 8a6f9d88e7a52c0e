"""Lexical branch: Postgres full-text search on ``to_tsvector('russian', body)`` (taught in 02_lexical).

How any string becomes a safe tsquery: Python extracts the words (``\\w+``, Unicode
letters, digits and ``_``) and passes them as ONE text[] parameter; SQL joins them
with `` | `` (OR) or `` & `` (AND) and hands that to ``to_tsquery('russian', ...)``,
which stems them and drops stop words. No character of the user's string that
tsquery treats as syntax (``& | ! : ( ) <-> * ' \\``, quotes, NUL) can survive the
``\\w+`` extraction, so the query text never raises a tsquery syntax error; a string
without words (empty, punctuation, emoji, only stop words) gives an empty ranking.

``ts_rank_cd`` (cover density: frequency plus proximity of matched words) orders the
hits. Neither it nor ``ts_rank`` is BM25: they use no corpus statistics (no IDF).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from psycopg import sql

from labkit.core.ranking import Hit

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["TS_CONFIG", "MAX_WORDS", "MAX_WORD_LENGTH", "query_words", "lexical_sql", "search_lexical"]

from labkit.core.corpora.news import TS_CONFIG

MAX_WORDS = 64  # a 10 kB paste is not a query; the first 64 distinct words are plenty
MAX_WORD_LENGTH = 100  # longer "words" are noise (Postgres itself skips lexemes over 2047 bytes)

_WORD = re.compile(r"\w+")
_OPERATORS = {"any": " | ", "all": " & "}
_RANKERS = {"ts_rank_cd": sql.SQL("ts_rank_cd"), "ts_rank": sql.SQL("ts_rank")}

Match = Literal["any", "all"]
Ranker = Literal["ts_rank_cd", "ts_rank"]


def query_words(query: str) -> list[str]:
    """Distinct lower-cased words of a query, in order, as the lexical branch sees them. Taught in 02_lexical."""
    words: list[str] = []
    for word in _WORD.findall(query.lower()):
        if len(word) <= MAX_WORD_LENGTH and word not in words:
            words.append(word)
            if len(words) == MAX_WORDS:
                break
    return words


def lexical_sql(match: Match = "any", rank: Ranker = "ts_rank_cd") -> sql.Composed:
    """The lexical branch as SQL with parameters %(words)s (text[]) and %(limit)s. Taught in 02_lexical.

    ``search_hybrid_sql`` embeds this same statement as its lexical CTE.
    """
    if match not in _OPERATORS:
        raise ValueError(f"match must be one of {sorted(_OPERATORS)}, not {match!r}")
    if rank not in _RANKERS:
        raise ValueError(f"rank must be one of {sorted(_RANKERS)}, not {rank!r}")
    return sql.SQL(
        """
        SELECT id, {rank}(tsv, q)::float8 AS score
        FROM news,
             to_tsquery({config}, array_to_string(%(words)s::text[], {operator})) AS q
        WHERE tsv @@ q
        ORDER BY score DESC, id
        LIMIT %(limit)s
        """
    ).format(rank=_RANKERS[rank], config=sql.Literal(TS_CONFIG), operator=sql.Literal(_OPERATORS[match]))


def search_lexical(
    lab: Lab,
    query: str,
    top_k: int = 10,
    match: Match = "any",
    rank: Ranker = "ts_rank_cd",
) -> list[Hit]:
    """The top_k documents by full-text rank; words joined by OR (``match="all"``: AND). Taught in 02_lexical.

    Never raises on the query text: a query without usable words returns [].
    """
    words = query_words(query)
    if not words or top_k < 1:
        return []
    with lab.conn.cursor() as cur:
        cur.execute(lexical_sql(match, rank), {"words": words, "limit": top_k})
        return [Hit(doc_id, score) for doc_id, score in cur.fetchall()]
