"""The lab's real vectors for the scale lesson: knowledge-base chunks, news documents, knowledge-base queries.

12_scale measures the shape of these (``labkit.evaluation.vectorshape``) beside the synthetic sets and
runs HNSW on the chunks with the real queries. The chunks are the knowledge-base corpus' own
(``labkit.core.corpora.kb.KB``, cut by ``KB_CHUNKING``), embedded as passages through the embedding
cache, so a second run embeds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from labkit.core.corpora import load_corpus
from labkit.core.corpora.kb import KB, KB_QUERIES
from labkit.core.corpus import Document, read_records
from labkit.store.embedcache import cached_embeddings

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["REAL_LABEL", "kb_chunks", "RealVectors", "real_vectors"]

REAL_LABEL = "настоящие векторы e5"  # beside the synthetic sets' labels (labkit.evaluation.synthetic.SYNTHETIC)


def _parent(chunk: Document) -> int:
    """The id of the document a chunk of ``KB`` was cut from."""
    return int(chunk._asdict()[str(KB.parent)])


def kb_chunks(documents: int | None = None) -> list[Document]:
    """The knowledge base's chunks (the corpus ``KB``), of its first `documents` documents (default all), in order."""
    chunks = KB.documents()
    kept = sorted({_parent(chunk) for chunk in chunks})[:documents]
    return [chunk for chunk in chunks if _parent(chunk) in kept]


class RealVectors(NamedTuple):
    """Embeddings by the lab's model: rows (knowledge-base chunks, then news documents) and query vectors."""

    rows: np.ndarray  # (chunks + news, dim), float32
    documents: list[int]  # each row's document: a knowledge-base id, or -id for a news document
    chunks: int  # how many of the rows are knowledge-base chunks (the first ones)
    queries: np.ndarray  # the knowledge base's labelled queries, embedded as queries


def real_vectors(lab: Lab, documents: int | None = None) -> RealVectors:
    """The real vectors of 12_scale, from the embedding cache (what is missing is embedded once). Taught in 12_scale.

    `documents` limits the knowledge base to its first documents (a quicker run); the queries are
    those about them.
    """
    chunks = kb_chunks(documents)
    news = load_corpus()
    kept = {_parent(chunk) for chunk in chunks}
    questions = [record["query"] for _, record in read_records(KB_QUERIES)
                 if not record["relevant"] or kept & set(record["relevant"])]  # about these documents, or none
    rows = cached_embeddings(lab, [chunk.text for chunk in chunks] + [doc.text for doc in news], "passage")
    return RealVectors(np.vstack(rows).astype(np.float32), [_parent(chunk) for chunk in chunks] + [-doc.id for doc in news],
                       len(chunks), np.vstack(cached_embeddings(lab, questions, "query")).astype(np.float32))
