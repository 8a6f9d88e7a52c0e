"""Abbreviations for the lexical branches: a rewrite table in Postgres, mined from the corpus (taught in 16_kb_codes).

«ИП», «КБТ», «СЦ»: a reader types the abbreviation, a document spells it out, or the other way
round, and word matching sees two different words. Postgres' own answer is a *synonym* or
*thesaurus dictionary* in a text-search configuration, but its file has to lie in the server's
``$SHAREDIR/tsearch_data`` (``synonym_file_problem`` shows the error naming that folder): a
file beside the server's binaries, which no SQL statement can write and which a managed or
containerised Postgres does not let us touch. So the rule lives where SQL can reach it, in a
table, and the query is rewritten with it before the lexical branch searches (the same idea as
Postgres' ``ts_rewrite``, applied to the query text so BM25 reads it too):

* ``mine_aliases`` finds the pairs in the documents themselves: a capitalised abbreviation in
  parentheses right after the words it abbreviates, their initials matching its letters
  («крупной бытовой техники (КБТ)», «Закон «О защите прав потребителей» (ЗоЗПП)»). No pair is
  written by hand, so nothing is fitted to the labelled queries;
* ``ensure_aliases`` keeps them in the corpus' table ``<table>_aliases`` with the lexemes of
  both sides (the corpus' configuration stems «техники» and «технику» alike); it re-mines when
  the corpus text changed (an md5 of the texts is kept with the rows);
* ``Aliases()``, a rewrite step printed ``aliases``, appends the other side of every pair
  whose one side is in the query and the other is not: «вывоз кбт» → «вывоз кбт крупную
  бытовую технику», «крупную бытовую технику повредили» → «… КБТ».
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg
from psycopg import sql

from labkit.retrieval.branches.lexical import query_words
from labkit.store.locks import ALIASES_LOCK, advisory_xact_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["Alias", "AliasExpansion", "mine_aliases", "aliases_table", "ensure_aliases", "expand_aliases", "Aliases",
           "synonym_file_problem", "synonym_sample"]

# An abbreviation in parentheses: a capital letter, then 1-7 letters, at least two capitals in all («ИП», «ЗоЗПП»).
_ABBREVIATION = re.compile(r"\(([A-ZА-ЯЁ][A-Za-zА-Яа-яЁё]{1,7})\)")
_WORD = re.compile(r"\w+(?:-\w+)*")
_BEFORE = 200  # characters before the parenthesis searched for the words an abbreviation stands for


class Alias(NamedTuple):
    """An abbreviation, the words it stands for as the text wrote them, and how often the text paired them."""

    abbr: str
    expansion: str
    uses: int = 1


class AliasExpansion(NamedTuple):
    """A query as typed, as searched, and each pair used: (what the query had, what was added)."""

    typed: str
    searched: str
    added: tuple[tuple[str, str], ...]


def _initials_match(abbr: str, words: list[str]) -> bool:
    """Do the words' first letters spell the abbreviation (all its letters, or only its capitals: «ПДн»)?"""
    initials = "".join(word[0] for word in words).lower()
    capitals = "".join(ch for ch in abbr if ch.isupper()).lower()
    return initials in (abbr.lower(), capitals)


def mine_aliases(texts: Iterable[str]) -> list[Alias]:
    """The (abbreviation, words) pairs the texts define as «words (ABBR)», most used first. Taught in 16_kb_codes.

    The words are the fewest before the parenthesis whose initials spell the abbreviation;
    a parenthesis that no run of words before it spells is not an abbreviation («(Москва)»).
    """
    found: Counter[tuple[str, str]] = Counter()
    for text in texts:
        for match in _ABBREVIATION.finditer(text):
            abbr = match.group(1)
            if sum(ch.isupper() for ch in abbr) < 2:
                continue
            words = _WORD.findall(text[max(0, match.start() - _BEFORE):match.start()])
            for count in range(1, min(len(words), len(abbr)) + 1):
                if _initials_match(abbr, words[-count:]):
                    found[(abbr, " ".join(words[-count:]))] += 1
                    break
    return [Alias(abbr, expansion, uses) for (abbr, expansion), uses in
            sorted(found.items(), key=lambda item: (-item[1], item[0]))]


def aliases_table(lab: Lab) -> str:
    """The name of the lab corpus' table of abbreviations."""
    return lab.corpus.derived("aliases")


_FINGERPRINT = "SELECT md5(coalesce(string_agg(md5({text}), '' ORDER BY id), '')) FROM {table}"


def _fingerprint(lab: Lab) -> str:
    corpus = lab.corpus
    row = lab.conn.execute(sql.SQL(_FINGERPRINT).format(
        text=sql.Identifier(corpus.text_column), table=sql.Identifier(corpus.table))).fetchone()
    return str(row[0]) if row else ""


def _current(conn: psycopg.Connection[Any], table: str, fingerprint: str) -> bool:
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    if not (exists and exists[0]):
        return False
    row = conn.execute(sql.SQL("SELECT count(*) > 0 AND bool_and(source_md5 = %s) FROM {}").format(
        sql.Identifier(table)), (fingerprint,)).fetchone()
    return bool(row and row[0])


def ensure_aliases(lab: Lab) -> int:
    """Mine the lab corpus' abbreviations into its table unless they are current; the number of rows written.

    Taught in 16_kb_codes. A corpus that defines no abbreviation is mined again at each call (there is
    no row to remember its text by); that costs one read of its texts.
    """
    table, corpus = aliases_table(lab), lab.corpus
    fingerprint = _fingerprint(lab)
    if _current(lab.conn, table, fingerprint):
        return 0
    with lab.conn.transaction():
        advisory_xact_lock(lab.conn, ALIASES_LOCK)
        if _current(lab.conn, table, fingerprint):  # mined by another session meanwhile
            return 0
        texts = [row[0] for row in lab.conn.execute(sql.SQL("SELECT {} FROM {}").format(
            sql.Identifier(corpus.text_column), sql.Identifier(corpus.table)))]
        aliases = mine_aliases(texts)
        lab.conn.execute(sql.SQL(
            """
            CREATE TABLE IF NOT EXISTS {t} (
                abbr              text NOT NULL,
                expansion         text NOT NULL,
                uses              integer NOT NULL,
                abbr_lexemes      text[] NOT NULL,
                expansion_lexemes text[] NOT NULL,
                source_md5        text NOT NULL,
                PRIMARY KEY (abbr, expansion)
            )
            """).format(t=sql.Identifier(table)))
        lab.conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))
        written = lab.conn.execute(sql.SQL(
            """
            INSERT INTO {t} (abbr, expansion, uses, abbr_lexemes, expansion_lexemes, source_md5)
            SELECT a, e, u, al, el, %(md5)s
            FROM unnest(%(abbr)s::text[], %(expansion)s::text[], %(uses)s::integer[]) AS x(a, e, u),
                 LATERAL (SELECT array(SELECT lexeme FROM unnest(to_tsvector({config}, a)) ORDER BY lexeme) AS al,
                                 array(SELECT lexeme FROM unnest(to_tsvector({config}, e)) ORDER BY lexeme) AS el) AS l
            WHERE cardinality(al) > 0 AND cardinality(el) > 0 AND al <> el
            """).format(t=sql.Identifier(table), config=sql.Literal(corpus.ts_config)),
            {"abbr": [a.abbr for a in aliases], "expansion": [a.expansion for a in aliases],
             "uses": [a.uses for a in aliases], "md5": fingerprint}).rowcount
    return max(written, 0)


def expand_aliases(lab: Lab, query: str) -> AliasExpansion:
    """The query with the other side of each abbreviation pair it uses appended. Taught in 16_kb_codes.

    Lexemes decide (the corpus' configuration): «кбт» finds «КБТ», «крупную бытовую технику» finds
    «крупной бытовой техники»; of a pair's spellings the text used most is added. Any string is safe.
    """
    words = query_words(query)
    if not words:
        return AliasExpansion(query, query, ())
    ensure_aliases(lab)
    rows = lab.conn.execute(sql.SQL(
        """
        WITH q AS (SELECT coalesce(array_agg(lexeme), '{{}}') AS lexemes FROM unnest(to_tsvector({config}, %(words)s)))
        SELECT DISTINCT ON (a.abbr_lexemes, a.expansion_lexemes)
               a.abbr, a.expansion, a.abbr_lexemes <@ q.lexemes AS typed_abbr
        FROM {t} AS a, q
        WHERE (a.abbr_lexemes <@ q.lexemes) <> (a.expansion_lexemes <@ q.lexemes)
        ORDER BY a.abbr_lexemes, a.expansion_lexemes, a.uses DESC, a.expansion
        """).format(t=sql.Identifier(aliases_table(lab)), config=sql.Literal(lab.corpus.ts_config)),
        {"words": " ".join(words)}).fetchall()
    added = tuple(dict.fromkeys((abbr, expansion) if typed else (expansion, abbr) for abbr, expansion, typed in rows))
    if not added:
        return AliasExpansion(query, query, ())
    return AliasExpansion(query, " ".join([query, *dict.fromkeys(new for _, new in added)]), added)


@dataclass(frozen=True)
class Aliases:
    """The rewrite step of a search pipeline that expands abbreviations (``expand_aliases``); printed ``aliases``."""

    def __call__(self, lab: Lab, query: str) -> str:
        return expand_aliases(lab, query).searched

    def __str__(self) -> str:
        return "aliases"


def synonym_file_problem(conn: psycopg.Connection[Any], file: str) -> str | None:
    """Why Postgres cannot build a synonym dictionary from ``tsearch_data/<file>.syn`` (None: it can). Nothing is kept.

    Taught in 16_kb_codes: the error names the server's folder, which only the server's installation can write.
    """
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(sql.SQL("CREATE TEXT SEARCH DICTIONARY pg_temp.labkit_synonym_probe "
                                 "(TEMPLATE = synonym, SYNONYMS = {})").format(sql.Identifier(file)))
    except psycopg.Error as exc:
        return " ".join(str(exc).split())
    return None


def synonym_sample(conn: psycopg.Connection[Any], words: Iterable[str]) -> dict[str, list[str] | None]:
    """What a synonym dictionary over Postgres' own ``synonym_sample.syn`` makes of each word (nothing is kept).

    Taught in 16_kb_codes: the mechanism works; the file is the obstacle. None: the dictionary does not know the word.
    """
    with conn.transaction(force_rollback=True):
        conn.execute("CREATE TEXT SEARCH DICTIONARY pg_temp.labkit_synonym_sample "
                     "(TEMPLATE = synonym, SYNONYMS = synonym_sample)")
        found = {}
        for word in words:
            row = conn.execute("SELECT ts_lexize('pg_temp.labkit_synonym_sample', %s)", (word,)).fetchone()
            found[word] = row[0] if row else None
        return found
