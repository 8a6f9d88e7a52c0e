"""What a truncating embedder sees of a long document: its first tokens, searched by cosine (taught in 15_kb_chunking).

multilingual-e5-small has 512 positions. Ollama (``truncate`` is on by default) and
sentence-transformers cut a longer input there, so a whole-document vector describes only the
document's head, and an answer further down cannot be found by it. ``head_texts`` gives those
heads (``labkit.core.tokens.head_of`` with the model's own token count) and ``search_texts``
ranks any texts held in Python by cosine similarity to the query, their vectors taken from the
embedding cache: a few dozen texts need no table of their own. ``vector_agreement`` compares two
embeddings of the same documents, which tells whether the lab's server truncated a whole document
or read all of it (the course's embedded server averages 512-token windows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from labkit.core.chunking import TokenCounter
from labkit.core.ranking import Hit, from_scores
from labkit.core.tokens import head_of
from labkit.retrieval.branches.vector import embeddable
from labkit.store.embedcache import cached_embeddings, cached_query_embedding

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["head_texts", "search_texts", "vector_agreement"]


def head_texts(texts: Mapping[int, str], limit: int, count: TokenCounter) -> dict[int, str]:
    """Each text cut to its first `limit` tokens by `count` (at a whitespace break): what a truncating embedder reads."""
    return {key: head_of(text, limit, count) for key, text in texts.items()}


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def search_texts(lab: Lab, query: str, texts: Mapping[int, str], top_k: int = 10) -> list[Hit]:
    """The top_k of `texts` (``{id: text}``) by cosine similarity to the query; vectors from the embedding cache.

    Taught in 15_kb_chunking. An empty query returns []; ties are broken by id.
    """
    query = embeddable(query)
    if not query.strip() or top_k < 1 or not texts:
        return []
    keys = list(texts)
    vectors = _unit(np.stack(cached_embeddings(lab, [texts[key] for key in keys], "passage")))
    scores = vectors @ _unit(cached_query_embedding(lab, query))
    return from_scores(dict(zip(keys, map(float, scores))))[:top_k]


def vector_agreement(lab: Lab, first: Sequence[str], second: Sequence[str]) -> list[float]:
    """Cosine similarity of the passage vectors of `first[i]` and `second[i]` (from the embedding cache)."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} texts against {len(second)}: compare them in pairs")
    if not first:
        return []
    a = _unit(np.stack(cached_embeddings(lab, list(first), "passage")))
    b = _unit(np.stack(cached_embeddings(lab, list(second), "passage")))
    return [float(x) for x in np.sum(a * b, axis=1)]
