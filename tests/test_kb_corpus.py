"""The knowledge base as corpora: documents and chunks from one file, list fields, no-answer queries, the collapse."""

from __future__ import annotations

import dataclasses
import json

import pytest

from labkit.core.chunked import PARENT, chunk_id, chunked
from labkit.core.chunking import ChunkSpec
from labkit.core.corpora import CORPORA, load_queries
from labkit.core.corpora.kb import KB, KB_CHUNKING, KB_DOCUMENTS, KB_QUERIES
from labkit.core.corpus import DataError, Field
from labkit.core.ranking import Hit
from labkit.evaluation.chunk_sweep import FULL_GRID
from labkit.retrieval.documents import collapse


def test_the_kb_is_a_corpus_of_chunks_named_on_the_command_line():
    assert CORPORA["kb"] is KB and KB.table == "kb_chunks" and KB.parent == PARENT
    assert KB_DOCUMENTS.parent is None and KB_DOCUMENTS.source == KB.source


def test_every_chunk_is_its_documents_text_at_its_span_with_title_and_section_in_front():
    documents = {doc.id: doc for doc in KB_DOCUMENTS.documents()}
    chunks = KB.documents()
    assert len(chunks) > 2 * len(documents), "long documents are cut"
    assert {chunk.doc for chunk in chunks} == set(documents)
    for chunk in chunks:
        doc = documents[chunk.doc]
        piece = doc.text[chunk.span_start:chunk.span_end]
        assert chunk.text.endswith(piece) and chunk.text.startswith(doc.title), chunk.id
        assert chunk.id // 1000 == chunk.doc and (chunk.codes, chunk.type) == (doc.codes, doc.type)


def test_list_fields_are_joined_and_checked(tmp_path):
    doc = {"id": 1, "text": "Текст", "title": "Т", "codes": ["7748-К", "5512-К"]}
    small = dataclasses.replace(KB_DOCUMENTS, name="small", table="small_docs",
                                fields=(Field("title", "заголовок"), Field("codes", "артикулы", many=True)),
                                fielded=(), lexicon=())
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps(doc, ensure_ascii=False) + "\n", encoding="utf-8")
    assert small.documents(path)[0].codes == "7748-К; 5512-К"
    for bad in ("7748-К", [1], [""], ["a; b"]):
        path.write_text(json.dumps({**doc, "codes": bad}, ensure_ascii=False) + "\n", encoding="utf-8")
        with pytest.raises(DataError, match=rf"{path}:1: field 'codes'"):
            small.documents(path)
    with pytest.raises(ValueError, match="stored as text"):
        Field("n", "число", "integer", many=True)


def test_a_bad_document_line_is_named_by_the_chunk_corpus_too(tmp_path):
    lines = KB.source.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    record["date"] = "15.09.2026"
    path = tmp_path / "documents.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(record, ensure_ascii=False)]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:2: field 'date' must be a date"):
        KB.documents(path)


def test_a_chunk_corpus_needs_both_units_and_parent():
    with pytest.raises(ValueError, match="units and parent go together"):
        dataclasses.replace(KB, parent=None)
    with pytest.raises(ValueError, match="units and parent go together"):
        dataclasses.replace(KB, parent="title")


def test_other_cuts_make_other_tables_of_the_same_documents():
    spec = ChunkSpec("fixed", 120, 20)
    other = chunked(KB_DOCUMENTS, spec)
    assert other.table == "kb_documents_chunks_fixed_120_20" and str(spec) == "fixed 120/20"
    assert len(other.documents()) > len(KB.documents()) and KB_CHUNKING in FULL_GRID
    assert chunk_id(7, 3) == 7003
    with pytest.raises(ValueError, match="overlap"):
        ChunkSpec("heading", 100, 100)
    with pytest.raises(ValueError, match="method"):
        ChunkSpec("pages", 100, 0)


def test_no_answer_queries_are_left_out_of_recall_and_others_still_need_relevant(tmp_path):
    kinds = [json.loads(line)["kind"] for line in KB_QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()]
    queries = load_queries(corpus=KB)
    assert len(queries) == len(kinds) - kinds.count("no_answer") and all(q.relevant for q in queries)
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"query": "где?", "relevant": [], "kind": "paraphrase"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="non-empty list"):
        load_queries(path, corpus=KB)


def test_a_document_ranks_where_its_best_chunk_ranks():
    hits = [Hit(2001, 0.9), Hit(1004, 0.8), Hit(2003, 0.7), Hit(9999, 0.6), Hit(3000, 0.5)]
    parent_of = {2001: 2, 1004: 1, 2003: 2, 3000: 3}
    assert collapse(hits, parent_of) == [Hit(2, 0.9), Hit(1, 0.8), Hit(3, 0.5)]
