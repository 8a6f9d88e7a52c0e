"""The lab's real vectors for the scale lesson: knowledge-base chunks, news documents, knowledge-base queries.

12_scale measures the shape of these (``labkit.evaluation.vectorshape``) beside the synthetic sets and
runs HNSW on the chunks with the real queries. The chunks are cut by ``heading_chunks`` and embedded
as passages through the embedding cache, so a second run embeds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from labkit.core.corpora import load_corpus
from labkit.core.corpus import DATA_DIR, read_records
from labkit.store.chunking import Chunk, heading_chunks
from labkit.store.embedcache import cached_embeddings

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["REAL_LABEL", "KB_DOCUMENTS", "KB_QUERIES", "KB_CHUNK_SIZE", "KB_CHUNK_OVERLAP", "kb_chunks", "RealVectors", "real_vectors"]

REAL_LABEL = "настоящие векторы e5"  # beside the synthetic sets' labels (labkit.evaluation.synthetic.SYNTHETIC)
KB_DOCUMENTS = DATA_DIR / "kb" / "documents.jsonl"
KB_QUERIES = DATA_DIR / "kb" / "queries.jsonl"
KB_CHUNK_SIZE, KB_CHUNK_OVERLAP = 200, 40  # tokens (word_tokens): about 300 of e5's, below its 512


def kb_chunks(documents: int | None = None, size: int = KB_CHUNK_SIZE, overlap: int = KB_CHUNK_OVERLAP) -> list[Chunk]:
    """The knowledge base's chunks by headings, of its first `documents` documents (default all), in order."""
    records = [record for _, record in read_records(KB_DOCUMENTS)][:documents]
    return [chunk for record in records
            for chunk in heading_chunks(record["id"], record["text"], size, overlap, title=record["title"])]


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
    kept = {chunk.doc_id for chunk in chunks}
    questions = [record["query"] for _, record in read_records(KB_QUERIES)
                 if not record["relevant"] or kept & set(record["relevant"])]  # about these documents, or none
    rows = cached_embeddings(lab, [chunk.indexed for chunk in chunks] + [doc.text for doc in news], "passage")
    return RealVectors(np.vstack(rows).astype(np.float32), [chunk.doc_id for chunk in chunks] + [-doc.id for doc in news],
                       len(chunks), np.vstack(cached_embeddings(lab, questions, "query")).astype(np.float32))
