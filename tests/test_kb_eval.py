"""`eval --corpus kb`: the same JSON contract, rankings of knowledge-base documents collapsed from chunks."""

from __future__ import annotations

import json

import pytest

import labkit as lk
from labkit.cli import main as cli_main
from labkit.core.corpora.kb import KB, KB_DOCUMENTS
from labkit.retrieval.documents import collapse, document_hits, parents

DOC_IDS = {doc.id for doc in KB_DOCUMENTS.documents()}


@pytest.mark.services
def test_eval_on_the_knowledge_base_keeps_the_contract_and_ranks_documents(settings, capsys, tmp_path):
    queries = tmp_path / "kb.jsonl"
    queries.write_text("\n".join(json.dumps(record, ensure_ascii=False) for record in (
        {"query": "артикул 7748-К", "relevant": [1], "note": "extra fields are ignored"},
        {"query": "как вернуть телевизор, купленный онлайн", "relevant": [1, 3, 11]},
    )) + "\n", encoding="utf-8")
    assert cli_main(["eval", "--corpus", "kb", "--queries", str(queries), "--k", "5", "--json",
                     "--modes", "vector,hybrid"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["k"] == 5 and list(data["modes"]) == ["vector", "hybrid"]
    assert set(data["modes"]["hybrid"]) == {"recall", "mrr", "ndcg"}
    for record in data["queries"]:
        assert set(record) == {"query", "relevant", "vector", "hybrid"}
        for mode in ("vector", "hybrid"):
            ranking = record[mode]
            assert ranking and set(ranking) <= DOC_IDS and len(set(ranking)) == len(ranking), "documents, each once"


@pytest.mark.services
def test_a_document_ranks_where_its_best_chunk_ranks_in_the_database(settings):
    with lk.open_lab(settings, corpus=KB) as lab:
        chunks = lk.SEARCH_MODES["hybrid"](lab, "подменный телевизор на время ремонта", 50)
        of = parents(lab, [hit.doc_id for hit in chunks])
        assert set(of) == {hit.doc_id for hit in chunks} and all(of[c] == c // 1000 for c in of)
        documents = document_hits(lab, lk.SEARCH_MODES["hybrid"], "подменный телевизор на время ремонта", 10)
        assert documents == collapse(chunks, of)[:10]
        assert lk.ids(documents)[0] == of[chunks[0].doc_id]
