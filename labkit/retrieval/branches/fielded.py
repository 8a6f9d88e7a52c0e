"""The fielded branch: each document's text embedded with its metadata, e.g. a news item's rubric and company.

Taught in 11_beyond_rrf. A news item is more than its sentence: the corpus files it under a
topic and, often, a company. This is document expansion from the data's own fields, the way a
search engine indexes a page's title and section with its body, and it costs one embedding per
document, once:

    <text>. <Field label>: <the value's gloss, or the value>. ...

The corpus says which fields (``Corpus.fielded``, in order) and how each is glossed
(``Field.glosses``); for the news corpus the text is «body. Тема: <the topic's rubric>.
Компания: <company>.», the rubric being the topic's label in an outside taxonomy, IPTC Media
Topics (``labkit.core.corpora.news.TOPIC_RUBRICS``). Not the agent's glosses: those were written
with the seed queries in view and repeat their words, so a win on those queries would be their
echo (``labkit.evaluation.leakage`` measures it). Texts are built in SQL from the documents table
(the glosses are a parameter), so a changed document or a changed rubric is re-embedded at the
next search (``labkit.retrieval.branches.textvec.TextVectors``, table ``Corpus.derived("fielded_vec")``).

``SEARCH_MODES["fielded_corrected"]`` searches the corrected query (``labkit.retrieval.rewriters.spelling``)
with this branch (11_beyond_rrf tunes it on the tune split).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus
from labkit.core.ranking import Hit
from labkit.retrieval.branches.textvec import TextVectors
from labkit.store.locks import FIELDED_VEC_LOCK

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["FIELDED_VEC_TABLE", "FIELDED_TEXT_SQL", "FIELDED_VECTORS", "fielded_text_sql", "fielded_vectors",
           "fielded_params", "fielded_text", "search_fielded"]


def fielded_text_sql(corpus: Corpus) -> sql.Composed:
    """SQL giving ``(id, text)``: each document's text followed by its fielded metadata, with parameter %(glosses)s."""
    parts: list[sql.Composable] = [sql.Identifier(corpus.text_column)]
    for name in corpus.fielded:
        field = corpus.field(name)
        column = sql.Identifier(name) if field.sql_type == "text" else sql.SQL("{}::text").format(sql.Identifier(name))
        value = (sql.SQL("coalesce(%(glosses)s::jsonb -> {name} ->> {column}, {column})").format(
                     name=sql.Literal(name), column=column) if field.glosses else column)
        part = sql.SQL("{label} || {value}").format(label=sql.Literal(f". {field.label}: "), value=value)
        parts.append(part if field.required else sql.SQL("coalesce({}, '')").format(part))
    return sql.SQL("SELECT id, {text} || '.' AS text FROM {table}").format(
        text=sql.SQL(" || ").join(parts), table=sql.Identifier(corpus.table))


def fielded_vectors(corpus: Corpus) -> TextVectors:
    """The fielded texts' embeddings of `corpus`, kept in its table ``<table>_fielded_vec``."""
    return TextVectors(corpus.derived("fielded_vec"), fielded_text_sql(corpus), FIELDED_VEC_LOCK, corpus.table)


FIELDED_VEC_TABLE = DEFAULT_CORPUS.derived("fielded_vec")  # of the default corpus, as the two below
FIELDED_TEXT_SQL = fielded_text_sql(DEFAULT_CORPUS)
FIELDED_VECTORS = fielded_vectors(DEFAULT_CORPUS)


def fielded_params(corpus: Corpus = DEFAULT_CORPUS) -> dict[str, str]:
    """The parameters of the fielded text SQL: the glosses of the fielded fields' values as JSON."""
    glosses = {name: dict(corpus.field(name).glosses) for name in corpus.fielded if corpus.field(name).glosses}
    return {"glosses": json.dumps(glosses, ensure_ascii=False)}


def fielded_text(lab: Lab) -> tuple[sql.Composable, dict[str, str]]:
    """The fielded text of every document as SQL rows ``(id, text)`` and its parameters (read by re-rankers too)."""
    return fielded_text_sql(lab.corpus), fielded_params(lab.corpus)


def search_fielded(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by cosine similarity of the query to text + fielded metadata. Taught in 11_beyond_rrf."""
    return fielded_vectors(lab.corpus).search(lab, query, top_k, fielded_params(lab.corpus))
