"""Coverage re-ranking: the head of a ranking reordered by how many query words each document holds (issue 11).

A dense embedder rates closeness of meaning as a whole. For «золотая медаль» the small e5
puts «Бронзовую медаль завоевала теннисистка» first: it says «медаль» outright, while the
news of gold won at a championship say «взял золото». Search engines have long preferred
documents that hold *more of the query's words* (coordination-level matching; Lucene's
classic ``coord`` factor). Read against the fielded text (``labkit.retrieval.branches.fielded``: body, topic
gloss, company), the championship news hold both words, «золот» in the body and «медали»
in the sport gloss, and the bronze news holds one.

``rerank_by_coverage`` takes the first `depth` hits of a ranking and sorts them by the
number of the query's lexemes their fielded text covers; ties keep the ranking's order,
and the hits below the head stay where they were. A query lexeme is covered when the
text has it or an inflection of it: the Snowball stemmer cuts «медаль» to «медал» but
«медали» to «меда», and ``labkit.retrieval.rewriters.spelling.same_word`` joins such stems.

The head size is the one parameter. ``labkit.evaluation.retrieval.pick_coverage_depth`` chooses it on labelled
queries; 11_beyond_rrf runs it on the tune split, and ``COVERAGE_DEPTH`` is that choice.
Only the head is reordered, so a document the ranking missed is never pulled in by a
shared word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.ranking import Hit
from labkit.retrieval.branches.bm25 import query_lexemes
from labkit.retrieval.branches.fielded import fielded_text
from labkit.retrieval.rewriters.spelling import same_word

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.retrieval.fusion import SearchMode

__all__ = ["COVERAGE_DEPTH", "COVERAGE_DEPTHS", "covered_lexemes", "rerank_by_coverage", "covered"]

COVERAGE_DEPTHS = (4, 5, 6, 10)  # head sizes tried (a head of 3 cannot change Recall@3)
COVERAGE_DEPTH = 4  # the tune split's choice (11_beyond_rrf); tests/test_coverage.py checks it still is

_LEXEMES_SQL = """
    WITH x AS ({texts})
    SELECT x.id, array(SELECT t.lexeme FROM unnest(to_tsvector({config}, x.text)) AS t)
    FROM x WHERE x.id = ANY(%(ids)s)
"""


def _covers(text_lexemes: Sequence[str], lexeme: str) -> bool:
    return any(other == lexeme or same_word(lexeme, other) for other in text_lexemes)


def covered_lexemes(lab: Lab, query: str, doc_ids: Sequence[int]) -> dict[int, list[str]]:
    """For each document, the query's lexemes its fielded text holds (an inflection counts). Taught in 11_beyond_rrf."""
    if not doc_ids:
        return {}
    lexemes = query_lexemes(lab.conn, query, lab.corpus)
    texts, params = fielded_text(lab)
    statement = sql.SQL(_LEXEMES_SQL).format(texts=texts, config=sql.Literal(lab.corpus.ts_config))
    rows = lab.conn.execute(statement, {**params, "ids": list(doc_ids)}).fetchall()
    held = dict(rows)
    return {doc_id: [q for q in lexemes if _covers(held.get(doc_id, ()), q)] for doc_id in doc_ids}


def rerank_by_coverage(lab: Lab, query: str, hits: Sequence[Hit], depth: int = COVERAGE_DEPTH) -> list[Hit]:
    """The first `depth` hits sorted by covered query lexemes (stable), then the rest as they were.

    A hit's score becomes the number of query lexemes it covers; below the head it is 0.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    head = list(hits[:depth])
    counts = {doc_id: len(found) for doc_id, found in covered_lexemes(lab, query, [h.doc_id for h in head]).items()}
    head.sort(key=lambda hit: -counts[hit.doc_id])  # sort is stable: ties keep the ranking's order
    return [Hit(h.doc_id, float(counts[h.doc_id])) for h in head] + [Hit(h.doc_id, 0.0) for h in hits[depth:]]


def covered(search: SearchMode, depth: int = COVERAGE_DEPTH) -> SearchMode:
    """The search mode `search` with its first `depth` hits re-ranked by coverage. Taught in 11_beyond_rrf."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")

    def search_covered(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
        if top_k < 1:
            return []
        return rerank_by_coverage(lab, query, search(lab, query, max(top_k, depth)), depth)[:top_k]

    name = getattr(search, "__name__", "search")
    search_covered.__name__ = f"{name}_covered"
    search_covered.__doc__ = f"``{name}`` with its first {depth} hits re-ranked by coverage (labkit.retrieval.rerankers.coverage)."
    return search_covered
