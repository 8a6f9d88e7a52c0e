"""Embeddings through the Ollama API, with each model family's query/document format (taught in 03_vector).

Asymmetric embedding models want queries and documents marked differently. ``FORMATS`` is
the one table of those rules, one row per family, each citing where the rule comes from;
a model of any other family gets its text unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ollama

__all__ = ["embed_query", "embed_queries", "embed_documents", "query_text", "document_text", "model_family", "TextFormat",
           "FORMATS", "QWEN3_TASK", "BATCH_SIZE"]

QWEN3_TASK = "Given a news search query, retrieve news articles that answer it"
BATCH_SIZE = 32  # texts per /api/embed request


@dataclass(frozen=True)
class TextFormat:
    """How one embedding-model family wants its input: a prefix for queries, one for documents."""

    query_prefix: str
    document_prefix: str
    source: str  # where the rule is documented


FORMATS: dict[str, TextFormat] = {
    "e5": TextFormat("query: ", "passage: ",
                     "intfloat/multilingual-e5-small model card: 'query: ' and 'passage: ' prefixes"),
    "qwen3-embedding": TextFormat(f"Instruct: {QWEN3_TASK}\nQuery:", "",
                                  "Qwen/Qwen3-Embedding-0.6B model card: get_detailed_instruct() gives "
                                  "f'Instruct: {task}\\nQuery:{query}' (no space); documents as they are"),
    "plain": TextFormat("", "", "no documented rule: the text is embedded unchanged"),
}


def model_family(model: str) -> str:
    """The row of FORMATS for a model name (``multilingual-e5-small:q4`` → ``e5``); ``plain`` when unknown."""
    name = model.lower().rsplit("/", 1)[-1]
    if "e5" in name.split(":", 1)[0].replace("_", "-").split("-"):
        return "e5"
    if name.startswith("qwen3-embedding"):
        return "qwen3-embedding"
    return "plain"


def query_text(text: str, model: str) -> str:
    """The text to embed for a search query with model (taught in 03_vector)."""
    return FORMATS[model_family(model)].query_prefix + text


def document_text(text: str, model: str) -> str:
    """The text to embed for a document with model (taught in 03_vector)."""
    return FORMATS[model_family(model)].document_prefix + text


def embed_query(models: ollama.Client, model: str, text: str) -> list[float]:
    """One query vector from `model` on the model server `models` (taught in 03_vector)."""
    response = models.embed(model=model, input=[query_text(text, model)])
    return list(response.embeddings[0])


def embed_queries(models: ollama.Client, model: str, texts: Sequence[str]) -> list[list[float]]:
    """Query vectors, BATCH_SIZE texts per request, in input order (many queries at once: an evaluation)."""
    return _batched(models, model, [query_text(t, model) for t in texts])


def embed_documents(models: ollama.Client, model: str, texts: Sequence[str]) -> list[list[float]]:
    """Document vectors, BATCH_SIZE texts per request, in input order (taught in 03_vector)."""
    return _batched(models, model, [document_text(t, model) for t in texts])


def _batched(models: ollama.Client, model: str, inputs: Sequence[str]) -> list[list[float]]:
    vectors: list[list[float]] = []
    for start in range(0, len(inputs), BATCH_SIZE):
        vectors.extend(list(v) for v in models.embed(model=model, input=list(inputs[start:start + BATCH_SIZE])).embeddings)
    return vectors
