"""Unit tests of the query/document text rules per embedding-model family (labkit.embedding)."""

from __future__ import annotations

import dataclasses

import pytest

import labkit as lk
from labkit import embedding


@pytest.mark.parametrize("model", ["multilingual-e5-small:q4", "intfloat/multilingual-e5-large", "e5-base:latest"])
def test_e5_family_gets_query_and_passage_prefixes(model):
    assert lk.query_text("золото цена", model) == "query: золото цена"
    assert lk.document_text("Цена золота выросла", model) == "passage: Цена золота выросла"


def test_qwen3_embedding_instructs_queries_only():
    assert lk.query_text("золото цена", "qwen3-embedding:0.6b") == (
        "Instruct: Given a news search query, retrieve news articles that answer it\nQuery: золото цена")
    assert lk.document_text("Цена золота выросла", "qwen3-embedding:0.6b") == "Цена золота выросла"


@pytest.mark.parametrize("model", ["nomic-embed-text", "bge-m3", "mxbai-embed-large:335m", "qwen3:1.7b"])
def test_unknown_families_are_left_unchanged(model):
    assert lk.query_text("ставка", model) == "ставка"
    assert lk.document_text("ставка", model) == "ставка"


def test_client_points_at_the_configured_host():
    settings = dataclasses.replace(lk.get_settings(), ollama_host="http://127.0.0.1:9")
    assert str(embedding.client(settings)._client.base_url).rstrip("/") == "http://127.0.0.1:9"
