"""Embeddings cached in Postgres by (model, kind, text), so a re-run embeds nothing (taught in 03_vector).

``kind`` is ``passage`` for documents and ``query`` for search queries: the model
prefixes them differently, so the same text has two different vectors. Every call
that reaches the model server is counted in ``EMBEDDING_STATS``; a missing passage whose vector the
course ships for this very model and weights (``labkit.store.shipped``) is taken from there instead,
counted apart.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from labkit.models import embedding
from labkit.store.shipped import shipped_for, text_key

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["CACHE_DDL", "as_array", "EmbeddingStats", "EMBEDDING_STATS", "cached_embeddings", "cached_query_embedding"]

Kind = Literal["passage", "query"]

CACHE_DDL = """
CREATE TABLE IF NOT EXISTS embedding_cache (
    model      text        NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('passage', 'query')),
    text_hash  bytea       NOT NULL,
    text       text        NOT NULL,
    embedding  vector      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, kind, text_hash)
)
"""


@dataclass
class EmbeddingStats:
    """How many times this process asked the model server for embeddings, for how many texts; how many came shipped."""

    calls: int = 0
    texts: int = 0
    shipped: int = 0  # passages taken from the course's file of vectors (labkit.store.shipped), no request
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, texts: int) -> None:
        """Count one request to the model server for `texts` texts."""
        with self._lock:
            self.calls += 1
            self.texts += texts

    def add_shipped(self, texts: int) -> None:
        """Count `texts` passages whose vectors came from the course's file."""
        with self._lock:
            self.shipped += texts


EMBEDDING_STATS = EmbeddingStats()


def as_array(vector: object) -> np.ndarray:
    """A float32 array from a pgvector ``Vector`` (what psycopg loads), a list or an array. Taught in 03_vector."""
    to_numpy = getattr(vector, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else vector, dtype=np.float32)


def _printable(text: str) -> str:
    """Postgres text cannot hold NUL or lone surrogates; the key is the hash, this is for reading."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def cached_embeddings(lab: Lab, texts: Sequence[str], kind: Kind) -> list[np.ndarray]:
    """Embeddings of `texts` from the cache table, asking the model only for the missing ones. Taught in 03_vector.

    Needs the ``embedding_cache`` table (created by ``ensure_corpus``). A missing passage the course ships
    a vector of, for the lab's model and the weights its server lists, is taken from the file.
    """
    conn, model = lab.conn, lab.embed_model
    hashes = [text_key(text) for text in texts]
    found: dict[bytes, np.ndarray] = {}
    if hashes:
        rows = conn.execute(
            """
            SELECT text_hash, embedding FROM embedding_cache
            WHERE model = %(model)s AND kind = %(kind)s AND text_hash = ANY(%(hashes)s)
            """,
            {"model": model, "kind": kind, "hashes": list(set(hashes))},
        ).fetchall()
        found = {bytes(key): as_array(vec) for key, vec in rows}
    missing = {text: key for text, key in zip(texts, hashes) if key not in found}  # each text once, in order
    if missing and kind == "passage":
        from_file = shipped_for(lab)
        taken = {text: from_file[key] for text, key in missing.items() if key in from_file}
        if taken:
            _store(lab, kind, list(taken), list(taken.values()))
            EMBEDDING_STATS.add_shipped(len(taken))
            found.update((missing.pop(text), vector) for text, vector in taken.items())
    if missing:
        embed = embedding.embed_documents if kind == "passage" else embedding.embed_queries
        asked = list(missing)
        vectors = embed(lab.models, model, asked)
        for start in range(0, len(asked), embedding.BATCH_SIZE):  # one request per batch
            EMBEDDING_STATS.add(len(asked[start : start + embedding.BATCH_SIZE]))
        _store(lab, kind, asked, vectors)
        for key, vec in zip(missing.values(), vectors):
            found[key] = as_array(vec)
    return [found[key] for key in hashes]


def _store(lab: Lab, kind: Kind, texts: Sequence[str], vectors: Sequence[object]) -> None:
    """Write the vectors of `texts` to the cache table (a row another process wrote first is kept)."""
    with lab.conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO embedding_cache (model, kind, text_hash, text, embedding)
            VALUES (%s, %s, %s, %s, %s)
            ON CONFLICT DO NOTHING
            """,
            [(lab.embed_model, kind, text_key(text), _printable(text), as_array(vec)) for text, vec in zip(texts, vectors)],
        )


def cached_query_embedding(lab: Lab, query: str) -> np.ndarray:
    """The embedding of one search query: from the lab's memory, else cached like passages. Taught in 03_vector."""
    key = (lab.embed_model, text_key(query))
    vector = lab.query_vectors.get(key)
    if vector is None:
        vector = cached_embeddings(lab, [query], "query")[0]
    lab.remember_query_vector(key, vector)
    return vector
