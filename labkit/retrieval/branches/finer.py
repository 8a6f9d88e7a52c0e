"""A finer cut's vectors, each hit counted for the lab's chunk that overlaps it most (taught in 16_kb_codes).

e5 turns a chunk into one point. A window of 200 tokens (the knowledge base's cut, ``KB_CHUNKING``)
often holds the end of one section and the start of the next, or several answers of an FAQ, and its
point lies between their topics: a short answer is diluted by its neighbours. A finer cut by headings
(``Corpus.finer``: the knowledge base's ``KB_FINE``, pieces of at most 60 tokens that never cross a
section) gives every short section a point of its own, but a cut that fine is a poor unit to read,
to cite and to rank by BM25 (a long query's words are spread over several small pieces).

So the knowledge base keeps its cut, and the finer one is only a second index of vectors. ``search_finer``
ranks the finer pieces by cosine distance and gives each hit to the chunk of the lab's own cut that
overlaps it most (both keep their character spans in the document), best hit first. The branch thus
ranks the lab's chunk ids, like every other branch: the pipeline fuses it by RRF, and collapsing,
filters, citations and the document agent are unchanged. The finer cut is loaded (rows and vectors,
``ensure_corpus``) the first time a lab searches it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.corpus import Corpus
from labkit.core.ranking import Hit
from labkit.retrieval.branches.vector import embeddable, vector_sql
from labkit.store.embedcache import cached_query_embedding
from labkit.store.loading import ensure_corpus

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["FANOUT", "finer_problem", "finer_lab", "search_finer"]

FANOUT = 4  # finer pieces read per chunk asked for: several pieces of one chunk count once

# {pieces}: the vector branch's own statement (``vector_sql``) over the finer cut's vectors, %(limit)s pieces
_SEARCH = """
WITH pieces AS ({pieces})
SELECT chunk.id, min(p.distance) AS distance
FROM pieces AS p
JOIN {fine} AS f ON f.id = p.id
CROSS JOIN LATERAL (
    SELECT c.id FROM {chunks} AS c
    WHERE c.{parent} = f.{parent}
    ORDER BY least(c.span_end, f.span_end) - greatest(c.span_start, f.span_start) DESC, c.id
    LIMIT 1
) AS chunk
{where}
GROUP BY chunk.id
ORDER BY distance, chunk.id
LIMIT %(top_k)s
"""


def finer_problem(corpus: Corpus) -> str | None:
    """Why `corpus` has no finer cut to search; None when it has one."""
    return None if corpus.finer is not None else f"the corpus {corpus.name!r} has no finer cut"


def finer_lab(lab: Lab) -> Lab:
    """The lab searching its corpus' finer cut, loaded on the lab's first call (rows and vectors; kept in ``lab.side_loads``)."""
    finer = lab.corpus.finer
    if finer is None:
        raise ValueError(finer_problem(lab.corpus))
    report = lab.side_loads.get(finer.table)
    if report is None or report.model != lab.embed_model:
        report = lab.side_loads[finer.table] = ensure_corpus(lab, finer)
    return dataclasses.replace(lab, corpus=finer, loaded=report)


def search_finer(lab: Lab, query: str, top_k: int = 10, *, within: Sequence[int] | None = None) -> list[Hit]:
    """The top_k chunks of the lab's corpus by the cosine similarity of their best finer piece. Taught in 16_kb_codes.

    An empty or whitespace-only query returns []. `within`: rank only these chunk ids (a metadata filter);
    then every finer piece is read, not the first ``FANOUT * top_k``.
    """
    query = embeddable(query)
    if not query.strip() or top_k < 1 or (within is not None and not within):
        return []
    fine = finer_lab(lab)
    assert fine.loaded is not None  # finer_lab loads it
    embedding = cached_query_embedding(lab, query)
    statement = sql.SQL(_SEARCH).format(
        pieces=vector_sql(fine.loaded.table), fine=sql.Identifier(fine.corpus.table),
        chunks=sql.Identifier(lab.corpus.table), parent=sql.Identifier(str(lab.corpus.parent)),
        where=sql.SQL("WHERE chunk.id = ANY(%(within)s)" if within is not None else ""))
    pieces = FANOUT * top_k if within is None else None  # LIMIT NULL: every piece
    rows = lab.conn.execute(statement, {"embedding": embedding, "limit": pieces, "top_k": top_k,
                                        "within": None if within is None else list(within)}).fetchall()
    return [Hit(chunk, 1.0 - distance) for chunk, distance in rows]
