"""Unit tests of the query/document text rules per embedding-model family (labkit.models.embedding)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import labkit as lk
from labkit.models import embedding


@pytest.mark.parametrize("model", ["multilingual-e5-small:q4", "intfloat/multilingual-e5-large", "e5-base:latest"])
def test_e5_family_gets_query_and_passage_prefixes(model):
    assert lk.query_text("золото цена", model) == "query: золото цена"
    assert lk.document_text("Цена золота выросла", model) == "passage: Цена золота выросла"


def test_qwen3_embedding_instructs_queries_only():
    # Qwen3-Embedding's model card: f'Instruct: {task_description}\nQuery:{query}' -- no space after "Query:".
    assert lk.query_text("золото цена", "qwen3-embedding:0.6b") == (
        "Instruct: Given a news search query, retrieve news articles that answer it\nQuery:золото цена")
    assert lk.document_text("Цена золота выросла", "qwen3-embedding:0.6b") == "Цена золота выросла"


@pytest.mark.parametrize("model", ["nomic-embed-text", "bge-m3", "mxbai-embed-large:335m", "qwen3:1.7b",
                                   "qwen2.5-coder-embed:0.5b"])
def test_unknown_families_are_left_unchanged(model):
    assert embedding.model_family(model) == "plain"
    assert lk.query_text("ставка", model) == "ставка"
    assert lk.document_text("ставка", model) == "ставка"


@pytest.mark.parametrize("family", sorted(embedding.FORMATS))
def test_every_family_row_is_applied_and_cites_its_source(family):
    """One table: query_text/document_text are exactly the row's prefixes, and each row names its source."""
    model = {"e5": "multilingual-e5-small:q4", "qwen3-embedding": "qwen3-embedding:0.6b", "plain": "bge-m3"}[family]
    row = embedding.FORMATS[family]
    assert embedding.model_family(model) == family
    assert lk.query_text("{текст}", model) == row.query_prefix + "{текст}"  # braces in the text stay as they are
    assert lk.document_text("{текст}", model) == row.document_prefix + "{текст}"
    assert row.source.strip()


class RecordingClient:
    """A FAKE model client that records /api/embed requests (to check what labkit sends, not what a model does)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, list[str]]] = []

    def embed(self, model: str, input: list[str]) -> SimpleNamespace:
        self.requests.append((model, list(input)))
        return SimpleNamespace(embeddings=[[float(len(text))] for text in input])


def test_embed_functions_use_the_client_and_model_they_are_given():
    client = RecordingClient()
    assert embedding.embed_query(client, "e5-small", "ставка") == [float(len("query: ставка"))]  # type: ignore[arg-type]
    texts = [f"новость {i}" for i in range(embedding.BATCH_SIZE + 3)]
    vectors = embedding.embed_documents(client, "e5-small", texts)  # type: ignore[arg-type]
    assert len(vectors) == len(texts)
    assert [len(batch) for _, batch in client.requests[1:]] == [embedding.BATCH_SIZE, 3]
    assert all(model == "e5-small" for model, _ in client.requests)
    assert client.requests[1][1][0] == "passage: новость 0"
    queries = embedding.embed_queries(client, "e5-small", texts)  # type: ignore[arg-type]
    assert queries == [[float(len(f"query: {t}"))] for t in texts]  # in input order, with the query prefix
    assert [len(batch) for _, batch in client.requests[3:]] == [embedding.BATCH_SIZE, 3]
