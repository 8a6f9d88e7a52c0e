"""Embeddings through the Ollama API, with each model family's query/document rule (taught in 03_vector).

Asymmetric embedding models want queries and documents marked differently:
e5 expects `query: ` / `passage: ` prefixes; qwen3-embedding expects an instruction line
before a query and the raw document text. Other families get the text unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ollama

__all__ = ["embed_query", "embed_documents", "query_text", "document_text", "QWEN3_TASK", "BATCH_SIZE"]

QWEN3_TASK = "Given a news search query, retrieve news articles that answer it"
BATCH_SIZE = 32  # texts per /api/embed request


def _family(model: str) -> str:
    name = model.lower().rsplit("/", 1)[-1]
    if "e5" in name.split(":", 1)[0].replace("_", "-").split("-"):
        return "e5"
    if name.startswith("qwen3-embedding"):
        return "qwen3-embedding"
    return "other"


def query_text(text: str, model: str) -> str:
    """The text to embed for a search query with model (taught in 03_vector)."""
    family = _family(model)
    if family == "e5":
        return f"query: {text}"
    if family == "qwen3-embedding":
        return f"Instruct: {QWEN3_TASK}\nQuery: {text}"
    return text


def document_text(text: str, model: str) -> str:
    """The text to embed for a document with model (taught in 03_vector)."""
    return f"passage: {text}" if _family(model) == "e5" else text


def embed_query(models: ollama.Client, model: str, text: str) -> list[float]:
    """One query vector from `model` on the model server `models` (taught in 03_vector)."""
    response = models.embed(model=model, input=[query_text(text, model)])
    return list(response.embeddings[0])


def embed_documents(models: ollama.Client, model: str, texts: Sequence[str]) -> list[list[float]]:
    """Document vectors, BATCH_SIZE texts per request, in input order (taught in 03_vector)."""
    vectors: list[list[float]] = []
    for start in range(0, len(texts), BATCH_SIZE):
        batch = [document_text(t, model) for t in texts[start:start + BATCH_SIZE]]
        vectors.extend(list(v) for v in models.embed(model=model, input=batch).embeddings)
    return vectors
