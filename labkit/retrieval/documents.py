"""From ranked chunks to ranked documents: a document ranks where its best chunk ranks (taught in 15_kb_chunking).

A corpus of chunks (``Corpus.parent`` set, e.g. the knowledge base's ``kb_chunks``) is searched
chunk by chunk, but a reader, Recall@k and the labelled queries count documents. ``collapse``
keeps each document's first (best) chunk; ``document_hits`` asks a search mode for enough chunks
that `top_k` distinct documents are likely among them (``CHUNK_DEPTH`` at least) and collapses
them. On a corpus of whole documents both change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.corpus import ID_COLUMN
from labkit.core.ranking import Hit

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.retrieval.fusion import SearchMode

__all__ = ["CHUNK_DEPTH", "parents", "collapse", "document_hits"]

CHUNK_DEPTH = 50  # chunks fetched at least to fill a document ranking (the knowledge base has 6-8 chunks a document)


def parents(lab: Lab, unit_ids: Sequence[int]) -> dict[int, int]:
    """The document of each chunk id of the lab's corpus (ids that are no row of it are left out)."""
    parent = lab.corpus.parent
    if parent is None:
        return {unit: unit for unit in unit_ids}
    rows = lab.conn.execute(
        sql.SQL("SELECT {id}, {parent} FROM {table} WHERE {id} = ANY(%s)").format(
            id=sql.Identifier(ID_COLUMN), parent=sql.Identifier(parent), table=sql.Identifier(lab.corpus.table)),
        (list(unit_ids),),
    ).fetchall()
    return {unit: doc for unit, doc in rows}


def collapse(hits: Sequence[Hit], parent_of: Mapping[int, int]) -> list[Hit]:
    """Each document once, where its best chunk ranked, with that chunk's score. Taught in 15_kb_chunking."""
    seen: set[int] = set()
    documents = []
    for hit in hits:
        doc = parent_of.get(hit.doc_id)
        if doc is not None and doc not in seen:
            seen.add(doc)
            documents.append(Hit(doc, hit.score))
    return documents


def document_hits(lab: Lab, search: SearchMode, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents of `search` for `query`: its chunks collapsed when the lab's corpus has chunks."""
    if lab.corpus.parent is None:
        return search(lab, query, top_k)
    chunks = search(lab, query, max(CHUNK_DEPTH, 5 * top_k))
    return collapse(chunks, parents(lab, [hit.doc_id for hit in chunks]))[:top_k]
