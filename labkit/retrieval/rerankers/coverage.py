"""Coverage re-ranking: the head of a ranking reordered by how many query words each document holds.

Taught in 11_beyond_rrf.

A dense embedder rates closeness of meaning as a whole, and may put first a document that
shares one word of the query outright over one that holds several of them. Search engines have
long preferred documents that hold *more of the query's words* (coordination-level matching;
Lucene's classic ``coord`` factor). The text read is by default the fielded text
(``labkit.retrieval.branches.fielded``: body, topic rubric, company).

``rerank_by_coverage`` takes the first `depth` hits of a ranking and sorts them by the
number of the query's lexemes their text covers (the text a re-ranker reads is its
parameter, by default the fielded text); ties keep the ranking's order,
and the hits below the head stay where they were. A query lexeme is covered when the
text has it or an inflection of it: the Snowball stemmer cuts «медаль» to «медал» but
«медали» to «меда», and ``labkit.retrieval.rewriters.spelling.same_word`` joins such stems.

The head size is the one parameter. ``labkit.evaluation.retrieval.pick_coverage_depth`` chooses it on labelled
queries; 11_beyond_rrf runs it on the tune split, and ``labkit.retrieval.modes.COVERAGE_DEPTH`` is that choice.
Only the head is reordered, so a document the ranking missed is never pulled in by a
shared word. ``Coverage(depth, text)`` is the re-rank step of a search pipeline
(``labkit.retrieval.pipeline``), printed ``coverage@4``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.ranking import Hit
from labkit.retrieval.branches.bm25 import query_lexemes
from labkit.retrieval.branches.fielded import fielded_text
from labkit.retrieval.rewriters.spelling import same_word

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["TextSource", "covered_lexemes", "rerank_by_coverage", "Coverage"]

TextSource = Callable[["Lab"], tuple[sql.Composable, dict[str, str]]]
"""The text a re-ranker reads: ``text(lab)`` gives SQL rows ``(id, text)`` and its parameters, like ``fielded_text``."""

_LEXEMES_SQL = """
    WITH x AS ({texts})
    SELECT x.id, array(SELECT t.lexeme FROM unnest(to_tsvector({config}, x.text)) AS t)
    FROM x WHERE x.id = ANY(%(ids)s)
"""


def _covers(text_lexemes: Sequence[str], lexeme: str) -> bool:
    return any(other == lexeme or same_word(lexeme, other) for other in text_lexemes)


def covered_lexemes(lab: Lab, query: str, doc_ids: Sequence[int], text: TextSource = fielded_text) -> dict[int, list[str]]:
    """For each document, the query's lexemes its `text` holds (an inflection counts). Taught in 11_beyond_rrf."""
    if not doc_ids:
        return {}
    lexemes = query_lexemes(lab.conn, query, lab.corpus)
    texts, params = text(lab)
    statement = sql.SQL(_LEXEMES_SQL).format(texts=texts, config=sql.Literal(lab.corpus.ts_config))
    rows = lab.conn.execute(statement, {**params, "ids": list(doc_ids)}).fetchall()
    held = dict(rows)
    return {doc_id: [q for q in lexemes if _covers(held.get(doc_id, ()), q)] for doc_id in doc_ids}


def rerank_by_coverage(lab: Lab, query: str, hits: Sequence[Hit], depth: int,
                       text: TextSource = fielded_text) -> list[Hit]:
    """The first `depth` hits sorted by the query lexemes their `text` covers (stable), then the rest as they were.

    A hit's score becomes the number of query lexemes it covers; below the head it is 0.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    head = list(hits[:depth])
    counts = {doc_id: len(found) for doc_id, found in covered_lexemes(lab, query, [h.doc_id for h in head], text).items()}
    head.sort(key=lambda hit: -counts[hit.doc_id])  # sort is stable: ties keep the ranking's order
    return [Hit(h.doc_id, float(counts[h.doc_id])) for h in head] + [Hit(h.doc_id, 0.0) for h in hits[depth:]]


@dataclass(frozen=True)
class Coverage:
    """The re-rank step of a search pipeline: ``rerank_by_coverage`` with head `depth`, reading `text`. Taught in 11_beyond_rrf.

    ``str()`` is ``coverage@<depth>``, with the text's name added when it is not the fielded text.
    """

    depth: int
    text: TextSource = fielded_text

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError(f"depth must be at least 1, got {self.depth}")

    def __call__(self, lab: Lab, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return rerank_by_coverage(lab, query, hits, self.depth, self.text)

    def __str__(self) -> str:
        shown = "" if self.text is fielded_text else f"({getattr(self.text, '__name__', 'text')})"
        return f"coverage@{self.depth}{shown}"
