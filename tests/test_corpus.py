"""The corpus and labelled queries load, are consistent, and bad lines are reported by file:line."""

from __future__ import annotations

import pytest

from labkit.core.corpora import load_corpus, load_queries
from labkit.core.corpora.news import COMPANIES, TONES, TOPICS
from labkit.core.corpus import DataError


def test_corpus_has_thirty_documents_with_unique_ids():
    docs = load_corpus()
    assert [doc.id for doc in docs] == list(range(1, 31))
    assert all(doc.text.strip() for doc in docs)


def test_vocabularies_are_derived_from_the_data():
    docs = load_corpus()
    assert set(TOPICS) == {doc.topic for doc in docs}
    assert "sport" in TOPICS and "monetary" in TOPICS
    assert set(TONES) == {"negative", "neutral", "positive"}
    assert "ЦБ" in COMPANIES and None not in COMPANIES


def test_queries_point_at_existing_documents():
    ids = {doc.id for doc in load_corpus()}
    queries = load_queries()
    assert len(queries) == 12
    for labelled in queries:
        assert labelled.relevant and labelled.relevant <= ids, labelled


def test_homonym_documents_are_in_the_corpus():
    texts = {doc.id: doc.text.lower() for doc in load_corpus()}
    gold_metal = [i for i, t in texts.items() if "золот" in t and i in (1, 2, 3, 4, 5)]
    gold_medal = [i for i, t in texts.items() if "золото" in t and i in (6, 7, 8)]
    assert gold_metal and gold_medal


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"query": "x", "relevant": [1]', "not valid JSON"),
        ('["x", [1]]', "expected a JSON object"),
        ('{"relevant": [1]}', "missing field 'query'"),
        ('{"query": "x", "relevant": []}', "non-empty list"),
        ('{"query": "x", "relevant": ["1"]}', "non-empty list"),
        ('{"query": 5, "relevant": [1]}', "field 'query' must be str"),
    ],
)
def test_malformed_query_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "queries.jsonl"
    path.write_text('{"query": "ok", "relevant": [1]}\n\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_queries(path)
    assert f"{path}:3" in str(err.value)
    assert message in str(err.value)


def test_missing_and_empty_query_files(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_queries(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="no queries"):
        load_queries(empty)


def test_duplicate_document_id_is_reported(tmp_path):
    path = tmp_path / "corpus.jsonl"
    doc = '{"id": 1, "text": "a", "company": null, "tone": "neutral", "topic": "x"}'
    path.write_text(doc + "\n" + doc + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"corpus.jsonl:2: duplicate document id 1"):
        load_corpus(path)
