"""Leakage: the words of a labelled query that a relevant document gets only from text added to it (11_beyond_rrf).

A search branch that embeds more than the document itself (the fielded branch adds the rubric of
the document's topic) is scored on labelled queries. If the added text was written with those
queries in view, it repeats their words, and a win on them is the queries' own echo, not
evidence. ``supplied_words`` measures it: for each query, its lexemes that a relevant
document's added text holds and the document's own text does not (an inflection counts as the
same word, as in ``labkit.retrieval.rerankers.coverage``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from psycopg import sql

from labkit.core.corpus import LabelledQuery
from labkit.retrieval.branches.bm25 import query_lexemes
from labkit.retrieval.rewriters.spelling import same_word

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["Supplied", "supplied_words"]


class Supplied(NamedTuple):
    """One labelled query and the lexemes of it that only the added text gives some relevant document."""

    query: str
    words: tuple[str, ...]


def _holds(lexemes: Sequence[str], lexeme: str) -> bool:
    return any(other == lexeme or same_word(lexeme, other) for other in lexemes)


def supplied_words(lab: Lab, queries: Sequence[LabelledQuery], glosses: Mapping[str, str],
                   field: str = "topic") -> list[Supplied]:
    """For each query, the lexemes a relevant document gets only from the gloss of its `field`. Taught in 11_beyond_rrf.

    `glosses` maps the field's values to the text added to a document (``lk.TOPIC_RUBRICS``, or the
    agent's ``lk.TOPIC_GLOSSES`` for comparison); a value without a gloss adds nothing.
    """
    corpus = lab.corpus
    rows = lab.conn.execute(
        sql.SQL("SELECT id, {text}, {field}::text FROM {table}").format(
            text=sql.Identifier(corpus.text_column), field=sql.Identifier(field), table=sql.Identifier(corpus.table))
    ).fetchall()
    lexemes: dict[str, list[str]] = {}

    def of(text: str) -> list[str]:
        if text not in lexemes:
            lexemes[text] = query_lexemes(lab.conn, text, corpus)
        return lexemes[text]

    documents = {doc_id: (body, value) for doc_id, body, value in rows}
    found = []
    for labelled in queries:
        words: list[str] = []
        for doc_id in sorted(labelled.relevant):
            if doc_id not in documents:
                continue
            body, value = documents[doc_id]
            added = of(glosses.get(value, "")) if value is not None else []
            words += [w for w in of(labelled.query) if _holds(added, w) and not _holds(of(body), w) and w not in words]
        found.append(Supplied(labelled.query, tuple(words)))
    return found
