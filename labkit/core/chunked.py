"""A corpus of chunks made from a corpus of long documents (taught in 15_kb_chunking).

``chunked(documents, spec)`` describes a second corpus over the same source file: each document
record is cut by a ``ChunkSpec`` and each chunk becomes a row of its own table, with the
document's metadata copied beside it, the document's id in ``doc`` (the corpus' ``parent``)
and the chunk's character span in the document (``span_start``, ``span_end``), so an answer's
span can be checked against it. What is indexed is ``Chunk.indexed``: the title and section
path, then the chunk's text (the bare text for a spec with ``headed=False``). A chunk's id is
``doc * 1000 + number``: stable while the document and the cut stay the same.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from labkit.core.chunking import ChunkSpec
from labkit.core.corpus import ID_COLUMN, MAX_ID, Corpus, DataError, Field

__all__ = ["CHUNKS_PER_DOCUMENT", "PARENT", "chunked", "chunk_id"]

CHUNKS_PER_DOCUMENT = 1000  # chunk ids are doc * 1000 + number
PARENT = "doc"  # the field of a chunk that holds its document's id
CHUNK_FIELDS = (
    Field(PARENT, "документ", "integer"),
    Field("section", "раздел", required=False),
    Field("span_start", "начало фрагмента в документе", "integer"),
    Field("span_end", "конец фрагмента в документе", "integer"),
)


def chunk_id(doc_id: int, number: int) -> int:
    """The id of chunk `number` of document `doc_id`."""
    return doc_id * CHUNKS_PER_DOCUMENT + number


def chunked(documents: Corpus, spec: ChunkSpec, *, name: str | None = None, table: str | None = None,
            title_field: str = "title", **changes: Any) -> Corpus:
    """The corpus of `documents` cut by `spec`: one row per chunk in `table` (default ``<table>_chunks_<spec>``).

    Every field of `documents` is copied to its chunks; `changes` are further ``Corpus`` attributes
    (``fielded``, ``queries``, ...). The source file, its checks and its error messages stay the documents'.
    """
    if title_field not in {f.name for f in documents.fields}:
        raise ValueError(f"{documents.name}: no field {title_field!r} to put in front of each chunk")

    def units(record: dict[str, Any], where: str) -> list[dict[str, Any]]:
        doc = documents.document(record, where)  # the document's own checks, naming file:line
        if doc.id * CHUNKS_PER_DOCUMENT + CHUNKS_PER_DOCUMENT - 1 > MAX_ID:
            raise DataError(f"{where}: document id {doc.id} is too large for chunk ids (doc * {CHUNKS_PER_DOCUMENT})")
        chunks = spec.cut(doc.id, doc.text, getattr(doc, title_field))
        if len(chunks) > CHUNKS_PER_DOCUMENT:
            raise DataError(f"{where}: {len(chunks)} chunks, more than {CHUNKS_PER_DOCUMENT}; cut with a larger size")
        shared = {f.name: record[f.name] for f in documents.fields}
        return [{**shared, ID_COLUMN: chunk_id(doc.id, c.number), documents.text_field: spec.indexed(c), PARENT: doc.id,
                 "section": " › ".join(c.section) or None, "span_start": c.start, "span_end": c.end}
                for c in chunks]

    table = table or f"{documents.table}_chunks_{spec.slug}"
    return dataclasses.replace(
        documents, name=name or f"{documents.name}_{spec.slug}", table=table,
        fields=(*CHUNK_FIELDS, *documents.fields), units=units, parent=PARENT, fixed_names={}, **changes)
